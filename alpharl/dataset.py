"""A dataset: the LOBSTER files a run trains on, each file's training window, and its record.

``--data`` names one source or many: a LOBSTER zip, a message or orderbook CSV
(its pair found beside it), an Arrow cache file, a folder (every zip and CSV
pair directly inside it) or a glob (``data/*/AMZN_*.zip``, ``**`` descends);
it may be repeated. Every source found is one *file* of the dataset, in the
order given (each folder or glob sorted by path, duplicates dropped). With
no ``--data`` the dataset is the embedded sample.

Each file's identity is the sha256 of its parsed content (``content_sha256``),
so a run knows a file again whatever its path, container (zip, CSV, Arrow) or
copy. ``--holdout-files PATTERN`` (a glob on the file name) keeps whole files
out of training; every other file trains on the rows of ``train_window``
(alpharl.windows) and becomes one stream of the simulator: backtest b replays
stream b mod S (S training files, in dataset order).

``Dataset.record`` is what the run directory keeps (``dataset.json``, the
summary, the checkpoint's metadata): every file's label, path, sha256, size
and the rows it trained on (None: held out), so evaluation can tell held-out
rows from rows the run has seen.
"""
from __future__ import annotations

import fnmatch
import glob
import hashlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Sequence

import numpy as np

from alpharl import windows as W
from alpharl.lobster.format import MESSAGE
from alpharl.lobster.load import load_lobster
from alpharl.lobster.market import FIELD_DTYPES, MarketData
from alpharl.lobster.sample import embedded_sample_path
from alpharl.lobster.source import NAMING_HINT, is_arrow, parse_name

#: Characters that make a --data entry a glob pattern.
GLOB_CHARS = "*?["
#: How backtests are spread over the training files (the record says so).
ASSIGNMENT = "round_robin: backtest b replays training file b mod S"


class DatasetError(ValueError):
    """A dataset that cannot be used as asked (a pattern matching nothing, a window too short...): one line."""


# ------------------------------------------------------------------ finding the files
def data_specs(data: str | Sequence[str] | None) -> list[str]:
    """The --data entries of a config value (None: none, i.e. the embedded sample)."""
    if data is None:
        return []
    return [data] if isinstance(data, str) else [str(d) for d in data]


def _sources_among(paths: Sequence[Path]) -> list[Path]:
    """The LOBSTER sources among ``paths``: zips, Arrow files and the message CSV of each CSV pair
    (an orderbook CSV stands for its message file); sorted, each once."""
    found = []
    for p in paths:
        if p.suffix.lower() == ".zip" or is_arrow(p):
            found.append(p)
        elif (name := parse_name(p.name)) is not None:
            found.append(p if name.kind == MESSAGE else p.with_name(name.sibling(p.name)))
    return sorted(set(found))


def _in_folder(folder: Path) -> list[Path]:
    return _sources_among([p for p in folder.iterdir() if p.is_file()])


def find_sources(specs: Sequence[str], option: str = "--data") -> list[Path]:
    """Every LOBSTER source the entries name (module doc); [embedded sample] for no entry.

    DatasetError (one line naming ``option`` and the entry) for a path that does not exist, or a
    folder or a glob holding no LOBSTER file. A single file is returned as given: its loader
    checks it."""
    if not specs:
        return [embedded_sample_path()]
    found: list[Path] = []
    for spec in specs:
        where = f"{option} {spec}" if option else spec
        path = Path(spec).expanduser()
        if path.exists() and not path.is_dir():
            got = [path]
        elif path.is_dir():
            got = _in_folder(path)
            if not got:
                raise DatasetError(f"{where}: no LOBSTER file ({NAMING_HINT} and its orderbook file, "
                                   f"or a .zip) in the folder")
        elif any(c in spec for c in GLOB_CHARS):
            matches = [Path(m) for m in sorted(glob.glob(str(path), recursive=True))]
            files = [m for m in matches if m.is_file()]
            for m in matches:
                if m.is_dir():
                    files += [p for p in m.iterdir() if p.is_file()]
            got = _sources_among(files)
            if not got:
                raise DatasetError(f"{where}: matches no LOBSTER file ({NAMING_HINT} and its orderbook "
                                   f"file, or a .zip)")
        else:
            raise DatasetError(f"{where}: no such file or directory")
        seen = {p.resolve() for p in found}
        found += [p for p in got if p.resolve() not in seen]
    return found


