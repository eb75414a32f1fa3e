"""alpharl: a GPU-resident actor-critic trainer for limit-order-book trading agents.

The project's top-level folders ``cuda_kernels/``, ``cli/`` and ``data/`` are
installed as ``alpharl.cuda_kernels``, ``alpharl.cli`` and ``alpharl.data``.
From a plain source tree (``PYTHONPATH=.``) the same names resolve because the
repository root is appended to this package's search path below.
"""
from __future__ import annotations

import os
from pathlib import Path

# The numpy backend multiplies small matrices (hundreds of rows x 128): BLAS
# threads only add contention there (40x slower on a loaded 2-core machine).
# Takes effect when alpharl is imported before numpy; an explicit setting wins.
for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

from alpharl import target as _target

_here = Path(__file__).resolve().parent
if not (_here / "cuda_kernels").is_dir() and (_here.parent / "cuda_kernels" / "__init__.py").is_file():
    # Source tree: let ``alpharl.cuda_kernels`` find ``<root>/cuda_kernels``.
    __path__.append(str(_here.parent))  # type: ignore[name-defined]

_target.configure()

__version__ = "0.1.0"
