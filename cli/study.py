"""``alpharl study``: seeds x datasets x variants, each trained then evaluated on held-out data beside the baselines."""
from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from alpharl import jsontext, target
from alpharl import study as St
from alpharl.cli.errors import UserError, user_errors
from alpharl.config import BACKENDS
from alpharl.windows import DEFAULT_TRAIN_WINDOW, parse_window

#: Exit status after Ctrl-C (128 + SIGINT), as shells report it.
EXIT_INTERRUPTED = 130


def study(
    out: Annotated[Path, typer.Option("--out", "-o", help="Study folder: one folder per trial, study.json, trials.parquet, study.png. Running the same command again there skips finished trials.", show_default=False)],
    data: Annotated[list[str] | None, typer.Option("--data", help="A dataset: LOBSTER file, or a folder or glob (one multi-file dataset; see --each-file). Repeat for several. (default: the embedded sample)", show_default=False)] = None,
    each_file: Annotated[bool, typer.Option("--each-file", help="A folder or glob given to --data is one dataset per data file in it.")] = False,
    seeds: Annotated[int | None, typer.Option("--seeds", help=f"Seeds 0..N-1. (default: {St.DEFAULT_SEEDS})", show_default=False)] = None,
    seed_list: Annotated[str | None, typer.Option("--seed-list", help="These seeds instead, e.g. 3,5,9.", show_default=False)] = None,
    steps: Annotated[int | None, typer.Option("--steps", help="Training steps per trial. (default: the variant's, else train's)", show_default=False)] = None,
    b: Annotated[int | None, typer.Option("--b", "-b", help="Backtests side by side, in training and evaluation. (default: the variant's / train's; eval's)", show_default=False)] = None,
    backend: Annotated[str | None, typer.Option("--backend", help=f"{' | '.join(BACKENDS)}, passed to train (and to eval but for auto). (default: train's auto)", show_default=False)] = None,
    variant: Annotated[list[str] | None, typer.Option("--variant", help=f"NAME=FILE.toml: train with --config FILE.toml (NAME alone: the defaults). Repeat for several. (default: one variant '{St.DEFAULT_VARIANT}')", show_default=False)] = None,
    train_window: Annotated[str, typer.Option("--train-window", help="Training window A:B, fractions of each dataset's events.")] = DEFAULT_TRAIN_WINDOW,
    eval_window: Annotated[str | None, typer.Option("--eval-window", help="Held-out window A:B the trained runs and the baselines are evaluated on; must not overlap the training window. (default: eval's, the larger part outside the training window: 0.8:1 for 0:0.8)", show_default=False)] = None,
    eval_backend: Annotated[str | None, typer.Option("--eval-backend", help="Evaluate on this simulator (numpy | cuda | sim) instead of the training backend, e.g. train on the GPU and evaluate on the CPU cores. (default: --backend, where eval has it)", show_default=False)] = None,
    eval_steps: Annotated[int | None, typer.Option("--eval-steps", help="Env steps per policy in evaluation. (default: one pass over the held-out window)", show_default=False)] = None,
    jobs: Annotated[int | None, typer.Option("--jobs", "-j", help="Trials at once (local processes, or the CPUs of a Ray started here; several may share one GPU). (default: 1; with --ray every core)", show_default=False)] = None,
    ray: Annotated[bool, typer.Option("--ray", help="Run each trial as a Ray task on a Ray started here (needs Ray, the extra 'ray' of alpharl).")] = False,
    ray_address: Annotated[str | None, typer.Option("--ray-address", help="Run the trials on this Ray cluster (its nodes must see --out and the data at the same paths).", show_default=False)] = None,
    gpus_per_trial: Annotated[float, typer.Option("--gpus-per-trial", help="With Ray: the GPU share each trial asks (0.25: four trials per GPU).")] = 0.0,
    png: Annotated[bool, typer.Option("--png/--no-png", help="Draw study.png (needs matplotlib).")] = True,
    as_json: Annotated[bool, typer.Option("--json", help="Print study.json's summary as JSON instead of the table.")] = False,
) -> None:
    """Train and evaluate every (dataset, seed, variant) on held-out data beside the baselines: means, CIs, ranks, a picture."""
    with user_errors():
        plan = _plan(out, data, each_file, seeds, seed_list, steps, b, backend, variant, train_window,
                     eval_window, eval_steps, eval_backend)
        use_ray = ray or ray_address is not None
        if jobs is not None and jobs < 1:
            raise UserError(f"--jobs {jobs}: must be >= 1")
        if ray_address is not None and jobs is not None:
            raise UserError("--jobs with --ray-address: the cluster's resources decide how many trials run at once")
        if not gpus_per_trial >= 0:
            raise UserError(f"--gpus-per-trial {gpus_per_trial}: must be >= 0")
        if gpus_per_trial and not use_ray:
            raise UserError("--gpus-per-trial: only with --ray or --ray-address (local trials share the GPUs)")
        if use_ray:
            St.import_ray()
        if png:
            _need_matplotlib()
        progress = St.StudyProgress(console=_console(as_json))
        try:
            content = St.run_study(plan, executor="ray" if use_ray else "local",
                                   jobs=jobs if use_ray else (jobs or 1), ray_address=ray_address,
                                   gpus_per_trial=gpus_per_trial, png=png, progress=progress)
        except KeyboardInterrupt:
            progress.stop()
            typer.echo(f"alpharl: study interrupted; the trials that ended are in {plan.out} "
                       f"(run the same command again to continue)", err=True)
            raise typer.Exit(EXIT_INTERRUPTED) from None
        finally:
            progress.stop()
    _report(content, plan, png, as_json)
    if content["trials_failed"]:
        typer.echo(f"alpharl: {content['trials_failed']} of {len(plan.trials)} trials failed (their error is in "
                   f"{plan.out / St.STUDY_FILE}); run the same command again to retry them", err=True)
        raise typer.Exit(St.EXIT_TRIALS_FAILED)


