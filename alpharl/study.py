"""``alpharl study``: seeds x datasets x variants, each trained and then evaluated on held-out data.

A *trial* is one (dataset, seed, variant): ``alpharl train`` on the training
window, then ``alpharl eval`` of that run on the held-out window with every
baseline and the trained policy (sampled and greedy). Each step of a trial is a
subprocess of the CLI (``trial_argv`` builds both command lines), so every
trial has its own process (GPU context, numba state) and a run directory that
``alpharl diag`` opens.

The study directory (``--out``)::

    study.json            options, one entry per trial, and the summary over seeds
    trials.parquet        one row per trial x policy (pandas, polars, DuckDB)
    study.png             held-out PnL per dataset with CIs, and the controllers' traces
    trials/<dataset>/<variant>/s<seed>/
        trial.json        what the trial is asked (checked again when the study runs again)
        run/              the training run directory
        train.log eval.log  the subprocesses' output; eval.json: eval's JSON
        result.json       written atomically when the trial ends, succeeded or failed

Running the same command again skips the trials whose ``result.json`` records a
success; a failed or interrupted trial runs again (its training continues from
its checkpoint with ``train --resume``). A trial asked differently than before
(another ``--steps``, a changed variant file) is refused: use another ``--out``.

Statistics (``summarize``), over the seeds of one dataset and variant, of each
policy's held-out net PnL (``METRIC``: eval's ``pnl``, the sum of rewards after
fees over steps and backtests, in dollars):

- mean and standard deviation (ddof 1);
- a percentile bootstrap confidence interval of the mean (``bootstrap_ci``):
  ``BOOTSTRAP_RESAMPLES`` resamples of the seeds with replacement, drawn from a
  generator seeded with ``BOOTSTRAP_SEED``, so the same results give the same
  interval;
- rank of the policy's mean among all six (1 = best);
- for the trained policies, against each baseline, paired by trial (the same
  seed, window and simulator): seeds where the policy's PnL is above, equal to,
  below the baseline's, the mean difference and its bootstrap interval
  (``paired_comparison``).
"""
from __future__ import annotations

import concurrent.futures as cf
import dataclasses
import glob as globmod
import hashlib
import json
import logging
import os
import re
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pyarrow as pa

import alpharl
from alpharl import isv as S
from alpharl import jsontext
from alpharl.atomic import atomic_write, atomic_writer
from alpharl.config import TrainConfig, read_toml
from alpharl import windows as W
from alpharl.dataset import find_sources
from alpharl.evaluate import ALL, BASELINES, EVAL_BACKENDS, POLICIES
from alpharl.lobster.load import load_lobster
from alpharl.lobster.source import is_arrow
from alpharl.report import ReportError, fitted_table, fmt, load_run
from alpharl.rundir import CONFIG_FILE, SUMMARY_FILE
from alpharl.signals import TRADE_TOTALS

#: Version of study.json and result.json.
FORMAT = 1
#: The held-out number the summary is about: eval's net PnL in dollars (all backtests).
METRIC = "pnl"
#: Bootstrap of the mean over seeds: resamples, generator seed, two-sided level.
BOOTSTRAP_RESAMPLES = 10_000
BOOTSTRAP_SEED = 0
CI_LEVEL = 0.95
#: Default training window (fractions of the event stream), the complement of eval's held-out window.
DEFAULT_TRAIN_WINDOW = W.parse_window(W.DEFAULT_TRAIN_WINDOW)
#: Seeds 0..N-1 without --seeds / --seed-list.
DEFAULT_SEEDS = 3
#: Name of the one variant of a study without --variant, and of the embedded sample as a dataset.
DEFAULT_VARIANT = "default"
EMBEDDED = "embedded"
#: ISV slots drawn over steps in study.png (named through the registry: one definition of each).
PLOT_SLOTS = tuple(S.BY_INDEX[i].name for i in (S.RL_LR_Q, S.RL_LR_PI, S.RL_PPO_CLIP_EPS, S.RL_V_BLEND_ALPHA))
#: Diagnostics columns each trial's result.json keeps over steps: the plotted ISV slots, those the learning
#: targets and the clip's diagnosis read, and the closed trades' run totals (benchmarks/studies/ablation.py),
#: so a trial's record answers them after its run folder is gone (a study on another machine brings back
#: result.json, not the diagnostics).
TRACE_SLOTS = PLOT_SLOTS + tuple(S.BY_INDEX[i].name for i in (
    S.RL_LR_V, S.RL_K_LOOP_MULT, S.RL_REWARD_PER_TRADE_EMA, S.RL_KL_EMA, S.RL_KL_TARGET, S.RL_ENTROPY_EMA,
    S.RL_ENTROPY_COEF)) + TRADE_TOTALS
#: Keys of a variant file that the study sets itself, per trial.
STUDY_KEYS = ("data", "seed", "run_dir")
#: Files of the study and of a trial.
STUDY_FILE, TABLE_FILE, PNG_FILE = "study.json", "trials.parquet", "study.png"
TRIALS_DIR, RUN_DIR, TRIAL_FILE, RESULT_FILE = "trials", "run", "trial.json", "result.json"
TRAIN_LOG, EVAL_LOG, EVAL_JSON = "train.log", "eval.log", "eval.json"
#: Trial outcomes; only OK is skipped when the study runs again.
OK, FAILED = "ok", "failed"
#: Exit status of a study in which a trial failed (2 stays bad input).
EXIT_TRIALS_FAILED = 1
#: Names of datasets and variants as they appear in folder names.
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")


class StudyError(ValueError):
    """A study that cannot run as asked (option, dataset, variant, study folder): one line."""


# =================================================================== what a study is
@dataclass(frozen=True)
class Dataset:
    """One dataset: ``data`` is what ``train --data`` receives (None: the embedded sample)."""

    name: str
    data: str | None