# ------------------------------------------------------------------ identity
def content_sha256(md: MarketData) -> str:
    """sha256 of a file's parsed content (levels, tick and every array): its identity, whatever the
    path or container it was read from."""
    digest = hashlib.sha256(f"lobster-content-v1 levels={md.levels} tick={md.tick}".encode())
    for name in FIELD_DTYPES:
        digest.update(np.ascontiguousarray(getattr(md, name), dtype=FIELD_DTYPES[name]).data)
    return digest.hexdigest()


def file_labels(markets: Sequence[MarketData]) -> list[str]:
    """A short label per file, ``TICKER_DATE_L`` as LOBSTER names it, made unique by ``#k`` in order."""
    labels, seen = [], {}
    for md in markets:
        base = f"{md.ticker}_{md.date}_{md.levels}"
        seen[base] = seen.get(base, 0) + 1
        labels.append(base if seen[base] == 1 else f"{base}#{seen[base]}")
    return labels


# ------------------------------------------------------------------ the dataset
@dataclass
class DataFile:
    """One file of a dataset: where it came from, what it is, and the rows training reads."""

    path: str
    label: str
    sha256: str
    market: MarketData
    #: Rows [first, stop) training reads; None: held out whole.
    train_rows: tuple[int, int] | None

    @property
    def held_out(self) -> bool:
        return self.train_rows is None

    @property
    def name(self) -> str:
        return Path(self.path).name

    def record(self) -> dict:
        md = self.market
        return {"label": self.label, "path": self.path, "sha256": self.sha256, "events": md.n_events,
                "levels": md.levels, "tick": md.tick, "held_out": self.held_out,
                "train_rows": None if self.train_rows is None else list(self.train_rows)}


@dataclass
class Dataset:
    """The files of a run, in order, with the training window and the held-out pattern."""

    files: list[DataFile]
    train_window: tuple[float, float] = field(default_factory=lambda: W.parse_window(W.DEFAULT_TRAIN_WINDOW))
    holdout_files: str | None = None

    @property
    def training(self) -> list[DataFile]:
        """The files training reads, in stream order (stream s = the s-th of them)."""
        return [f for f in self.files if not f.held_out]

    def train_markets(self) -> list[MarketData]:
        """Each training file's window (rows train_rows, sharing the file's arrays), in stream order."""
        return [f.market.window(*f.train_rows) for f in self.training]

    def record(self, b: int | None = None) -> dict:
        """What the run keeps: windows, pattern, assignment and every file (module doc)."""
        streams = self.training
        files = []
        for f in self.files:
            r = f.record()
            s = streams.index(f) if not f.held_out else None
            r["stream"] = s
            if b is not None:
                r["backtests"] = 0 if s is None else len(range(s, b, len(streams)))
            files.append(r)
        return {"train_window": W.format_window(self.train_window), "holdout_files": self.holdout_files,
                "streams": len(streams), "assignment": ASSIGNMENT, "b": b, "files": files}


def holdout_match(name: str, pattern: str | None) -> bool:
    """Whether the file named ``name`` is held out by ``pattern`` (a glob on the file name)."""
    return pattern is not None and fnmatch.fnmatchcase(name, pattern)


def load_files(paths: Sequence[Path]) -> list[tuple[str, MarketData]]:
    """(path, MarketData) of every source, loaded and validated (through the Arrow cache)."""
    return [(str(p), load_lobster(p)) for p in paths]


