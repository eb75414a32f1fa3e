"""The Typer application; ``main`` is the console entry point.

Every way the command line can fail ends the same way (alpharl.cli.errors):
one ``alpharl: error: ...`` line and exit 2. ``AlpharlGroup.main`` is the one
place that maps Click's usage errors (a bad type, an unknown option, a missing
argument: Typer's multi-line box otherwise) to that line, and it quiets
Numba's performance warnings for every command.
"""
from __future__ import annotations

import sys
import warnings

import typer
from typer.core import TyperGroup

# The Click that Typer runs on: newer Typers carry their own (typer._click), and a separately
# installed click package is then another module whose exceptions Typer never raises.
try:
    from typer import _click as click
except ImportError:
    import click

from alpharl.cli import bench, data, diag, eval as eval_cmd, export, slots, study, train
from alpharl.cli.errors import EXIT_BAD_INPUT, fail, user_errors

#: Numba's launch-size hint, matched by its message (a filter matches from the message's start, and
#: numba may open it with a terminal highlight escape).
LOW_OCCUPANCY_WARNING = r".*Grid size \d+ will likely result in GPU under-utilization"


def quiet_numba_warnings() -> None:
    """Numba's hints about launch sizes ("Grid size 16 will likely result in GPU under-utilization")
    are noise in the CLI: alpharl's small grids are deliberate."""
    # By message: numba-cuda raises its own NumbaPerformanceWarning class (numba.cuda.core.errors),
    # not numba.core.errors'; the text is the same in both.
    warnings.filterwarnings("ignore", message=LOW_OCCUPANCY_WARNING)


def usage_line(exc: click.ClickException) -> str:
    """Click's message in one line, after the command it concerns (``alpharl train: ...``)."""
    ctx = getattr(exc, "ctx", None)
    where = f"{ctx.command_path}: " if ctx is not None and ctx.command_path else ""
    # no_args_is_help has printed the help and leaves the message empty
    return where + (" ".join(exc.format_message().split()) or "a command is needed (see the list above)")


class AlpharlGroup(TyperGroup):
    """The ``alpharl`` group: Click's own error output replaced by alpharl's one line."""

    def main(self, *args, standalone_mode: bool = True, **kwargs):
        quiet_numba_warnings()
        try:
            rv = super().main(*args, standalone_mode=False, **kwargs)
        except typer.Abort:
            fail("aborted")
        except click.ClickException as exc:
            fail(usage_line(exc))
        if not standalone_mode:
            return rv
        sys.exit(rv if isinstance(rv, int) else 0)


app = typer.Typer(
    name="alpharl",
    cls=AlpharlGroup,
    help="GPU-resident actor-critic trainer for limit-order-book trading agents.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
)


@app.callback()
def root() -> None:
    """GPU-resident actor-critic trainer for limit-order-book trading agents."""


app.command("train")(train.train)
app.command("diag")(diag.diag)
app.command("eval")(eval_cmd.eval_)
app.command("export")(export.export)
app.command("study")(study.study)
app.command("slots")(slots.slots)
app.command("bench")(bench.bench)
app.add_typer(data.app, name="data", help="LOBSTER market data: inspect the files the simulator replays.")


def main() -> None:
    with user_errors():
        app()


__all__ = ["app", "main", "AlpharlGroup", "EXIT_BAD_INPUT"]
