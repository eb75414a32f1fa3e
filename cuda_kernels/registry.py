"""The one registry of kernels and their launch signatures.

``@kernel("void(float32[::1], int32)")`` replaces ``@cuda.jit``: it records the
Python function and its signature, and builds the Numba dispatcher lazily on
first launch with that exact signature (``cache=True`` so a warm start loads
the compiled code from disk). Launching with other argument types fails with
Numba's "No matching definition" instead of silently compiling a variant, so
the signature the compile gate checks is the one that really runs.

``test_only=True`` marks a kernel the product never launches: the unit twin of
a fused kernel that runs the same code (the tests compare the two and exercise
the units one by one), or a diagnostic launched only by tests and benchmarks.
The compile gate lists the mark (``--list``).

On the GPU, ``k[grid, block, stream](*args)`` launches through ``prepared``: a launch
made before with the same device arrays and scalars skips numba's per-launch
argument preparation (``ALPHARL_PREPARED_LAUNCH=0`` turns that off).
"""
from __future__ import annotations

import importlib
import pkgutil
from dataclasses import dataclass, field
from typing import Callable

from alpharl import target
from alpharl.cuda_kernels import prepared

_REGISTRY: dict[str, "Kernel"] = {}


@dataclass
class Kernel:
    """A registered kernel: ``k[grid, block](*args)`` or ``k[grid, block, stream](*args)``."""

    name: str
    module: str
    py_func: Callable
    signature: str
    #: Extra ``cuda.jit`` options (e.g. ``max_registers``).
    options: dict = field(default_factory=dict)
    #: Never launched by the product (module docstring).
    test_only: bool = False
    _dispatcher: object = field(default=None, repr=False)
    #: Prepared launches (GPU only; None under the simulator), made with the dispatcher.
    _launches: object = field(default=None, repr=False, compare=False)

    @property
    def qualname(self) -> str:
        return f"{self.module}.{self.name}"

    @property
    def dispatcher(self):
        if self._dispatcher is None:
            from numba import cuda

            # Code-generation options mean nothing to the simulator (its jit does not take them).
            options = {} if target.sim_override("registry.options") else self.options
            self._dispatcher = cuda.jit(self.signature, cache=True, **options)(self.py_func)
            if target.active() == target.GPU:
                self._launches = prepared.Launches()
        return self._dispatcher

    def __getitem__(self, launch_config):
        dispatcher = self.dispatcher
        if self._launches is None or not prepared.switched_on():
            return dispatcher[launch_config]
        return prepared.Launch(self._launches, dispatcher, launch_config)


def kernel(signature: str, test_only: bool = False, **options) -> Callable[[Callable], Kernel]:
    """Register ``py_func`` as a kernel compiled for exactly ``signature`` (``options``: more ``cuda.jit``
    options; ``test_only``: a unit twin launched only by tests)."""

    def wrap(py_func: Callable) -> Kernel:
        k = Kernel(py_func.__name__, py_func.__module__, py_func, signature, dict(options), test_only)
        if k.qualname in _REGISTRY:
            raise ValueError(f"kernel {k.qualname} registered twice")
        _REGISTRY[k.qualname] = k
        return k

    return wrap


def import_all_kernel_modules() -> None:
    """Import every module of the kernel package so each kernel registers itself."""
    import alpharl.cuda_kernels as pkg

    for info in pkgutil.walk_packages(pkg.__path__, prefix=pkg.__name__ + "."):
        importlib.import_module(info.name)


def all_kernels() -> list[Kernel]:
    import_all_kernel_modules()
    return sorted(_REGISTRY.values(), key=lambda k: k.qualname)