@dataclass(frozen=True)
class Variant:
    """One training configuration: ``config`` is ``train --config`` (None: the defaults)."""

    name: str
    config: str | None
    sha256: str | None = None


@dataclass(frozen=True)
class TrialSpec:
    """Everything one trial is asked; travels to a Ray worker as ``to_dict()``.

    ``steps``, ``b``, ``backend``: passed to train when given (None: the variant's or train's own);
    ``b`` and ``backend`` go to eval too, ``eval_steps`` is eval's ``--steps`` (None: eval's defaults);
    ``eval_backend``: eval's simulator when it should differ from training's (e.g. train on the GPU,
    evaluate on the CPU cores while the next trials train).
    """

    dataset: Dataset
    variant: Variant
    seed: int
    steps: int | None
    b: int | None
    backend: str | None
    train_window: tuple[float, float]
    eval_window: tuple[float, float]
    eval_steps: int | None
    trial_dir: str
    eval_backend: str | None = None

    @property
    def run_dir(self) -> Path:
        return Path(self.trial_dir) / RUN_DIR

    @property
    def label(self) -> str:
        return f"{self.dataset.name}/{self.variant.name}/s{self.seed}"

    def asked(self) -> dict:
        """What makes a trial's result valid for this spec (compared when the study runs again)."""
        return {"data": self.dataset.data, "variant_config": self.variant.config, "variant_sha256": self.variant.sha256,
                "seed": self.seed, "steps": self.steps, "b": self.b, "backend": self.backend,
                "train_window": list(self.train_window), "eval_window": list(self.eval_window),
                "eval_steps": self.eval_steps, "eval_backend": self.eval_backend}

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, d: dict) -> "TrialSpec":
        d = dict(d)
        d["dataset"], d["variant"] = Dataset(**d["dataset"]), Variant(**d["variant"])
        d["train_window"], d["eval_window"] = tuple(d["train_window"]), tuple(d["eval_window"])
        return cls(**d)


@dataclass
class StudyPlan:
    out: Path
    datasets: list[Dataset]
    variants: list[Variant]
    seeds: list[int]
    trials: list[TrialSpec]
    options: dict


# ------------------------------------------------------------------ parsing the options
def eval_window_for(train_window: tuple[float, float], eval_window: tuple[float, float] | None) -> tuple[float, float]:
    """The held-out window every trial is evaluated on: ``eval_window``, else eval's own default (the
    larger part of each file outside the training window). A study measures on held-out data only,
    so a window sharing rows with the training window is refused here, before any trial runs."""
    if eval_window is None:
        eval_window = W.held_out(train_window)
        if eval_window is None:
            raise StudyError(f"--train-window {W.format_window(train_window)}: leaves nothing held out to evaluate on")
    # the same rows on every file: compare the fractions (windows.rows rounds both the same way)
    if max(train_window[0], eval_window[0]) < min(train_window[1], eval_window[1]):
        raise StudyError(f"--eval-window {W.format_window(eval_window)} overlaps --train-window "
                         f"{W.format_window(train_window)}: a study evaluates on held-out data only")
    return eval_window


def parse_seeds(n: int | None, seed_list: str | None) -> list[int]:
    """``--seeds N`` -> 0..N-1; ``--seed-list 3,5,9`` -> those (distinct, >= 0); not both."""
    if n is not None and seed_list is not None:
        raise StudyError("--seeds and --seed-list exclude each other")
    if seed_list is None:
        n = DEFAULT_SEEDS if n is None else n
        if n < 1:
            raise StudyError(f"--seeds {n}: need at least 1")
        return list(range(n))
    try:
        seeds = [int(s) for s in seed_list.split(",") if s.strip()]
    except ValueError:
        raise StudyError(f"--seed-list {seed_list!r}: expected integers separated by commas, e.g. 3,5,9") from None
    if not seeds or min(seeds) < 0:
        raise StudyError(f"--seed-list {seed_list!r}: need one or more seeds >= 0")
    if len(set(seeds)) != len(seeds):
        raise StudyError(f"--seed-list {seed_list!r}: a seed is repeated")
    return seeds


def parse_variants(values: list[str]) -> list[Variant]:
    """``NAME=FILE.toml`` (train's --config) or ``NAME`` alone (the defaults); none -> one ``default``."""
    if not values:
        return [Variant(DEFAULT_VARIANT, None)]
    variants = []
    for text in values:
        name, sep, file = text.partition("=")
        if not _NAME.match(name):
            raise StudyError(f"--variant {text!r}: expected NAME=FILE.toml with NAME of letters, digits, '.', '_', '-'")
        if any(v.name == name for v in variants):
            raise StudyError(f"--variant {text!r}: the name {name!r} is given twice")
        if not sep or not file:
            variants.append(Variant(name, None))
            continue
        path = Path(file).expanduser()
        if not path.is_file():
            raise StudyError(f"--variant {text!r}: no such config file {file}")
        raw = read_toml(path)   # ConfigError (one line) on bad TOML
        fixed = [k for k in STUDY_KEYS if k in raw]
        if fixed:
            raise StudyError(f"--variant {text!r}: {file} sets {fixed[0]!r}, which the study sets per trial")
        TrainConfig.from_toml(path).validate()   # every type and range checked before anything starts
        variants.append(Variant(name, str(path.resolve()), hashlib.sha256(path.read_bytes()).hexdigest()))
    return variants


def data_files(folder_or_pattern: str) -> list[Path]:
    """The LOBSTER sources of a folder or a glob, as ``alpharl train --data`` finds them (one rule:
    alpharl.dataset.find_sources; DatasetError in one line when there is none)."""
    return find_sources([folder_or_pattern])


def _has_glob(text: str) -> bool:
    return globmod.has_magic(text)


