"""``alpharl eval RUN``: the trained policy (sampled and greedy) on what the run held out, beside baselines.

The rows (alpharl.evaluate.plan): by default the complement of the run's training window in each
file it trained on and the whole of each file it never trained on; ``--window A:B`` (or the older
``--start/--end``) names one window for every file, refused where it shares rows with training
unless ``--allow-overlap`` (then marked in-sample in the table and ``"in_sample": true``)."""
from __future__ import annotations

import dataclasses
import math
from pathlib import Path
from typing import Annotated

import typer

from alpharl import evaluate as E
from alpharl import jsontext
from alpharl import target
from alpharl.cli.errors import UserError, user_errors
from alpharl.config import TrainConfig
from alpharl.evaluate import ALL, BASELINES, DEFAULT_END, DEFAULT_PERIOD, DEFAULT_START, EVAL_BACKENDS, POLICIES
from alpharl.report import fitted_table, fmt
from alpharl.rundir import CONFIG_FILE, read_dataset, read_run_config
from alpharl.windows import parse_window

DEFAULT_EVAL_B = 16


def eval_(
    run: Annotated[Path | None, typer.Argument(help="Trained run directory (config.toml + checkpoint.npz). Optional with a baseline --policy.", show_default=False)] = None,
    data: Annotated[list[str] | None, typer.Option("--data", metavar="<path>", help="Market data to evaluate on: LOBSTER file, folder or glob, repeatable. (default: the run's data)", show_default=False)] = None,
    window: Annotated[str | None, typer.Option("--window", help="A:B, the fractions of each file's events to evaluate on. (default: what the run held out: the complement of its training window, and whole files it never trained on)", show_default=False)] = None,
    allow_overlap: Annotated[bool, typer.Option("--allow-overlap", help="Evaluate on rows the run trained on (marked in-sample) instead of refusing.")] = False,
    start: Annotated[float | None, typer.Option("--start", help=f"Window start as a fraction of the event stream (with --end: the same as --window START:END). (default: {DEFAULT_START:g} when --end is given)", show_default=False)] = None,
    end: Annotated[float | None, typer.Option("--end", help=f"Window end as a fraction of the event stream. (default: {DEFAULT_END:g} when --start is given)", show_default=False)] = None,
    b: Annotated[int, typer.Option("--b", "-b", help="Backtests run side by side per policy (and per file).")] = DEFAULT_EVAL_B,
    steps: Annotated[int | None, typer.Option("--steps", help="Env steps per policy and file. (default: one pass over the window's events)", show_default=False)] = None,
    seed: Annotated[int | None, typer.Option("--seed", help="Seed of episode starts and sampling. (default: the run's seed)", show_default=False)] = None,
    policy: Annotated[str | None, typer.Option("--policy", help=f"Run this policy alone: {', '.join(ALL)}.", show_default=False)] = None,
    period: Annotated[int, typer.Option("--period", help="Steps per round trip of the periodic baseline.")] = DEFAULT_PERIOD,
    fills: Annotated[Path | None, typer.Option("--fills", help="Write every fill (all policies, with a 'policy' column) here: .parquet, .csv or Arrow.", show_default=False)] = None,
    backend: Annotated[str, typer.Option("--backend", help=f"Simulator: {' | '.join(EVAL_BACKENDS)}.")] = "numpy",
    mirror: Annotated[bool, typer.Option("--mirror", help="The trained policy acts on its logits averaged with its mirror image's (buy and sell exchanged): a constant tilt to one side cancels, what depends on the state stays. A run trained with --mirror-policy always acts so.")] = False,
    as_json: Annotated[bool, typer.Option("--json", help="Print the results as JSON for scripts.")] = False,
) -> None:
    """Evaluate a trained policy on what the run held out: PnL, Sharpe, drawdown, trades, win rate, beside baselines."""
    with user_errors():
        if policy is not None and policy not in ALL:
            raise UserError(f"--policy {policy!r}: expected one of {', '.join(ALL)}")
        if backend not in EVAL_BACKENDS:
            raise UserError(f"--backend {backend!r}: expected one of {', '.join(EVAL_BACKENDS)}")
        if backend == "cuda" and target.on_simulator():
            raise UserError("--backend cuda: no GPU here (numba runs the CUDA simulator); use --backend numpy or sim")
        names = [policy] if policy else list(ALL) if run is not None else list(BASELINES)
        win = _window(window, start, end)
        params = None
        if run is not None:
            if not run.is_dir():
                raise UserError(f"{run}: no such run directory")
            if not (run / CONFIG_FILE).is_file():
                raise UserError(f"{run}: no {CONFIG_FILE} there (not a run directory?)")
            config = read_run_config(run)
            if any(n in POLICIES for n in names):
                params = E.run_params(run)
        elif policy in POLICIES:
            raise UserError(f"--policy {policy}: needs RUN, a trained run directory")
        else:
            config = TrainConfig()
        if mirror and params is None:
            raise UserError("--mirror: needs a trained policy (RUN, and --policy sampled or greedy if any)")
        mirror = mirror or (params is not None and config.mirror_policy)   # a mirror-trained run acts so
        if fills is not None and not fills.parent.is_dir():
            raise UserError(f"--fills {fills}: no such directory {fills.parent}")
        eval_seed = config.seed if seed is None else seed
        if not data and config.synthetic:
            out, fill_tables = _synthetic(run, config, names, params, b, steps, eval_seed, period, backend, fills,
                                          mirror)
        else:
            record = None
            if run is not None:
                record = read_dataset(run) or E.derived_record(config, f"{run}: its data")
            files, skipped = E.plan(record, data, config, win, allow_overlap)
            results, overall, fill_tables = E.evaluate_files(files, config, names, params, b=b, steps=steps,
                                                             seed=eval_seed, period=period, backend=backend,
                                                             fills=fills is not None, mirror=mirror)
            out = eval_json(run, data if data else config.data, results, overall, skipped, b, eval_seed, fills)
        out["mirror"] = mirror
        if fills is not None:
            E.write_fills(fill_tables, fills)
    if as_json:
        typer.echo(jsontext.dumps(out, indent=1))
        return
    _print_tables(out)


