"""The run directory: its files, when it holds a run, how a run resumes, how its config is resolved.

A run directory holds:

- ``config.toml``         the resolved configuration;
- ``diagnostics.arrows``  one row per ``diag_every`` steps (alpharl.diag), durable row by row;
- ``diagnostics.parquet`` a snapshot of the same, refreshed at each checkpoint and at the end;
- ``checkpoint.npz``      everything needed to continue bit-identically (alpharl.checkpoint);
- ``summary.json``        final step, wall time, throughput, last losses and trade statistics;
- ``dataset.json``        the files trained on, by content (sha256), and the rows of each
                          (alpharl.dataset's record), written before the first step.

A directory *holds a run* once it has a checkpoint or a summary: a new run
never writes there (``--resume`` continues it instead). A directory a run was
started in but that holds neither (killed, or out of disk, before its first
checkpoint) has nothing to continue from and nothing worth keeping: it is
*restartable*. ``--run-dir D`` starts the new run there (saying so), and
``--resume D`` starts its recorded config again from step 0. Both first remove
the temporaries a killed writer left (``clean``).

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

from alpharl import jsontext
from alpharl.atomic import TEMP_SUFFIX, atomic_write, remove_stale_temps
from alpharl.config import PLAIN_OPTIONS, STUDY_SIM_DEFAULTS, ConfigError, TrainConfig, read_toml
from alpharl.dataset import check_holdout, data_specs, find_sources
from alpharl.sim.params import SimParams

CONFIG_FILE = "config.toml"
DIAG_FILE = "diagnostics.arrows"
PARQUET_FILE = "diagnostics.parquet"
CHECKPOINT_FILE = "checkpoint.npz"
SUMMARY_FILE = "summary.json"
DATASET_FILE = "dataset.json"
#: The files whose presence means a directory already holds a run (something to continue or keep).
RUN_MARKERS = (CHECKPOINT_FILE, SUMMARY_FILE)
#: The files a run writes; their presence without a marker means a restartable directory.
RUN_FILES = (CONFIG_FILE, DIAG_FILE, PARQUET_FILE, CHECKPOINT_FILE, SUMMARY_FILE, DATASET_FILE)

#: Where runs go without --run-dir: runs/<timestamp>-s<seed>.
RUNS_ROOT = "runs"
#: Options a resumed run may change; everything else comes from the run's own config.toml.
RESUME_OVERRIDABLE = ("steps", "backend", "graph", "tensor_cores", "fused_update")


class RunDirError(ValueError):
    """A run directory that cannot be used as asked (missing, not a run, already a run): one line."""


def default_run_dir(config: TrainConfig) -> Path:
    return Path(RUNS_ROOT) / f"{time.strftime('%Y%m%d-%H%M%S')}-s{config.seed}"


def holds_run(path: Path) -> bool:
    return any((Path(path) / f).exists() for f in RUN_MARKERS)


def restartable(path: Path) -> bool:
    """A run was started in ``path`` but left nothing to continue: run files, no checkpoint, no summary."""
    path = Path(path)
    return path.is_dir() and not holds_run(path) and any((path / f).exists() for f in RUN_FILES)


def has_checkpoint(path: Path) -> bool:
    return (Path(path) / CHECKPOINT_FILE).is_file()


def clean(run_dir: Path) -> list[str]:
    """Remove the temporaries a killed run left in ``run_dir`` (its own writers' only); the names removed."""
    run_dir = Path(run_dir)
    removed = remove_stale_temps(run_dir)
    for name in RUN_FILES:
        legacy = run_dir / (name + TEMP_SUFFIX)   # earlier versions named their temporaries <file>.tmp
        if legacy.is_file():
            legacy.unlink()
            removed.append(legacy.name)
    return removed


def _flag(name: str) -> str:
    """The option of a config key; a section's field (``sim.obs_levels``) is named by the field."""
    return "--" + name.split(".")[-1].replace("_", "-")


# ------------------------------------------------------------- the checks
def check_resume_dir(resume: Path) -> None:
    """``--resume`` names a run directory: with a checkpoint to continue from, or restartable."""
    resume = Path(resume)
    if not resume.exists():
        raise RunDirError(f"--resume {resume}: no such run directory")
    if not resume.is_dir():
        raise RunDirError(f"--resume {resume}: not a run directory")
    if not (resume / CONFIG_FILE).is_file():
        raise RunDirError(f"--resume {resume}: no {CONFIG_FILE} there (not an alpharl run directory)")
    if not has_checkpoint(resume) and holds_run(resume):
        raise RunDirError(f"--resume {resume}: no {CHECKPOINT_FILE} there (nothing to continue from)")


def check_new_run_dir(run_dir: Path) -> str | None:
    """A new run's ``--run-dir`` is a directory (or not there yet) and holds no earlier run; a
    restartable one is reused, and the line returned says so."""
    run_dir = Path(run_dir)
    if run_dir.exists() and not run_dir.is_dir():
        raise RunDirError(f"--run-dir {run_dir}: exists and is not a directory")
    if holds_run(run_dir):
        raise RunDirError(f"--run-dir {run_dir}: already holds a run; continue it with --resume {run_dir} "
                          f"or choose another directory")
    if restartable(run_dir):
        return f"{run_dir}: an earlier run stopped there before its first checkpoint; starting afresh in it"
    return None


def check_paths(cfg: TrainConfig, resume: Path | None) -> str | None:
    """Fail early, in one line, on paths that cannot work; never overwrite an earlier run. Returns
    a line to show when the run starts over in a restartable directory, else None."""
    if not (cfg.synthetic or cfg.features):
        check_holdout(find_sources(data_specs(cfg.data)), cfg.holdout_files)
    if resume is not None:
        check_resume_dir(Path(resume))
        if not has_checkpoint(resume):
            return f"{resume}: no checkpoint yet (the run stopped before its first); starting it again from step 0"
    elif cfg.run_dir is not None:
        return check_new_run_dir(Path(cfg.run_dir))
    return None


def check_resume_changes(saved: TrainConfig, given: dict, where) -> None:
    """A resumed run keeps its config but for ``RESUME_OVERRIDABLE``; refuse a change of any other,
    from the command line and from a ``--config`` file alike (one rule). ``given``: dotted key
    (``b``, ``sim.taker_fee``) -> value; ``where(key, value)`` names where it was given."""
    for name, value in given.items():
        if value is None or name in RESUME_OVERRIDABLE or name == "run_dir":
            continue
        old = _dotted(saved, name)
        if value != old:
            raise ConfigError(f"{where(name, value)}: a resumed run keeps its {name} = {old!r} "
                              f"(may change: {', '.join(_flag(k) for k in RESUME_OVERRIDABLE)})")


def _dotted(config: TrainConfig, name: str):
    obj = config
    for part in name.split("."):
        obj = getattr(obj, part)
    return obj


def _file_keys(config_file: Path) -> tuple[TrainConfig, dict]:
    """A config file's config and the keys it sets (dotted for its sections), with their typed values."""
    raw = read_toml(config_file)
    cfg = TrainConfig.from_dict(raw, source=str(config_file))
    keys = {}
    for k, v in raw.items():
        if isinstance(v, dict):
            keys.update({f"{k}.{sub}": _dotted(cfg, f"{k}.{sub}") for sub in v})
        else:
            keys[k] = getattr(cfg, k)
    return cfg, keys


# ------------------------------------------------------------- the config merge
#: The training window of a run whose config.toml predates train windows: it read the whole stream.
LEGACY_TRAIN_WINDOW = "0:1"
#: What a run recorded before an option existed ran with (dotted for the [sim] section). A config.toml holds
#: every option of its day, so an option it lacks did not exist yet and takes its value from before, not
#: today's default: the whole stream (no train window), all of a rollout's rows (no rollout_rows), and the
#: plain path for the learning options (PLAIN_OPTIONS) and the reward and episode options (STUDY_SIM_DEFAULTS,
#: SimParams' own values).
LEGACY_VALUES = {"train_window": LEGACY_TRAIN_WINDOW, "rollout_rows": 0, **PLAIN_OPTIONS,
                 **{f"sim.{k}": getattr(SimParams(), k) for k in STUDY_SIM_DEFAULTS}}


def read_run_config(run_dir: Path) -> TrainConfig:
    """A run directory's config.toml, every option it predates at its LEGACY_VALUES (a run recorded before
    train windows trained on the whole stream of its data, and says so rather than taking the default)."""
    cfg, keys = _file_keys(Path(run_dir) / CONFIG_FILE)
    return cfg.with_overrides(**{k: v for k, v in LEGACY_VALUES.items() if k not in keys})


def resolve_config(config_file: Path | None, resume: Path | None, overrides: dict) -> TrainConfig:
    """Defaults <- config file <- command-line options; validated. Resuming, the run's own
    config.toml is the base, and the file and options may change only ``RESUME_OVERRIDABLE``."""
    if resume is None:
        base = TrainConfig() if config_file is None else TrainConfig.from_toml(config_file)
    else:
        check_resume_dir(Path(resume))
        base = read_run_config(Path(resume))
        if config_file is not None:
            file_cfg, keys = _file_keys(config_file)
            check_resume_changes(base, keys, lambda k, v: f"--config {config_file} sets {k} = {v!r}")
            base = base.with_overrides(**{k: getattr(file_cfg, k) for k in RESUME_OVERRIDABLE if k in keys})
        check_resume_changes(base, overrides, lambda k, v: f"{_flag(k)} {v}")
    cfg = base.with_overrides(**overrides)
    if resume is not None and overrides.get("run_dir") is None:
        cfg = cfg.with_overrides(run_dir=str(resume))
    if cfg.synthetic and cfg.data is not None:
        raise ConfigError(f"--data {cfg.data} and --synthetic exclude each other (synthetic needs no data file)")
    return cfg.validate()


def resume_config(run_dir: Path, given: TrainConfig) -> TrainConfig:
    """The config a resumed run continues with: its own config.toml, but for ``RESUME_OVERRIDABLE`` from ``given``."""
    run_dir = Path(run_dir)
    check_resume_dir(run_dir)
    saved = read_run_config(run_dir)
    return saved.with_overrides(**{k: getattr(given, k) for k in RESUME_OVERRIDABLE}, run_dir=str(run_dir))


# ------------------------------------------------------------- the small files
def write_config(run_dir: Path, config: TrainConfig) -> Path:
    return atomic_write(Path(run_dir) / CONFIG_FILE, config.to_toml())


def write_summary(run_dir: Path, summary: dict) -> Path:
    return atomic_write(Path(run_dir) / SUMMARY_FILE, jsontext.dumps(summary, indent=1))


def write_dataset(run_dir: Path, record: dict) -> Path:
    return atomic_write(Path(run_dir) / DATASET_FILE, jsontext.dumps(record, indent=1))


def read_dataset(run_dir: Path) -> dict | None:
    """The run's dataset record, None when it has none (a run from before datasets, or synthetic)."""
    path = Path(run_dir) / DATASET_FILE
    if not path.is_file():
        return None
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        raise RunDirError(f"{path}: unreadable dataset record ({exc})") from None