def _dataset_name(text: str, path: Path) -> str:
    if _has_glob(text):
        base = text
    elif path.is_dir():
        base = path.resolve().name
    else:
        base = path.name.split(".")[0] if is_arrow(path) else path.stem
    return re.sub(r"[^A-Za-z0-9._-]+", "_", base).strip("._-") or "data"


def parse_datasets(values: list[str], each_file: bool) -> list[Dataset]:
    """Each ``--data`` value is one dataset: a file, or a folder or glob (a multi-file dataset, or
    with ``each_file`` one dataset per data file in it). None -> the embedded sample.

    A single data file is loaded once here (LobsterFormatError: one line) so that damaged data
    stops the study before it starts, and the parsed-data cache serves its trials."""
    if not values:
        return [Dataset(EMBEDDED, None)]
    entries: list[tuple[str, Path]] = []
    for text in values:
        path = Path(text).expanduser()
        if _has_glob(text) or path.is_dir():
            files = data_files(text)
            if each_file:
                entries += [(str(f), f) for f in files]
            else:
                # Several files are one dataset: train --data receives the folder or pattern itself.
                entries.append((text, path))
        elif path.is_file():
            entries.append((text, path))
        else:
            raise StudyError(f"--data {text}: no such file or directory")
    datasets, names = [], set()
    for text, path in entries:
        if path.is_file():
            load_lobster(path)
        name = base = _dataset_name(text, path)
        k = 2
        while name in names:
            name, k = f"{base}-{k}", k + 1
        names.add(name)
        # absolute, so a trial finds its data from any working directory (a pattern keeps its wildcards)
        datasets.append(Dataset(name, os.path.abspath(os.path.expanduser(text)) if _has_glob(text)
                                else str(path.resolve())))
    return datasets


def trial_folder(out: Path, dataset: str, variant: str, seed: int) -> Path:
    """Where a study in ``out`` keeps a trial: its trial.json, result.json and run folder."""
    return out / TRIALS_DIR / dataset / variant / f"s{seed}"


def plan_study(out: Path, datasets: list[Dataset], variants: list[Variant], seeds: list[int], *,
               steps: int | None = None, b: int | None = None, backend: str | None = None,
               train_window: tuple[float, float] = DEFAULT_TRAIN_WINDOW,
               eval_window: tuple[float, float] | None = None, eval_steps: int | None = None,
               eval_backend: str | None = None) -> StudyPlan:
    """Every trial of datasets x variants x seeds, in that order, each in its own folder under ``out``."""
    if steps is not None and steps < 1:
        raise StudyError(f"--steps {steps}: must be >= 1")
    if b is not None and b < 1:
        raise StudyError(f"--b {b}: must be >= 1")
    if eval_steps is not None and eval_steps < 1:
        raise StudyError(f"--eval-steps {eval_steps}: must be >= 1")
    if eval_backend is not None and eval_backend not in EVAL_BACKENDS:
        raise StudyError(f"--eval-backend {eval_backend!r}: expected one of {', '.join(EVAL_BACKENDS)}")
    if out.exists() and not out.is_dir():
        raise StudyError(f"--out {out}: exists and is not a directory")
    out = out.resolve()
    eval_window = eval_window_for(train_window, eval_window)
    trials = [TrialSpec(d, v, s, steps, b, backend, train_window, eval_window, eval_steps,
                        str(trial_folder(out, d.name, v.name, s)), eval_backend)
              for d in datasets for v in variants for s in seeds]
    options = {"steps": steps, "b": b, "backend": backend, "train_window": list(train_window),
               "eval_window": list(eval_window), "eval_steps": eval_steps, "eval_backend": eval_backend}
    return StudyPlan(out, datasets, variants, seeds, trials, options)


# ================================================================== one trial
def trial_argv(spec: TrialSpec, stage: str, resume: bool = False) -> list[str]:
    """The command line of one step of a trial (``stage`` = "train" or "eval"): the one place the
    study speaks to the CLI. ``resume``: continue the trial's run (a checkpoint, or a restartable
    directory) instead of starting it."""
    cli = [sys.executable, "-m", "alpharl.cli"]
    run = str(spec.run_dir)
    if stage == "train":
        if resume:
            # A resumed run keeps its own config.toml; only these may change (rundir.RESUME_OVERRIDABLE).
            argv = [*cli, "train", "--resume", run, "--quiet"]
        else:
            argv = [*cli, "train", "--run-dir", run, "--quiet", "--seed", str(spec.seed)]
            if spec.dataset.data is not None:
                argv += ["--data", spec.dataset.data]
            if spec.variant.config is not None:
                argv += ["--config", spec.variant.config]
            if spec.b is not None:
                argv += ["--b", str(spec.b)]
            argv += ["--train-window", W.format_window(spec.train_window)]
        if spec.steps is not None:
            argv += ["--steps", str(spec.steps)]
        if spec.backend is not None:
            argv += ["--backend", spec.backend]
        return argv
    if stage == "eval":
        # eval refuses a window overlapping what the run trained on (no --allow-overlap here)
        argv = [*cli, "eval", run, "--json", "--window", W.format_window(spec.eval_window)]
        if spec.b is not None:
            argv += ["--b", str(spec.b)]
        if spec.eval_steps is not None:
            argv += ["--steps", str(spec.eval_steps)]
        if spec.eval_backend is not None:
            argv += ["--backend", spec.eval_backend]
        elif spec.backend in EVAL_BACKENDS:   # train's auto is not eval's: eval then runs its default
            argv += ["--backend", spec.backend]
        return argv
    raise ValueError(f"stage {stage!r}: expected 'train' or 'eval'")


