"""The run directory: its files, when it holds a run, how a run resumes, how its config is resolved.

A run directory holds:

- ``config.toml``         the resolved configuration;
- ``diagnostics.arrows``  one row per ``diag_every`` steps (alpharl.diag), durable row by row;
- ``diagnostics.parquet`` a snapshot of the same, refreshed at each checkpoint and at the end;
- ``checkpoint.npz``      everything needed to continue bit-identically (alpharl.checkpoint);
- ``summary.json``        final step, wall time, throughput, last losses and trade statistics.

A directory *holds a run* once it has diagnostics or a checkpoint: a new run
never writes there (``--resume`` continues it instead).

The config of ``alpharl train`` resolves in three layers: ``TrainConfig``'s
defaults, then the ``--config FILE.toml`` file (or, with ``--resume RUN`` and
no ``--config``, the resumed run's own ``config.toml``), then the options given
on the command line (None = not given). A resumed run then keeps its own
``config.toml`` but for ``RESUME_OVERRIDABLE`` (``resume_config``).
"""
from __future__ import annotations

import json
import time
from pathlib import Path

from alpharl.atomic import atomic_write
from alpharl.config import ConfigError, TrainConfig

CONFIG_FILE = "config.toml"
DIAG_FILE = "diagnostics.arrows"
PARQUET_FILE = "diagnostics.parquet"
CHECKPOINT_FILE = "checkpoint.npz"
SUMMARY_FILE = "summary.json"
#: The files whose presence means a directory already holds a run.
RUN_MARKERS = (DIAG_FILE, CHECKPOINT_FILE)
#: Where runs go without --run-dir: runs/<timestamp>-s<seed>.
RUNS_ROOT = "runs"
#: Options a resumed run may change; everything else comes from the run's own config.toml.
RESUME_OVERRIDABLE = ("steps", "backend", "graph")


class RunDirError(ValueError):
    """A run directory that cannot be used as asked (missing, not a run, already a run): one line."""


def default_run_dir(config: TrainConfig) -> Path:
    return Path(RUNS_ROOT) / f"{time.strftime('%Y%m%d-%H%M%S')}-s{config.seed}"


def holds_run(path: Path) -> bool:
    return any((Path(path) / f).exists() for f in RUN_MARKERS)


def _flag(name: str) -> str:
    return "--" + name.replace("_", "-")


# ------------------------------------------------------------- the checks
def check_resume_dir(resume: Path) -> None:
    """``--resume`` names a directory with a checkpoint to continue from."""
    resume = Path(resume)
    if not resume.exists():
        raise RunDirError(f"--resume {resume}: no such run directory")
    if not resume.is_dir():
        raise RunDirError(f"--resume {resume}: not a run directory")
    if not (resume / CHECKPOINT_FILE).is_file():
        raise RunDirError(f"--resume {resume}: no {CHECKPOINT_FILE} there (nothing to continue from)")


def check_new_run_dir(run_dir: Path) -> None:
    """A new run's ``--run-dir`` is a directory (or not there yet) and holds no earlier run."""
    run_dir = Path(run_dir)
    if run_dir.exists() and not run_dir.is_dir():
        raise RunDirError(f"--run-dir {run_dir}: exists and is not a directory")
    if holds_run(run_dir):
        raise RunDirError(f"--run-dir {run_dir}: already holds a run; continue it with --resume {run_dir} "
                          f"or choose another directory")


def check_paths(cfg: TrainConfig, resume: Path | None) -> None:
    """Fail early, in one line, on paths that cannot work; never overwrite an earlier run."""
    if cfg.data is not None and not Path(cfg.data).exists():
        raise ConfigError(f"--data {cfg.data}: no such file or directory")
    if resume is not None:
        check_resume_dir(Path(resume))
    elif cfg.run_dir is not None:
        check_new_run_dir(Path(cfg.run_dir))


def check_resume_overrides(saved: TrainConfig, overrides: dict) -> None:
    """A resumed run keeps its config but for a few options; refuse a change of any other."""
    for name, value in overrides.items():
        if value is None or name in RESUME_OVERRIDABLE or name == "run_dir":
            continue
        if value != getattr(saved, name):
            raise ConfigError(f"{_flag(name)} {value}: a resumed run keeps its {name} = {getattr(saved, name)!r} "
                              f"(may change: {', '.join(_flag(k) for k in RESUME_OVERRIDABLE)})")


# ------------------------------------------------------------- the config merge
def resolve_config(config_file: Path | None, resume: Path | None, overrides: dict) -> TrainConfig:
    """Defaults <- config file (or the resumed run's config.toml) <- command-line options; validated."""
    if resume is not None:
        check_resume_dir(Path(resume))
    if config_file is not None:
        base = TrainConfig.from_toml(config_file)
    elif resume is not None and (Path(resume) / CONFIG_FILE).is_file():
        base = TrainConfig.from_toml(Path(resume) / CONFIG_FILE)
    else:
        base = TrainConfig()
    if resume is not None and config_file is None:
        check_resume_overrides(base, overrides)
    cfg = base.with_overrides(**overrides)
    if resume is not None and overrides.get("run_dir") is None:
        cfg = cfg.with_overrides(run_dir=str(resume))
    if cfg.synthetic and cfg.data is not None:
        raise ConfigError(f"--data {cfg.data} and --synthetic exclude each other (synthetic needs no data file)")
    return cfg.validate()


def resume_config(run_dir: Path, given: TrainConfig) -> TrainConfig:
    """The config a resumed run continues with: its own config.toml, but for ``RESUME_OVERRIDABLE`` from ``given``."""
    run_dir = Path(run_dir)
    cfg_path = run_dir / CONFIG_FILE
    if not run_dir.is_dir():
        raise RunDirError(f"{run_dir}: no such run directory")
    if not cfg_path.exists():
        raise RunDirError(f"{cfg_path}: missing; {run_dir} is not an alpharl run directory")
    saved = TrainConfig.from_toml(cfg_path)
    return saved.with_overrides(**{k: getattr(given, k) for k in RESUME_OVERRIDABLE}, run_dir=str(run_dir))


# ------------------------------------------------------------- the small files
def write_config(run_dir: Path, config: TrainConfig) -> Path:
    return atomic_write(Path(run_dir) / CONFIG_FILE, config.to_toml())


def write_summary(run_dir: Path, summary: dict) -> Path:
    return atomic_write(Path(run_dir) / SUMMARY_FILE, json.dumps(summary, indent=1))
