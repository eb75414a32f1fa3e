"""Strict JSON for everything alpharl writes (summary.json, ``--json`` outputs, eval and bench reports).

JSON has no NaN or infinity; Python's ``json`` writes them as bare ``NaN`` /
``Infinity`` by default, which other readers reject. ``dumps`` writes every
missing or non-finite number as ``null`` (and NumPy scalars and arrays as
plain numbers and lists), then encodes with ``allow_nan=False``, so nothing
non-standard can slip through.
"""
from __future__ import annotations

import json
import math
from typing import Any

import numpy as np


def finite_or_none(x: Any):
    """A float as JSON may hold it: itself when finite, None otherwise (NaN, ±inf)."""
    x = float(x)
    return x if math.isfinite(x) else None


def strict(obj: Any) -> Any:
    """``obj`` with every float non-finite mapped to None and NumPy values made plain, recursively."""
    if isinstance(obj, dict):
        return {k: strict(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [strict(v) for v in obj]
    if isinstance(obj, np.ndarray):
        return strict(obj.tolist())
    if isinstance(obj, (bool, np.bool_)):
        return bool(obj)
    if isinstance(obj, (int, np.integer)):
        return int(obj)
    if isinstance(obj, (float, np.floating)):
        return finite_or_none(obj)
    return obj


def dumps(obj: Any, **kwargs) -> str:
    return json.dumps(strict(obj), allow_nan=False, **kwargs)


__all__ = ["dumps", "strict", "finite_or_none"]