def _child_env() -> dict:
    """The trial's environment: this one; run from a source tree (alpharl not installed), with the
    tree's root first on PYTHONPATH, so ``python -m alpharl.cli`` finds the same alpharl from any
    working directory. (An installed alpharl is found anyway; its site-packages is left where it is.)"""
    env = dict(os.environ)
    root = Path(alpharl.__file__).resolve().parent.parent
    if (root / "cuda_kernels" / "__init__.py").is_file():   # the source tree's mark (alpharl/__init__.py)
        env["PYTHONPATH"] = os.pathsep.join([str(root)] + ([env["PYTHONPATH"]] if env.get("PYTHONPATH") else []))
    return env


def _error_line(text: str, code: int) -> str:
    """The line that says why a step failed: alpharl's one-line error, else the last line, else the code."""
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    for ln in reversed(lines):
        if ln.startswith("alpharl: error:"):
            return ln[len("alpharl: error:"):].strip()
    return (lines[-1] if lines else "no output") + f" (exit code {code})"


def _train_state(run_dir: Path) -> str:
    """``done`` (a finished run), ``resume`` (started: continue it) or ``new``."""
    try:
        summary = json.loads((run_dir / SUMMARY_FILE).read_text())
        if not summary.get("interrupted", False):
            return "done"
    except (OSError, ValueError):
        pass
    return "resume" if (run_dir / CONFIG_FILE).is_file() else "new"


def read_trace(run_dir: Path) -> dict:
    """``TRACE_SLOTS`` over steps from the run's diagnostics.arrows ({"step": [...], slot: [...]})."""
    try:
        run = load_run(run_dir)
    except ReportError:
        return {}
    trace = {"step": run.steps.tolist()}
    for name in TRACE_SLOTS:
        if name in run.columns:
            trace[name] = run.columns[name].tolist()
    return trace


def run_trial(spec_dict: dict) -> dict:
    """Train then evaluate one trial (subprocesses of the CLI); the result dict, never an exception
    for a failed step (the failure is in the result). Runs wherever the executor runs it: a thread of
    this process or a Ray worker."""
    spec = TrialSpec.from_dict(spec_dict)
    trial = Path(spec.trial_dir)
    trial.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    result = _result_head(spec)
    env = _child_env()
    state = _train_state(spec.run_dir)
    if state != "done":
        with open(trial / TRAIN_LOG, "ab") as log:
            p = subprocess.run(trial_argv(spec, "train", resume=state == "resume"), stdout=log,
                               stderr=subprocess.STDOUT, env=env)
        if p.returncode != 0:
            text = (trial / TRAIN_LOG).read_text(errors="replace")
            return _failed(result, "train", _error_line(text, p.returncode), p.returncode, TRAIN_LOG, t0)
    result["train_seconds"] = time.perf_counter() - t0
    t1 = time.perf_counter()
    with open(trial / EVAL_LOG, "wb") as log:
        p = subprocess.run(trial_argv(spec, "eval"), stdout=subprocess.PIPE, stderr=log, env=env)
    if p.returncode != 0:
        text = (trial / EVAL_LOG).read_text(errors="replace")
        return _failed(result, "eval", _error_line(text, p.returncode), p.returncode, EVAL_LOG, t0)
    try:
        out = json.loads(p.stdout)
        policies = out["policies"]
    except (ValueError, KeyError, TypeError):
        return _failed(result, "eval", "eval --json printed no result", p.returncode, EVAL_LOG, t0)
    atomic_write(trial / EVAL_JSON, p.stdout)
    summary = json.loads((spec.run_dir / SUMMARY_FILE).read_text())
    config = TrainConfig.from_toml(spec.run_dir / CONFIG_FILE)
    result.update(
        status=OK, policies={name: policies[name] for name in ALL if name in policies},
        steps=summary.get("step", config.steps), b=config.b, backend=summary.get("backend"),
        eval={"window": out.get("window"), "b": out.get("b"), "steps": out.get("steps"), "seed": out.get("seed")},
        eval_seconds=time.perf_counter() - t1, wall_seconds=time.perf_counter() - t0,
        trace=read_trace(spec.run_dir))
    return result


def result_label(result: dict) -> str:
    """A result's trial as ``TrialSpec.label`` names it (dataset/variant/s<seed>)."""
    return f"{result['dataset']}/{result['variant']}/s{result['seed']}"


def _result_head(spec: TrialSpec) -> dict:
    return {"format": FORMAT, "status": FAILED, "dataset": spec.dataset.name, "data": spec.dataset.data,
            "variant": spec.variant.name, "seed": spec.seed, "asked": spec.asked(),
            "trial_dir": spec.trial_dir, "run_dir": str(spec.run_dir), "policies": {}, "error": None}


def _failed(result: dict, stage: str, message: str, code: int | None, log: str | None, t0: float) -> dict:
    result.update(status=FAILED, error={"stage": stage, "message": message, "exit_code": code, "log": log},
                  wall_seconds=time.perf_counter() - t0)
    return result


def failed_result(spec: TrialSpec, stage: str, message: str) -> dict:
    """The result of a trial that ended outside its own steps (an executor's error)."""
    return _failed(_result_head(spec), stage, message, None, None, time.perf_counter())


# ================================================================== the study folder
def prepare(plan: StudyPlan) -> tuple[list[TrialSpec], dict[str, dict]]:
    """Check every trial's folder against what it is asked now and record it; (trials to run,
    {label: result} of those already done)."""
    todo, done = [], {}
    for spec in plan.trials:
        trial = Path(spec.trial_dir)
        asked = spec.asked()
        recorded = read_json(trial / TRIAL_FILE)
        if recorded is not None and recorded.get("asked") != asked:
            key = next((k for k in asked if recorded.get("asked", {}).get(k) != asked[k]), "asked")
            raise StudyError(f"{trial}: this trial was run with {key} = {recorded.get('asked', {}).get(key)!r}, "
                             f"now {asked[key]!r}; use another --out (or the options it was run with)")
        result = done_result(spec, asked)
        if result is not None:
            done[spec.label] = result
            continue
        trial.mkdir(parents=True, exist_ok=True)
        if recorded is None:
            atomic_write(trial / TRIAL_FILE, jsontext.dumps({"format": FORMAT, "label": spec.label,
                                                              "asked": asked}, indent=1))
        todo.append(spec)
    return todo, done