def _window(window: str | None, start: float | None, end: float | None) -> tuple[float, float] | None:
    """--window, or --start/--end (either alone takes the other's default), or None (the default rule)."""
    if window is not None:
        if start is not None or end is not None:
            raise UserError(f"--window {window} and --start/--end exclude each other (--window A:B is both)")
        return parse_window(window, "--window")
    if start is None and end is None:
        return None
    a = DEFAULT_START if start is None else start
    z = DEFAULT_END if end is None else end
    if not (math.isfinite(a) and math.isfinite(z) and 0.0 <= a < z <= 1.0):
        raise UserError(f"--start {a} --end {z}: need 0 <= start < end <= 1")
    return a, z


def _synthetic(run, config, names, params, b, steps, seed, period, backend, fills, mirror) -> tuple[dict, dict]:
    """A run on the synthetic market: its generator, no rows to hold out (``files`` empty); (out, fills)."""
    setup = E.make_setup(config, None, 0.0, 1.0, b, steps, seed, fills=fills is not None)
    results, fill_tables = E.evaluate(setup, names, params, period, backend, mirror)
    return {"run": None if run is None else str(run), "data": "synthetic", "window": None, "b": setup.b,
            "steps": setup.steps, "seed": setup.seed, "episode_steps": setup.sim_params.episode_steps,
            "sim": _sim_json(setup.sim_params), "policies": results, "fills": None if fills is None else str(fills),
            "in_sample": False, "files": [], "skipped": []}, fill_tables


def _sim_json(params) -> dict:
    """The simulator settings every policy was evaluated under (the run's [sim] as evaluation uses it:
    no holding penalty; join and improve act through it too, pegged with peg_quotes)."""
    return dataclasses.asdict(params)


def _window_json(res: E.FileResult) -> dict:
    w = res.setup.window
    return {"start": res.file.window[0], "end": res.file.window[1], "first_row": w.first, "stop_row": w.stop,
            "seconds": w.seconds}


