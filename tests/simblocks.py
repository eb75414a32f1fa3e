"""The CUDA simulator's thread-block scheduler without its busy wait (installed by conftest).

numba-cuda's simulator runs each thread of a block as a Python thread, and its BlockManager.run
polls every live thread (``is_alive``, ``syncthreads_blocked``) in a loop until all have ended. That
loop holds the GIL whenever a simulated thread would otherwise run it: a profile of a lobsim test
shows about half the kernel time in the polling. ``BlockManager`` below runs the same block the
same way (every thread runs until it reaches syncthreads or ends; when every thread still alive
is blocked, all are released at once; the first exception of a thread aborts the others and is
raised) but the managing thread sleeps on a condition that the simulated threads notify, so the
GIL goes to them. tests/test_simblocks.py runs kernels under both schedulers and compares.
"""
from __future__ import annotations

import threading

from numba.cuda.simulator import kernel as _sim_kernel

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


def install() -> None:
    """Launches of simulated kernels use this module's BlockManager from now on."""
    _sim_kernel.BlockManager = BlockManager


def uninstall() -> None:
    _sim_kernel.BlockManager = STOCK_BLOCK_MANAGER