def build(loaded: Sequence[tuple[str, MarketData]], train_window: tuple[float, float],
          holdout_files: str | None = None) -> Dataset:
    """The Dataset of loaded files: held-out ones by the pattern, the rest with their training rows."""
    labels = file_labels([md for _, md in loaded])
    files = []
    for (path, md), label in zip(loaded, labels):
        held = holdout_match(Path(path).name, holdout_files)
        rows = None if held else W.rows(md.n_events, train_window)
        files.append(DataFile(path, label, content_sha256(md), md, rows))
    return Dataset(files, train_window, holdout_files)


def check_holdout(paths: Sequence[Path], pattern: str | None) -> None:
    """--holdout-files must match a file of the dataset and leave at least one to train on."""
    if pattern is None:
        return
    held = [p for p in paths if holdout_match(p.name, pattern)]
    if not held:
        raise DatasetError(f"--holdout-files {pattern}: matches no file of the dataset "
                           f"({', '.join(p.name for p in paths)})")
    if len(held) == len(paths):
        raise DatasetError(f"--holdout-files {pattern}: holds out every file of the dataset; nothing is left "
                           f"to train on")


def check_training(ds: Dataset, b: int, events_per_step: int) -> None:
    """Every training window holds at least one step of events, and every stream gets a backtest."""
    need = events_per_step + 1
    for f in ds.training:
        first, stop = f.train_rows
        if stop - first < need:
            raise DatasetError(f"--train-window {W.format_window(ds.train_window)} leaves {f.label} ({f.path}) "
                               f"{stop - first} of its {f.market.n_events} events: too few for one step of "
                               f"events_per_step = {events_per_step} (needs {need})")
    if b < len(ds.training):
        raise DatasetError(f"--b {b}: fewer backtests than the {len(ds.training)} training files; each file "
                           f"needs at least one (backtest b replays file b mod {len(ds.training)})")


def check_obs_dims(labels: Sequence[str], obs_dims: Sequence[int]) -> None:
    """The streams of one simulator share one observation length (the network's input).

    The observation has ``[sim] obs_levels`` book levels whatever a file's depth, so files of any
    level counts share it; this guards that invariant (it compares the simulators' own obs_dim)."""
    if len(set(obs_dims)) > 1:
        found = ", ".join(f"{lab} obs_dim {d}" for lab, d in zip(labels, obs_dims))
        raise DatasetError(f"--data: the files' observations differ in length ({found})")


def load_dataset(data, train_window: str, holdout_files: str | None, b: int, events_per_step: int) -> Dataset:
    """Find, load and check a run's dataset (config values: ``data``, ``train_window``, ``holdout_files``)."""
    window = W.parse_window(train_window)
    paths = find_sources(data_specs(data))
    check_holdout(paths, holdout_files)
    ds = build(load_files(paths), window, holdout_files)
    check_training(ds, b, events_per_step)
    return ds


def check_same_files(ds: Dataset, recorded: dict, where: str) -> None:
    """A resumed run's files are those it started with: same content, in the same order."""
    old = [(f["label"], f["sha256"]) for f in recorded.get("files", [])]
    new = [(f.label, f.sha256) for f in ds.files]
    if [s for _, s in old] == [s for _, s in new]:
        return
    for i, (lab, sha) in enumerate(new):
        if i >= len(old):
            raise DatasetError(f"{where}: the run's data changed since it started: {lab} ({ds.files[i].path}) is "
                               f"new (the run recorded {len(old)} files)")
        if old[i][1] != sha:
            raise DatasetError(f"{where}: the run's data changed since it started: {lab} ({ds.files[i].path}) is "
                               f"sha256 {sha[:12]}, the run recorded {old[i][0]} sha256 {old[i][1][:12]}")
    raise DatasetError(f"{where}: the run's data changed since it started: {len(old)} files recorded, "
                       f"{len(new)} found now")


__all__ = ["DatasetError", "DataFile", "Dataset", "find_sources", "content_sha256", "file_labels", "load_files",
           "build", "load_dataset", "check_obs_dims", "check_holdout", "check_training", "check_same_files",
           "data_specs", "holdout_match", "ASSIGNMENT"]