def done_result(spec: TrialSpec, asked: dict | None = None) -> dict | None:
    """The trial's recorded result if it succeeded with what it is asked now (``asked``: spec.asked(),
    where the caller has it), else None."""
    asked = spec.asked() if asked is None else asked
    result = read_json(Path(spec.trial_dir) / RESULT_FILE)
    return result if result is not None and result.get("status") == OK and result.get("asked") == asked else None


def all_done(plan: StudyPlan) -> bool:
    """Every trial of the plan has succeeded already: the study only reports (any machine can)."""
    return all(done_result(spec) is not None for spec in plan.trials)


def read_json(path: Path) -> dict | None:
    """A JSON object from ``path``; None where it is missing, unreadable or not an object."""
    try:
        d = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    return d if isinstance(d, dict) else None


def record(result: dict) -> None:
    """Write a trial's result.json (atomically) where the study reads it."""
    atomic_write(Path(result["trial_dir"]) / RESULT_FILE, jsontext.dumps(result, indent=1))


# ================================================================== executors
def run_local(specs: list[TrialSpec], jobs: int, on_done) -> None:
    """``jobs`` trials at once, each in its own subprocesses (threads only wait on them)."""
    if not specs:
        return
    with cf.ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
        futures = {pool.submit(run_trial, s.to_dict()): s for s in specs}
        try:
            for fut in cf.as_completed(futures):
                on_done(fut.result())
        except BaseException:
            # Ctrl-C: the trials' processes got the signal too (training saves a checkpoint); queued
            # trials never start.
            pool.shutdown(wait=True, cancel_futures=True)
            raise


def import_ray():
    try:
        import ray   # optional extra alpharl[ray]: loaded only for --ray
    except ImportError:
        raise StudyError("--ray: Ray is not installed (pip install 'alpharl[ray]')") from None
    return ray


def run_ray(specs: list[TrialSpec], on_done, address: str | None = None, jobs: int | None = None,
            gpus_per_trial: float = 0.0) -> None:
    """Each trial a Ray task running ``run_trial`` (the spec goes, the result dict comes back).

    ``address``: a cluster's (its nodes must see the study folder and the data at the same paths);
    None: a Ray started here with ``jobs`` CPUs (default: all), one trial per CPU.
    ``gpus_per_trial``: the GPU share each task asks (0.25: four trials per GPU)."""
    ray = import_ray()
    if not specs:
        return
    # Ray's own start-up lines would cut through the progress display: errors only.
    kw = dict(include_dashboard=False, log_to_driver=False, logging_level=logging.ERROR)
    try:
        if address is not None:
            ray.init(address=address, **kw)
        else:
            # Workers started here import alpharl.study from the same place as this process.
            path = _child_env().get("PYTHONPATH")
            ray.init(num_cpus=jobs, runtime_env={"env_vars": {"PYTHONPATH": path}} if path else None, **kw)
    except Exception as exc:   # noqa: BLE001 - any failure to start or reach Ray is one line
        where = f"--ray-address {address}" if address else "--ray"
        raise StudyError(f"{where}: cannot start Ray ({_one_line(exc)})") from None
    try:
        task = ray.remote(num_cpus=1, num_gpus=gpus_per_trial, max_retries=0)(run_trial)
        pending = {task.remote(s.to_dict()): s for s in specs}
        while pending:
            ready, _ = ray.wait(list(pending), num_returns=1)
            for ref in ready:
                spec = pending.pop(ref)
                try:
                    result = ray.get(ref)
                except Exception as exc:   # noqa: BLE001 - a lost worker fails its trial, not the study
                    result = failed_result(spec, "ray", _one_line(exc))
                on_done(result)
    finally:
        ray.shutdown()


def _one_line(exc: BaseException) -> str:
    lines = [ln.strip() for ln in str(exc).splitlines() if ln.strip()]
    return (lines[-1] if lines else type(exc).__name__)[:300]


# ================================================================== statistics
def mean_std(values) -> tuple[float | None, float | None]:
    """Mean and standard deviation (ddof 1) of ``values``; None where undefined (no value, one value)."""
    x = np.asarray(values, np.float64)
    if x.size == 0:
        return None, None
    return float(x.mean()), float(x.std(ddof=1)) if x.size > 1 else None


def bootstrap_ci(values, resamples: int = BOOTSTRAP_RESAMPLES, level: float = CI_LEVEL,
                 seed: int = BOOTSTRAP_SEED) -> tuple[float, float] | None:
    """Percentile bootstrap interval of the mean: resample the n values with replacement
    ``resamples`` times, take each resample's mean, and return the (1-level)/2 and (1+level)/2
    quantiles of those means. Fixed ``seed``: the same values give the same interval. None for
    fewer than two values (one seed says nothing about the spread)."""
    x = np.asarray(values, np.float64)
    n = x.size
    if n < 2:
        return None
    rng = np.random.default_rng(seed)
    means = x[rng.integers(0, n, size=(resamples, n))].mean(axis=1)
    lo, hi = np.quantile(means, [(1 - level) / 2, (1 + level) / 2])
    return float(lo), float(hi)


def paired_comparison(policy, baseline, resamples: int = BOOTSTRAP_RESAMPLES, level: float = CI_LEVEL,
                      seed: int = BOOTSTRAP_SEED) -> dict:
    """A policy against a baseline over the same trials (pairs in order): how many it is above
    (``wins``), equal to, below; the mean of policy - baseline and its bootstrap interval."""
    a, b = np.asarray(policy, np.float64), np.asarray(baseline, np.float64)
    if a.shape != b.shape:
        raise ValueError(f"paired values of unequal length ({a.size} and {b.size})")
    d = a - b
    return {"n": int(d.size), "wins": int((d > 0).sum()), "ties": int((d == 0).sum()), "losses": int((d < 0).sum()),
            "mean_diff": float(d.mean()) if d.size else None,
            "diff_ci": bootstrap_ci(d, resamples, level, seed)}


