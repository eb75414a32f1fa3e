"""The Typer application; ``main`` is the console entry point."""
from __future__ import annotations

import typer

from alpharl.cli import bench, data, diag, eval as eval_cmd, slots, train
from alpharl.cli.errors import user_errors

app = typer.Typer(
    name="alpharl",
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
app.command("slots")(slots.slots)
app.command("bench")(bench.bench)
app.add_typer(data.app, name="data", help="LOBSTER market data: inspect the files the simulator replays.")


def main() -> None:
    with user_errors():
        app()
