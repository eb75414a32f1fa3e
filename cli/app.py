"""The Typer application; ``main`` is the console entry point."""
from __future__ import annotations

import typer

from alpharl.cli import slots
from alpharl.cli import data
from alpharl.cli.errors import UserError, fail

app = typer.Typer(
    name="alpharl",
    help="GPU-resident actor-critic trainer for limit-order-book trading agents.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
)


@app.callback()
def root() -> None:
    """GPU-resident actor-critic trainer for limit-order-book trading agents."""


app.command("slots")(slots.slots)
app.add_typer(data.app, name="data", help="LOBSTER market data: inspect the files the simulator replays.")


def main() -> None:
    try:
        app()
    except UserError as exc:
        fail(str(exc))