def ranks(means: dict[str, float | None]) -> dict[str, int | None]:
    """Rank of each mean, 1 = highest; equal means share a rank (1, 2, 2, 4); None stays unranked."""
    known = [m for m in means.values() if m is not None]
    return {k: None if m is None else 1 + sum(o > m for o in known) for k, m in means.items()}


def summarize(results: list[dict], resamples: int = BOOTSTRAP_RESAMPLES) -> list[dict]:
    """The summary over seeds per (dataset, variant) of each policy's ``METRIC`` (module doc).

    Groups in the order of first appearance; only succeeded trials count."""
    groups: dict[tuple[str, str], list[dict]] = {}
    for r in results:
        groups.setdefault((r["dataset"], r["variant"]), [])
        if r.get("status") == OK:
            groups[(r["dataset"], r["variant"])].append(r)
    out = []
    for (dataset, variant), trials in groups.items():
        values = {p: [t["policies"][p][METRIC] for t in trials if _has(t, p)] for p in ALL}
        stats = {}
        for p, v in values.items():
            mean, std = mean_std(v)
            stats[p] = {"n": len(v), "mean": mean, "std": std, "ci": bootstrap_ci(v, resamples)}
        for p, rank in ranks({p: s["mean"] for p, s in stats.items()}).items():
            stats[p]["rank"] = rank
        for p in POLICIES:
            vs = {}
            for q in BASELINES:
                pairs = [(t["policies"][p][METRIC], t["policies"][q][METRIC]) for t in trials
                         if _has(t, p) and _has(t, q)]
                vs[q] = paired_comparison([a for a, _ in pairs], [b for _, b in pairs], resamples)
            stats[p]["vs"] = vs
        out.append({"dataset": dataset, "variant": variant, "seeds": sorted(t["seed"] for t in trials),
                    "policies": stats})
    return out


def _has(trial: dict, policy: str) -> bool:
    r = trial["policies"].get(policy)
    return r is not None and r.get(METRIC) is not None


# ================================================================== the study's files
#: Per-policy columns of trials.parquet, as eval --json names them, with their Arrow types.
POLICY_COLUMNS = (("pnl", pa.float64()), ("pnl_per_backtest", pa.float64()), ("sharpe", pa.float64()),
                  ("sharpe_per_step", pa.float64()), ("max_drawdown", pa.float64()), ("trades", pa.int64()),
                  ("win_rate", pa.float64()), ("avg_trade", pa.float64()), ("steps", pa.int64()),
                  ("backtests", pa.int64()))
#: Columns of trials.parquet from eval's ``book`` (evaluate.book_presence): (column, key); null for
#: results evaluated before it existed.
BOOK_COLUMNS = (("book_bid", "bid"), ("book_ask", "ask"), ("book_two_sided", "two_sided"),
                ("book_position", "position"), ("book_at_limit", "at_limit"))
TABLE_SCHEMA = pa.schema(
    [("dataset", pa.string()), ("data", pa.string()), ("variant", pa.string()), ("seed", pa.int64()),
     ("status", pa.string()), ("policy", pa.string()), ("kind", pa.string())]
    + [(("eval_" + n) if n in ("steps", "backtests") else n, t) for n, t in POLICY_COLUMNS]
    + [(c, pa.float64()) for c, _ in BOOK_COLUMNS]
    + [("train_steps", pa.int64()), ("b", pa.int64()), ("backend", pa.string()), ("wall_seconds", pa.float64()),
       ("trial_dir", pa.string()), ("error", pa.string())])


def table_rows(results: list[dict], out: Path) -> list[dict]:
    """One row per trial x policy; a failed trial is one row with no policy and its error."""
    rows = []
    for r in results:
        base = {"dataset": r["dataset"], "data": r.get("data"), "variant": r["variant"], "seed": r["seed"],
                "status": r["status"], "policy": None, "kind": None, "train_steps": r.get("steps"), "b": r.get("b"),
                "backend": r.get("backend"),
                "wall_seconds": r.get("wall_seconds"), "trial_dir": _relative(r["trial_dir"], out),
                "error": None if r.get("error") is None else f"{r['error']['stage']}: {r['error']['message']}"}
        if r["status"] != OK:
            rows.append(base)
            continue
        for name, stats in r["policies"].items():
            row = dict(base, policy=name, kind="policy" if name in POLICIES else "baseline")
            for col, _ in POLICY_COLUMNS:
                row[("eval_" + col) if col in ("steps", "backtests") else col] = stats.get(col)
            book = stats.get("book") or {}
            for col, key in BOOK_COLUMNS:
                row[col] = book.get(key)
            rows.append(row)
    return rows


def write_table(results: list[dict], out: Path) -> Path:
    import pyarrow.parquet as pq   # the Parquet writer is loaded where it writes (start-up of the CLI)

    rows = jsontext.strict(table_rows(results, out))
    table = pa.Table.from_pylist(rows, schema=TABLE_SCHEMA)
    path = out / TABLE_FILE
    with atomic_writer(path) as f:
        pq.write_table(table, f)
    return path


def _relative(path: str, out: Path) -> str:
    try:
        return str(Path(path).relative_to(out))
    except ValueError:
        return str(path)


