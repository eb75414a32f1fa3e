"""Checkpoints: everything needed to continue bit-identically, written atomically.

A checkpoint is one ``.npz`` archive of named arrays (weights, Adam moments,
target net, ISV, PRNG states, simulator state, replay, step) plus a JSON
``meta`` entry (format version, step, the resolved config). It is written
atomically (alpharl.atomic), so a kill at any moment leaves either the old or
the new checkpoint, whole.
"""
from __future__ import annotations

import json
import zipfile
from pathlib import Path

import numpy as np

from alpharl.atomic import atomic_writer
from alpharl.rundir import CHECKPOINT_FILE
from alpharl.sim.layout import OBS_VERSION

FORMAT = "alpharl-checkpoint-v1"


class CheckpointError(ValueError):
    """A checkpoint that is missing, unreadable or incompatible (one-line message)."""


#: The array holding the checkpoint's JSON metadata.
META_KEY = "__meta__"

def save_checkpoint(path: Path, arrays: dict[str, np.ndarray], meta: dict) -> Path:
    path = Path(path)
    payload = {k: np.asarray(v) for k, v in arrays.items()}
    payload[META_KEY] = np.frombuffer(json.dumps({"format": FORMAT, **meta}).encode(), dtype=np.uint8)
    with atomic_writer(path) as f:
        np.savez(f, **payload)
    return path


def load_checkpoint(path: Path, keep=None) -> tuple[dict[str, np.ndarray], dict]:
    """(arrays, metadata) of a checkpoint; ``keep(key)``: read only the arrays it accepts (a rank of a
    data-parallel run reads its own state, not every rank's replay)."""
    path = Path(path)
    if path.is_dir():
        path = path / CHECKPOINT_FILE
    if not path.exists():
        raise CheckpointError(f"{path}: no checkpoint there")
    try:
        with np.load(path, allow_pickle=False) as z:
            arrays = {k: z[k] for k in z.files if keep is None or k == META_KEY or keep(k)}
    except (OSError, ValueError, zipfile.BadZipFile, EOFError) as exc:
        raise CheckpointError(f"{path}: unreadable checkpoint ({type(exc).__name__}: {exc})") from None
    try:
        meta = json.loads(arrays.pop(META_KEY).tobytes().decode())
    except (KeyError, ValueError):
        raise CheckpointError(f"{path}: not an alpharl checkpoint (no metadata)") from None
    if meta.get("format") != FORMAT:
        raise CheckpointError(f"{path}: checkpoint format {meta.get('format')!r}, expected {FORMAT!r}")
    return arrays, meta


def check_obs_version(meta: dict, path: Path | str) -> None:
    """The checkpoint's network reads the observation this code writes: its meta ``obs_version``
    is layout.OBS_VERSION. Checkpoints from before the version was recorded read version 1 (the
    file's own level count, sizes in raw shares), which no network of today's runs can replace."""
    version = meta.get("obs_version", 1)
    if version != OBS_VERSION:
        raise CheckpointError(f"{path}: its network was trained on observation version {version} (this alpharl "
                              f"writes version {OBS_VERSION}: [sim] obs_levels book levels in instrument-free "
                              f"units) and cannot read today's observations; train the run again")