def eval_json(run, data, results: list, overall: dict, skipped: list, b: int, seed: int, fills) -> dict:
    """The evaluation as ``--json`` prints it: the overall result in the one-file shape (run, data,
    window, b, steps, seed, episode_steps, sim: the simulator settings, policies, fills), ``in_sample``
    (any file's window shares rows with what the run trained on), ``files`` (per file: label, path,
    sha256, window, in_sample, trained_rows, steps, episode_steps, policies) and ``skipped`` (files with
    nothing held out)."""
    files = [{"label": r.file.label, "path": r.file.path, "sha256": r.file.sha256, "window": _window_json(r),
              "in_sample": r.file.in_sample,
              "trained_rows": None if r.file.trained_rows is None else list(r.file.trained_rows),
              "steps": r.setup.steps, "episode_steps": r.setup.sim_params.episode_steps, "policies": r.policies}
             for r in results]
    episode_steps = min(r.setup.sim_params.episode_steps for r in results)
    if len(results) == 1:
        window = files[0]["window"]
    else:
        fracs = {r.file.window for r in results}
        secs = [r.setup.window.seconds for r in results]
        a, z = next(iter(fracs)) if len(fracs) == 1 else (None, None)
        window = {"start": a, "end": z, "first_row": None, "stop_row": None,
                  "seconds": None if None in secs else sum(secs)}
    return {
        "run": None if run is None else str(run),
        "data": data if data is not None else "embedded sample",
        "window": window,
        "b": b, "steps": sum(r.setup.steps for r in results), "seed": seed,
        "episode_steps": episode_steps,
        "sim": _sim_json(dataclasses.replace(results[0].setup.sim_params, episode_steps=episode_steps)),
        "policies": overall,
        "fills": None if fills is None else str(fills),
        "in_sample": any(f["in_sample"] for f in files),
        "files": files,
        "skipped": skipped,
    }


#: The eval table's columns, and the order they give way on a narrow console (numbers are never cut).
EVAL_COLUMNS = ("policy", "PnL $", "PnL/backtest $", "Sharpe (ann.)", "Sharpe/step", "max DD $", "trades", "win rate",
                "avg trade $", "top action", "two-sided")
EVAL_GIVE_WAY = ("two-sided", "top action", "avg trade $", "Sharpe/step", "PnL/backtest $", "win rate", "max DD $", "trades")


def two_sided(book: dict | None) -> str:
    """The share of steps with both a bid and an ask working (eval's ``book``), or - where not measured."""
    return "-" if not book else f"{book['two_sided']:.0%}"


def top_action(share: dict | None) -> str:
    """The action a policy took most often, and its share of the steps (``action_share``)."""
    if not share:
        return "-"
    name = max(share, key=share.get)
    return f"{name} {share[name]:.0%}"


def eval_table(out: dict, width: int | None = None):
    """One table of policies: ``out`` is the overall result or one of its ``files``."""
    w = out["window"]
    if w is None:
        where = "synthetic market"
    elif w.get("first_row") is None:
        where = f"{len(out.get('files', []))} files"
        if w["seconds"]:
            where += f", {w['seconds']:.0f} s of market time"
    else:
        where = f"rows {w['first_row']:,}..{w['stop_row']:,}" + (
            f" ({w['seconds']:.0f} s of market time)" if w["seconds"] else "")
    if out.get("label"):
        where = f"{out['label']} {where}"
    if out.get("sim", {}).get("peg_quotes"):
        where += ", pegged and refilled quotes" if out["sim"].get("refill_quotes") else ", pegged quotes"
    if out.get("mirror"):
        where += ", mirror-averaged policy"
    if out.get("in_sample"):
        where += ", IN-SAMPLE (overlaps the training rows)"
    rows = []
    for name, r in out["policies"].items():
        win = "-" if r["win_rate"] is None else f"{r['win_rate']:.1%}"
        rows.append([name, fmt(r["pnl"]), fmt(r["pnl_per_backtest"]), fmt(r["sharpe"]), fmt(r["sharpe_per_step"]),
                     fmt(r["max_drawdown"]), str(r["trades"]), win, fmt(r["avg_trade"]),
                     top_action(r.get("action_share")), two_sided(r.get("book"))])
    return fitted_table(list(EVAL_COLUMNS), rows, width, [EVAL_COLUMNS.index(c) for c in EVAL_GIVE_WAY],
                        title=f"eval {out['run'] or '(baselines)'}: {where}, B={out['b']}, {out['steps']} steps, "
                              f"seed {out['seed']}", title_justify="left")


def _print_tables(out: dict) -> None:
    """One file: its table. Several: one table per file, then all of them together."""
    from rich.console import Console

    console = Console()
    files = out.get("files", [])
    if len(files) > 1:
        for f in files:
            console.print(eval_table({**f, "run": out["run"], "b": out["b"], "seed": out["seed"], "sim": out["sim"]},
                                     console.width))
    console.print(eval_table(out, console.width))
    for s in out.get("skipped", []):
        console.print(f"{s['label']} left out: {s['reason']} (nothing held out)")
    if out["fills"]:
        console.print(f"fills written to {out['fills']}")