def study_json(plan: StudyPlan, results: list[dict], wall_seconds: float) -> dict:
    """study.json's content: options, datasets, variants, seeds, trials (without traces), summary."""
    trials = []
    for r in results:
        t = {k: v for k, v in r.items() if k not in ("trace", "asked", "format")}
        t["trial_dir"], t["run_dir"] = _relative(r["trial_dir"], plan.out), _relative(r["run_dir"], plan.out)
        trials.append(t)
    n_ok = sum(r["status"] == OK for r in results)
    return {
        "format": FORMAT,
        "options": plan.options,
        "datasets": [dataclasses.asdict(d) for d in plan.datasets],
        "variants": [{"name": v.name, "config": v.config} for v in plan.variants],
        "seeds": plan.seeds,
        "metric": METRIC,
        "bootstrap": {"resamples": BOOTSTRAP_RESAMPLES, "seed": BOOTSTRAP_SEED, "level": CI_LEVEL,
                      "method": "percentile bootstrap of the mean over seeds"},
        "trials_ok": n_ok, "trials_failed": len(results) - n_ok,
        "wall_seconds": wall_seconds,
        "trials_wall_seconds": sum(r.get("wall_seconds") or 0.0 for r in results),
        "trials": trials,
        "summary": summarize(results),
    }


def write_study_json(content: dict, out: Path) -> Path:
    return atomic_write(out / STUDY_FILE, jsontext.dumps(content, indent=1))


def ordered(plan: StudyPlan, results: dict[str, dict]) -> list[dict]:
    """The results in the plan's order (datasets, variants, seeds), whatever order they ended in."""
    return [results[s.label] for s in plan.trials if s.label in results]


