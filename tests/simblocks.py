"""The CUDA simulator's thread-block scheduler without its busy wait (installed by conftest).

numba-cuda's simulator runs each thread of a block as a Python thread, and its BlockManager.run
polls every live thread (``is_alive``, ``syncthreads_blocked``) in a loop until all have ended. That
loop holds the GIL whenever a simulated thread would otherwise run it: a profile of a lobsim test
shows about half the kernel time in the polling. ``BlockManager`` below runs the same block the
same way (every thread runs until it reaches syncthreads or ends; when every thread still alive
is blocked, all are released at once; the first exception of a thread aborts the others and is
raised) but the managing thread sleeps on a condition that the simulated threads notify, so the
GIL goes to them. tests/test_simblocks.py runs kernels under both schedulers and compares.

Device functions: each call of a ``device=True`` function inside a launch enters the simulator's
``swapped_cuda_module`` (a global lock, a per-module lock, an import and a generator context) to
point its module's ``cuda`` at the launch's fake module, and leaves it after the call; the GEMMs'
float-pair helpers alone make a few thousand such calls a thread, about a third of a small
product's time. ``launch`` below keeps the swap of each module a launch has called into open until
the launch ends, so every later call of that launch is a plain Python call of the same function on
the same fake module (a launch runs alone and the host waits on it; nothing else reads those
modules' ``cuda`` meanwhile).

Scalar casts: ``uint64(i)``, ``float32(x)`` in a kernel call numba's ``Type.__call__``, which imports
``signature`` and runs an abstract-class isinstance test on every call before numpy's cast; those
two take most of a cast's time, and the GEMMs' index arithmetic and float-pair helpers cast on every
K step. ``cast`` below tests a Python or numpy scalar by its class first and calls the same
``cast_python_value`` (anything else goes the stock way: a type's signature, another value).
"""
from __future__ import annotations

import contextlib
import threading

import numpy as np
from numba.core.types import abstract as _types
from numba.core.typing import signature as _signature
from numba.cuda.simulator import kernel as _sim_kernel
from numba.cuda.simulator import kernelapi as _sim_api

#: The simulator's own scheduler (kept for tests/test_simblocks.py and to undo ``install``).
STOCK_BLOCK_MANAGER = _sim_kernel.BlockManager


class BlockThread(_sim_kernel.BlockThread):
    """The simulator's thread of a block, telling its manager when it blocks or ends."""

    def run(self):
        try:
            super().run()   # records an exception in self.exception, as the stock thread does
        finally:
            m = self._manager
            with m.cond:
                m.live -= 1
                if self.exception is not None:
                    m.failed.append(self)
                if self.exception is not None or m.blocked == m.live:
                    m.cond.notify()

    def syncthreads(self):
        if self.abort:
            raise RuntimeError("abort flag set on syncthreads call")
        m = self._manager
        with m.cond:
            self.syncthreads_blocked = True
            m.blocked += 1
            if m.blocked == m.live:   # the last one: wake the manager (once a barrier, not once a thread)
                m.cond.notify()
        self.syncthreads_event.wait()
        self.syncthreads_event.clear()
        if self.abort:
            raise RuntimeError("abort flag set on syncthreads clear")


class BlockManager(STOCK_BLOCK_MANAGER):
    """One thread block, run as the stock BlockManager runs it, without polling (module docstring)."""

    def run(self, grid_point, *args):
        self.cond = threading.Condition()
        self.live = 0
        self.blocked = 0
        self.failed: list[BlockThread] = []

        def target():
            self._f(*args)

        threads = [BlockThread(target, self, grid_point, block_point, self._debug)
                   for block_point in _sim_kernel.np.ndindex(*self._block_dim)]
        self.live = len(threads)
        for t in threads:
            t.start()
        with self.cond:
            while True:
                if self.failed:
                    # Abort every other thread (as the stock manager does, without joining them).
                    for other in threads:
                        other.abort = True
                        other.syncthreads_blocked = False
                        other.syncthreads_event.set()
                    t = self.failed[0]
                    raise t.exception[0].with_traceback(t.exception[1])
                if self.live == 0:
                    break
                if self.blocked == self.live:
                    # every thread still alive waits in syncthreads: release them all
                    self.blocked = 0
                    for t in threads:
                        if t.syncthreads_blocked:
                            t.syncthreads_blocked = False
                            t.syncthreads_event.set()
                    continue
                self.cond.wait()


#: The simulator's own kernel and device-function call (kept for tests/test_simblocks.py and ``uninstall``).
STOCK_CALL = _sim_kernel.FakeCUDAKernel.__call__


class _Swaps:
    """The modules a running launch has swapped to its fake cuda module, held until it ends."""

    def __init__(self):
        self.lock = threading.Lock()
        self.held: set[int] = set()
        self.stack: contextlib.ExitStack | None = None


_SWAPS = _Swaps()


def launch(self, *args):
    """FakeCUDAKernel.__call__ with each module's swap entered once a launch (module docstring)."""
    context = _sim_kernel._kernel_context
    if context is None:  # a launch from the host (or a device function called outside any launch)
        if self._device:
            return STOCK_CALL(self, *args)
        with contextlib.ExitStack() as stack:
            _SWAPS.stack = stack
            try:
                return STOCK_CALL(self, *args)
            finally:
                _SWAPS.stack = None
                _SWAPS.held.clear()
    if _SWAPS.stack is None:  # inside a launch this module did not start: the stock call
        return STOCK_CALL(self, *args)
    globs = self.fn.__globals__
    if id(globs) not in _SWAPS.held:
        with _SWAPS.lock:
            if id(globs) not in _SWAPS.held:
                _SWAPS.stack.enter_context(_sim_api.swapped_cuda_module(self.fn, context))
                _SWAPS.held.add(id(globs))
    return self.fn(*args)


#: numba's own call of a type (kept for tests/test_simblocks.py and ``uninstall``).
STOCK_TYPE_CALL = _types.Type.__call__
#: Classes of the values a kernel casts (none of them a numba type).
_SCALARS = (int, float, bool)


def cast(self, *args):
    """numba's Type.__call__ without its per-call import and, for a scalar, its abstract-class test."""
    if len(args) == 1:
        value = args[0]
        if type(value) in _SCALARS or isinstance(value, np.generic) or not isinstance(value, _types.Type):
            return self.cast_python_value(value)
    return _signature(self, *args)


def install() -> None:
    """Launches of simulated kernels use this module's BlockManager, device-function calls and casts from now on."""
    _sim_kernel.BlockManager = BlockManager
    _sim_kernel.FakeCUDAKernel.__call__ = launch
    _types.Type.__call__ = cast


def uninstall() -> None:
    _sim_kernel.BlockManager = STOCK_BLOCK_MANAGER
    _sim_kernel.FakeCUDAKernel.__call__ = STOCK_CALL
    _types.Type.__call__ = STOCK_TYPE_CALL