def _plan(out, data, each_file, seeds, seed_list, steps, b, backend, variant, train_window, eval_window,
          eval_steps, eval_backend=None) -> St.StudyPlan:
    if backend is not None and backend not in BACKENDS:
        raise UserError(f"--backend {backend!r}: expected one of {', '.join(BACKENDS)}")
    if each_file and not data:
        raise UserError("--each-file: needs --data with a folder or a glob")
    seed_values = St.parse_seeds(seeds, seed_list)
    tw = parse_window(train_window, "--train-window")
    ew = None if eval_window is None else parse_window(eval_window, "--eval-window")
    variants = St.parse_variants(variant or [])
    datasets = St.parse_datasets(data or [], each_file)
    plan = St.plan_study(out, datasets, variants, seed_values, steps=steps, b=b, backend=backend,
                         train_window=tw, eval_window=ew, eval_steps=eval_steps,
                         eval_backend=eval_backend)
    # A study whose trials all ended only reports: that needs no GPU.
    if backend == "cuda" and target.on_simulator() and not St.all_done(plan):
        raise UserError("--backend cuda: no GPU here (numba runs the CUDA simulator); use --backend numpy")
    return plan


def _need_matplotlib() -> None:
    try:
        import matplotlib  # noqa: F401  (optional extra alpharl[plot]: only checked here)
    except ImportError:
        raise UserError("study.png needs matplotlib (pip install 'alpharl[plot]'), or pass --no-png") from None


def _console(as_json: bool):
    from rich.console import Console

    # With --json stdout is for the JSON alone: progress goes to stderr.
    return Console(stderr=True) if as_json else Console()


def _report(content: dict, plan: St.StudyPlan, png: bool, as_json: bool) -> None:
    if as_json:
        typer.echo(jsontext.dumps({k: content[k] for k in ("metric", "bootstrap", "trials_ok", "trials_failed",
                                                            "summary")} | {"out": str(plan.out)}, indent=1))
        return
    from rich.console import Console

    console = Console()
    console.print(f"study {plan.out}: {len(plan.trials)} trials, {content['trials_ok']} ok", markup=False,
                  highlight=False, soft_wrap=True)
    for table in St.summary_tables(content, console.width):
        console.print(table)
    console.print(St.summary_note(content), markup=False, highlight=False)
    for t in content["trials"]:
        if t["status"] != St.OK:
            e = t["error"]
            console.print(f"failed: {St.result_label(t)} in {e['stage']}: {e['message']}"
                          + (f" (see {t['trial_dir']}/{e['log']})" if e.get("log") else ""),
                          markup=False, highlight=False, soft_wrap=True)
    files = [St.STUDY_FILE, St.TABLE_FILE] + ([St.PNG_FILE] if png else [])
    console.print(f"wrote {', '.join(str(plan.out / f) for f in files)}", markup=False, highlight=False,
                  soft_wrap=True)