# ------------------------------------------------------------------ the picture
def save_png(plan: StudyPlan, results: list[dict], summary: list[dict], path: Path) -> Path:
    """Per dataset, a row: left, each policy's held-out PnL per seed (points) with the mean and its
    CI (bar), variants side by side in their colours; right, ``PLOT_SLOTS`` over training steps,
    one line per trained run. Needs matplotlib (the ``plot`` extra)."""
    import matplotlib   # optional extra alpharl[plot]: loaded only to draw

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = [d.name for d in plan.datasets]
    variants = [v.name for v in plan.variants]
    colours = {v: f"C{i % 10}" for i, v in enumerate(variants)}
    fig = plt.figure(figsize=(15, 4.4 * len(names)))
    grid = fig.add_gridspec(2 * len(names), 3, width_ratios=[2.2, 1, 1])
    stats = {(g["dataset"], g["variant"]): g["policies"] for g in summary}
    width = 0.7 / max(1, len(variants))
    for row, name in enumerate(names):
        ax = fig.add_subplot(grid[2 * row:2 * row + 2, 0])
        for j, v in enumerate(variants):
            dx = (j - (len(variants) - 1) / 2) * width
            trials = [r for r in results if r["dataset"] == name and r["variant"] == v and r["status"] == OK]
            for i, p in enumerate(ALL):
                ys = [t["policies"][p][METRIC] for t in trials if _has(t, p)]
                # the seeds left of the slot's centre, in seed order; the mean and its CI right of it
                xs = i + dx + np.linspace(-width / 3, 0.0, len(ys)) if len(ys) > 1 else [i + dx] * len(ys)
                ax.scatter(xs, ys, s=14, color=colours[v], alpha=0.6, label=v if i == 0 else None)
                s = stats.get((name, v), {}).get(p)
                if s and s["mean"] is not None:
                    lo, hi = s["ci"] if s["ci"] else (s["mean"], s["mean"])
                    ax.errorbar([i + dx + width / 4], [s["mean"]], yerr=[[s["mean"] - lo], [hi - s["mean"]]],
                                fmt="D", ms=4, color=colours[v], capsize=3)
        ax.axhline(0.0, color="0.6", linewidth=0.8)
        ax.set_xticks(range(len(ALL)), ALL)
        ax.set_ylabel(f"held-out {METRIC} $")
        ax.set_title(f"{name}: held-out {METRIC} per seed, mean and {CI_LEVEL:.0%} bootstrap CI", fontsize=9)
        ax.grid(alpha=0.3, axis="y")
        if len(variants) > 1:
            ax.legend(fontsize=7)
        for k, slot in enumerate(PLOT_SLOTS):
            tax = fig.add_subplot(grid[2 * row + k // 2, 1 + k % 2])
            lows = []
            for r in results:
                tr = r.get("trace") or {}
                if r["dataset"] == name and tr.get(slot):
                    tax.plot(tr["step"], tr[slot], color=colours.get(r["variant"], "C0"), linewidth=0.9, alpha=0.7,
                             marker="o" if len(tr["step"]) < 3 else None, ms=3)   # a short run: its points
                    lows.append(np.nanmin(np.asarray(tr[slot], np.float64)))
            if not lows:   # e.g. trials recorded before traces were kept, or without readable diagnostics
                tax.text(0.5, 0.5, "no trace recorded", ha="center", va="center", fontsize=8, color="0.4",
                         transform=tax.transAxes)
                tax.set_xticks([]), tax.set_yticks([])
            if slot.startswith("lr_") and lows and min(lows) > 0:   # learning rates span decades
                tax.set_yscale("log")
            tax.set_title(f"{name}: {slot}", fontsize=8)
            if k >= 2:
                tax.set_xlabel("training step", fontsize=7)
            tax.tick_params(labelsize=7)
            tax.grid(alpha=0.3)
    fig.tight_layout()
    with atomic_writer(path) as f:
        fig.savefig(f, format="png", dpi=90)
    plt.close(fig)
    return path


# ------------------------------------------------------------------ the terminal tables
#: A summary table's columns, and the order they give way on a narrow console (numbers are never cut).
TABLE_COLUMNS = ("policy", "n", "mean $", "95% CI $", "std $", "rank") + tuple(f"vs {q}" for q in BASELINES)
TABLE_GIVE_WAY = ("std $", "rank", "vs improve", "vs join", "vs periodic", "vs random")


def summary_tables(content: dict, width: int | None = None) -> list:
    """study.json's summary as Rich tables, one per dataset and variant: per policy the mean held-out
    ``METRIC`` over seeds, its interval and spread, its rank, and (trained policies) ``wins/n
    mean-difference`` against each baseline. ``summary_note`` says how to read them."""
    tables = []
    for g in content["summary"]:
        rows = []
        for p in ALL:
            s = g["policies"].get(p)
            if s is None:  # a study.json written before this policy existed
                continue
            ci = "-" if not s["ci"] else f"{fmt(s['ci'][0])}..{fmt(s['ci'][1])}"
            vs = []
            for q in BASELINES:
                c = s.get("vs", {}).get(q)
                vs.append("" if c is None else "-" if not c["n"] else
                          f"{c['wins']}/{c['n']} {'+' if c['mean_diff'] >= 0 else ''}{fmt(c['mean_diff'])}")
            rows.append([p, str(s["n"]), fmt(s["mean"]), ci, fmt(s["std"]),
                         "-" if s["rank"] is None else str(s["rank"]), *vs])
        seeds = ", ".join(str(x) for x in g["seeds"]) or "none succeeded"
        tables.append(fitted_table(list(TABLE_COLUMNS), rows, width,
                                   [TABLE_COLUMNS.index(c) for c in TABLE_GIVE_WAY],
                                   title=f"{g['dataset']} / {g['variant']} (seeds {seeds})", title_justify="left"))
    return tables


def summary_note(content: dict) -> str:
    b = content["bootstrap"]
    return (f"held-out {content['metric']} in $ over seeds; CI: {b['level']:.0%} percentile bootstrap of the mean "
            f"({b['resamples']:,} resamples, seed {b['seed']}); rank: of the mean among the {len(ALL)} policies; "
            f"vs: seeds above the baseline / seeds, mean difference")


# ================================================================== the whole study
def run_study(plan: StudyPlan, executor: str = "local", jobs: int = 1, ray_address: str | None = None,
              gpus_per_trial: float = 0.0, png: bool = True, progress=None) -> dict:
    """Run the plan's unfinished trials, then write study.json, trials.parquet and study.png.

    ``executor``: "local" (``jobs`` at once) or "ray" (``ray_address`` or a Ray started here).
    ``progress``: an object with ``start(total, done)`` and ``trial_done(result)`` (StudyProgress).
    Returns study.json's content. A KeyboardInterrupt propagates after the files are written for
    the trials that ended."""
    t0 = time.perf_counter()
    plan.out.mkdir(parents=True, exist_ok=True)
    todo, done = prepare(plan)
    results = dict(done)
    if progress is not None:
        progress.start(len(plan.trials), len(done))

    def on_done(result: dict) -> None:
        record(result)
        results[result_label(result)] = result
        if progress is not None:
            progress.trial_done(result)

    try:
        if executor == "ray":
            run_ray(todo, on_done, ray_address, jobs, gpus_per_trial)
        else:
            run_local(todo, jobs, on_done)
    finally:
        final = ordered(plan, results)
        content = study_json(plan, final, time.perf_counter() - t0)
        write_study_json(content, plan.out)
        write_table(final, plan.out)
        if png:
            save_png(plan, final, content["summary"], plan.out / PNG_FILE)
    return content


class StudyProgress:
    """Progress over trials: a live Rich bar on a terminal, one plain line per trial elsewhere."""

    def __init__(self, console=None, live: bool | None = None):
        from rich.console import Console   # Rich only where a display is made

        self.console = console if console is not None else Console()
        self.live = self.console.is_terminal if live is None else live
        self.bar = self.task = None
        self.total = self.count = 0

    def start(self, total: int, done: int) -> None:
        self.total, self.count = total, done
        if done:
            self.console.print(f"{done} of {total} trials already done (their result.json): skipped")
        if self.live and total > done:
            from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn, \
                TimeRemainingColumn

            self.bar = Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                                TimeElapsedColumn(), TimeRemainingColumn(), console=self.console)
            self.task = self.bar.add_task("trials", total=total, completed=done)
            self.bar.start()

    def trial_done(self, result: dict) -> None:
        self.count += 1
        label = result_label(result)
        if result["status"] == OK:
            p = result["policies"]
            line = (f"{label} ok in {result.get('wall_seconds', 0):.1f} s: held-out {METRIC} greedy "
                    f"{_num(p.get('greedy'))}, sampled {_num(p.get('sampled'))}")
        else:
            e = result["error"]
            line = f"{label} FAILED in {e['stage']}: {e['message']}"
        if self.bar is not None:
            self.bar.console.print(line, markup=False, highlight=False)
            self.bar.update(self.task, completed=self.count, description=f"trials ({label})")
        else:
            self.console.print(f"trial {self.count}/{self.total} {line}", markup=False, highlight=False,
                               soft_wrap=True)

    def stop(self) -> None:
        if self.bar is not None:
            self.bar.stop()
            self.bar = None


def _num(stats: dict | None) -> str:
    return fmt(None if stats is None else stats.get(METRIC))


__all__ = [
    "Dataset", "Variant", "TrialSpec", "StudyPlan", "StudyError", "StudyProgress",
    "eval_window_for", "parse_seeds", "parse_variants", "parse_datasets", "data_files", "trial_folder", "plan_study",
    "trial_argv", "run_trial", "prepare", "read_json", "run_local", "run_ray", "run_study",
    "mean_std", "bootstrap_ci", "paired_comparison", "ranks", "summarize",
    "table_rows", "write_table", "study_json", "save_png", "summary_tables", "summary_note", "result_label",
    "METRIC", "BOOTSTRAP_RESAMPLES", "BOOTSTRAP_SEED", "CI_LEVEL", "PLOT_SLOTS", "TRACE_SLOTS",
    "EXIT_TRIALS_FAILED",
]
