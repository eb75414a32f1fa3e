"""``alpharl export RUN``: the trained policy as ONNX (acting path) and/or safetensors (every weight)."""
from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from alpharl import export as X
from alpharl.cli.errors import user_errors


def export(
    run: Annotated[Path, typer.Argument(help="Trained run directory (or its checkpoint.npz).", show_default=False)],
    onnx: Annotated[Path | None, typer.Option("--onnx", help="Write the acting path (obs -> 9 logits) as an ONNX model here.", show_default=False)] = None,
    safetensors: Annotated[Path | None, typer.Option("--safetensors", help="Write every weight (online and target networks) as safetensors here.", show_default=False)] = None,
) -> None:
    """Export a trained policy: ONNX for inference outside alpharl, safetensors for the weights."""
    with user_errors():
        written = X.export(run, onnx, safetensors)
    for path in written:
        typer.echo(f"wrote {path}")
