"""Which backend runs the step: ``resolve_backend`` checks the name against the process's numba
target, ``make_backend`` builds it."""
from __future__ import annotations

from alpharl import target
from alpharl.backends.base import Backend
from alpharl.backends.device import DeviceBackend
from alpharl.backends.numpy import NumpyBackend
from alpharl.config import TrainConfig
from alpharl.sizes import HIDDEN

#: The class of each resolved backend name (``alpharl.config.BACKENDS`` less "auto").
BACKEND_CLASSES = {"cuda": DeviceBackend, "sim": DeviceBackend, "numpy": NumpyBackend}


def resolve_backend(backend: str) -> str:
    """auto -> cuda with a GPU, numpy without; cuda/sim must match the process's numba target."""
    active = target.active()
    if backend == "auto":
        return "cuda" if active == target.GPU else "numpy"
    if backend == "cuda" and active != target.GPU:
        raise ValueError("--backend cuda: no GPU here (numba runs the CUDA simulator); use --backend numpy or sim")
    if backend == "sim" and active != target.SIM:
        raise ValueError("--backend sim: this process runs numba on the GPU; set ALPHARL_TARGET=sim to simulate")
    return backend


def make_backend(backend: str, config: TrainConfig, market, m: int, hidden: int = HIDDEN, comm=None) -> Backend:
    """The resolved backend ``backend`` for config (market: unused with config.features; m: minibatch rows;
    comm: this rank's communicator with data-parallel ranks, alpharl.comm)."""
    return BACKEND_CLASSES[backend](config, market, m, hidden, comm)
