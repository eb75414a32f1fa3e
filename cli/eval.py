"""``alpharl eval RUN``: the trained policy (sampled and greedy) on a held-out window, beside baselines."""
from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from alpharl import evaluate as E
from alpharl import jsontext
from alpharl import target
from alpharl.checkpoint import load_checkpoint
from alpharl.cli.errors import UserError, user_errors
from alpharl.config import TrainConfig
from alpharl.evaluate import ALL, BASELINES, DEFAULT_END, DEFAULT_PERIOD, DEFAULT_START, EVAL_BACKENDS, POLICIES
from alpharl.report import fitted_table, fmt
from alpharl.rundir import CHECKPOINT_FILE, CONFIG_FILE

DEFAULT_EVAL_B = 16


def eval_(
    run: Annotated[Path | None, typer.Argument(help="Trained run directory (config.toml + checkpoint.npz). Optional with a baseline --policy.", show_default=False)] = None,
    data: Annotated[Path | None, typer.Option("--data", help="Market data to evaluate on. (default: the run's data)", show_default=False)] = None,
    start: Annotated[float, typer.Option("--start", help="Window start, as a fraction of the event stream.")] = DEFAULT_START,
    end: Annotated[float, typer.Option("--end", help="Window end, as a fraction of the event stream.")] = DEFAULT_END,
    b: Annotated[int, typer.Option("--b", "-b", help="Backtests run side by side per policy.")] = DEFAULT_EVAL_B,
    steps: Annotated[int | None, typer.Option("--steps", help="Env steps per policy. (default: one pass over the window's events)", show_default=False)] = None,
    seed: Annotated[int | None, typer.Option("--seed", help="Seed of episode starts and sampling. (default: the run's seed)", show_default=False)] = None,
    policy: Annotated[str | None, typer.Option("--policy", help=f"Run this policy alone: {', '.join(ALL)}.", show_default=False)] = None,
    period: Annotated[int, typer.Option("--period", help="Steps per round trip of the periodic baseline.")] = DEFAULT_PERIOD,
    fills: Annotated[Path | None, typer.Option("--fills", help="Write every fill (all policies, with a 'policy' column) here: .parquet, .csv or Arrow.", show_default=False)] = None,
    backend: Annotated[str, typer.Option("--backend", help=f"Simulator: {' | '.join(EVAL_BACKENDS)}.")] = "numpy",
    as_json: Annotated[bool, typer.Option("--json", help="Print the results as JSON for scripts.")] = False,
) -> None:
    """Evaluate a trained policy on a held-out window: PnL, Sharpe, drawdown, trades, win rate, beside baselines."""
    with user_errors():
        if policy is not None and policy not in ALL:
            raise UserError(f"--policy {policy!r}: expected one of {', '.join(ALL)}")
        if backend not in EVAL_BACKENDS:
            raise UserError(f"--backend {backend!r}: expected one of {', '.join(EVAL_BACKENDS)}")
        if backend == "cuda" and target.on_simulator():
            raise UserError("--backend cuda: no GPU here (numba runs the CUDA simulator); use --backend numpy or sim")
        names = [policy] if policy else list(ALL) if run is not None else list(BASELINES)
        params = None
        if run is not None:
            if not run.is_dir():
                raise UserError(f"{run}: no such run directory")
            if not (run / CONFIG_FILE).is_file():
                raise UserError(f"{run}: no {CONFIG_FILE} there (not a run directory?)")
            config = TrainConfig.from_toml(run / CONFIG_FILE)
            if any(n in POLICIES for n in names):
                arrays, _ = load_checkpoint(run / CHECKPOINT_FILE)
                params = E.checkpoint_params(arrays)
        elif policy in POLICIES:
            raise UserError(f"--policy {policy}: needs RUN, a trained run directory")
        else:
            config = TrainConfig()
        if fills is not None and not fills.parent.is_dir():
            raise UserError(f"--fills {fills}: no such directory {fills.parent}")
        setup = E.make_setup(config, None if data is None else str(data), start, end, b, steps,
                             config.seed if seed is None else seed, fills=fills is not None)
        results, fill_tables = E.evaluate(setup, names, params, period, backend)
        if fills is not None:
            E.write_fills(fill_tables, fills)
    out = {
        "run": None if run is None else str(run),
        "data": str(data) if data is not None else "synthetic" if config.synthetic else config.data or "embedded sample",
        "window": None if setup.window is None else {"start": start, "end": end, "first_row": setup.window.first,
                                                     "stop_row": setup.window.stop, "seconds": setup.window.seconds},
        "b": setup.b, "steps": setup.steps, "seed": setup.seed, "episode_steps": setup.sim_params.episode_steps,
        "policies": results,
        "fills": None if fills is None else str(fills),
    }
    if as_json:
        typer.echo(jsontext.dumps(out, indent=1))
        return
    _print_table(out)


#: The eval table's columns, and the order they give way on a narrow console (numbers are never cut).
EVAL_COLUMNS = ("policy", "PnL $", "PnL/backtest $", "Sharpe (ann.)", "Sharpe/step", "max DD $", "trades", "win rate",
                "avg trade $")
EVAL_GIVE_WAY = ("avg trade $", "Sharpe/step", "PnL/backtest $", "win rate", "max DD $", "trades")


def eval_table(out: dict, width: int | None = None):
    w = out["window"]
    where = "synthetic market" if w is None else f"rows {w['first_row']:,}..{w['stop_row']:,}" + (
        f" ({w['seconds']:.0f} s of market time)" if w["seconds"] else "")
    rows = []
    for name, r in out["policies"].items():
        win = "-" if r["win_rate"] is None else f"{r['win_rate']:.1%}"
        rows.append([name, fmt(r["pnl"]), fmt(r["pnl_per_backtest"]), fmt(r["sharpe"]), fmt(r["sharpe_per_step"]),
                     fmt(r["max_drawdown"]), str(r["trades"]), win, fmt(r["avg_trade"])])
    return fitted_table(list(EVAL_COLUMNS), rows, width, [EVAL_COLUMNS.index(c) for c in EVAL_GIVE_WAY],
                        title=f"eval {out['run'] or '(baselines)'}: {where}, B={out['b']}, {out['steps']} steps, "
                              f"seed {out['seed']}", title_justify="left")


def _print_table(out: dict) -> None:
    from rich.console import Console

    console = Console()
    console.print(eval_table(out, console.width))
    if out["fills"]:
        console.print(f"fills written to {out['fills']}")
