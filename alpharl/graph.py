"""CUDA graph capture of a whole training step (numba launches on one stream).

Each numba launch costs ~30 µs of host time; captured once in a CUDA graph and
replayed, the same launches cost ~1 µs each on the GPU. We use raw stream
capture through cuda-python's driver bindings around the numba launches.

Rules for code captured here: every argument is a device array or a scalar
that is the same at every step (per-step values live in device memory), no
host<->device copy and no host synchronisation inside. Kernels must already be
compiled (run the step once eagerly first) so that capture records launches only.
"""
from __future__ import annotations

from typing import Callable


class GraphError(RuntimeError):
    pass


def _check(result):
    err = result[0] if isinstance(result, tuple) else result
    from cuda.bindings import driver as drv

    if err != drv.CUresult.CUDA_SUCCESS:
        raise GraphError(f"CUDA driver call failed: {err}")
    return result[1] if isinstance(result, tuple) and len(result) > 1 else None


def _raw_stream(stream):
    from cuda.bindings import driver as drv

    handle = stream.handle
    value = getattr(handle, "value", handle)  # ctypes c_void_p or an int-like binding object
    return drv.CUstream(int(value))


class CapturedGraph:
    """``CapturedGraph(stream, body)`` records ``body()`` (launches on ``stream``); ``replay()`` re-runs it."""

    def __init__(self, stream, body: Callable[[], None]):
        from cuda.bindings import driver as drv

        self.stream = stream
        self._hstream = _raw_stream(stream)
        _check(drv.cuStreamBeginCapture(self._hstream, drv.CUstreamCaptureMode.CU_STREAM_CAPTURE_MODE_THREAD_LOCAL))
        try:
            body()
        except BaseException:
            drv.cuStreamEndCapture(self._hstream)
            raise
        self._graph = _check(drv.cuStreamEndCapture(self._hstream))
        self._exec = _check(drv.cuGraphInstantiate(self._graph, 0))
        self.n_nodes = self._count_nodes()

    def _count_nodes(self) -> int:
        from cuda.bindings import driver as drv

        res = drv.cuGraphGetNodes(self._graph, 0)  # (err, nodes, count) with an empty query
        _check(res[0])
        return int(res[-1])

    def replay(self) -> None:
        from cuda.bindings import driver as drv

        _check(drv.cuGraphLaunch(self._exec, self._hstream))

    def close(self) -> None:
        from cuda.bindings import driver as drv

        if getattr(self, "_exec", None) is not None:
            drv.cuGraphExecDestroy(self._exec)
            drv.cuGraphDestroy(self._graph)
            self._exec = None

    def __del__(self):
        try:
            self.close()
        except Exception:
            pass
