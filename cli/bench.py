"""``alpharl bench``: throughput of the training step over B on a GPU."""
from __future__ import annotations

from typing import Annotated

import typer

from alpharl import jsontext, target
from alpharl.config import TrainConfig
from alpharl.cli.errors import UserError, user_errors


def bench(
    b: Annotated[list[int] | None, typer.Option("--b", help="Batch sizes B to measure (repeat the option).")] = None,
    steps: Annotated[int, typer.Option("--steps", min=1, help="Replayed steps timed per B.")] = 200,
    starts: Annotated[bool, typer.Option("--starts/--no-starts", help="Also time cold and warm start (subprocesses).")] = True,
    as_json: Annotated[bool, typer.Option("--json", help="Print the report as JSON.")] = False,
    out: Annotated[str | None, typer.Option("--out", help="Also write the JSON report to this file.")] = None,
    config: Annotated[str | None, typer.Option("--config", help="A run's TOML config: bench its learning and market settings (rollout, switches, [sim]) at the bench's B, K = 1, M = 256.", show_default=False)] = None,
    gpus: Annotated[int | None, typer.Option("--gpus", min=1, help="Data-parallel scaling instead: env-steps/s and scaling efficiency over 1, 2, 4 ... G spawned ranks, one GPU each, at the first --b per GPU.", show_default=False)] = None,
) -> None:
    """Benchmark the training step: µs/step (graph, eager), env-steps/s, sim and learning alone, memory, floor;
    the learning alone against the PyTorch peer where torch is installed."""
    with user_errors():
        # The config first: a bad file is named as such on any machine.
        base = None if config is None else TrainConfig.from_toml(config)
        if target.active() != target.GPU:
            raise UserError("bench needs a GPU (numba runs the CUDA simulator here); run it on a GPU machine")
        # Here, not at the top: alpharl.bench loads the trainer, numba and the kernels (start-up of the CLI).
        from alpharl.bench import DEFAULT_BS, bench_gpus, format_scaling, format_table, run_bench

        bs = b or list(DEFAULT_BS)
        if any(x < 1 for x in bs):
            raise UserError(f"--b {min(bs)}: must be >= 1")
        if gpus is not None:
            from alpharl.launch import visible_gpus

            seen = visible_gpus()
            if gpus > seen:
                raise UserError(f"bench --gpus {gpus}: this machine sees {seen} GPU(s)")
            report, table = bench_gpus(bs[0], steps, gpus), format_scaling
        else:
            report, table = run_bench(bs, steps, starts, base, config), format_table
        if out:
            with open(out, "w") as f:
                f.write(jsontext.dumps(report, indent=1))
        if as_json:
            typer.echo(jsontext.dumps(report, indent=1))
        else:
            from rich.console import Console

            console = Console()
            console.print(table(report, console.width))
