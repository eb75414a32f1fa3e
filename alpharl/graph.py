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

from alpharl import target


class GraphError(RuntimeError):
    pass


def _check(result):
    err = result[0] if isinstance(result, tuple) else result
    from cuda.bindings import driver as drv

    if err != drv.CUresult.CUDA_SUCCESS:
        raise GraphError(f"CUDA driver call failed: {err}")
    return result[1] if isinstance(result, tuple) and len(result) > 1 else None


def _check_count(result):
    """The count (last element) of a driver query made with a zero-length buffer."""
    _check(result[0])
    return result[-1]


def stream_handle(stream) -> int:
    """The CUstream address of a numba stream (0 for the default stream: 0 or None), as the libraries
    that launch on the caller's stream take it (NCCL, cuBLASLt, the driver's capture calls)."""
    if stream is None or stream == 0:
        return 0
    handle = stream.handle
    return int(getattr(handle, "value", handle) or 0)  # ctypes c_void_p or an int-like binding object


def device_pointer(array) -> int:
    """The device address of a numba device array (or view)."""
    return int(array.__cuda_array_interface__["data"][0])


def _raw_stream(stream):
    from cuda.bindings import driver as drv

    return drv.CUstream(stream_handle(stream))


def chain_depths(ids, edges) -> dict:
    """Each node's depth in a DAG (ids: its nodes; edges: (from, to) pairs): the nodes on the longest
    dependency chain that ends at it, itself included."""
    succ: dict = {i: [] for i in ids}
    indeg = dict.fromkeys(ids, 0)
    for a, b in edges:
        succ[a].append(b)
        indeg[b] += 1
    depth = dict.fromkeys(ids, 1)
    ready = [i for i in ids if indeg[i] == 0]
    while ready:  # Kahn's topological order; depth = longest chain ending at the node
        i = ready.pop()
        for j in succ[i]:
            depth[j] = max(depth[j], depth[i] + 1)
            indeg[j] -= 1
            if indeg[j] == 0:
                ready.append(j)
    return depth


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

        return int(_check_count(drv.cuGraphGetNodes(self._graph, 0)))  # (err, nodes, count): an empty query

    def critical_path(self) -> int:
        """Nodes on the graph's longest dependency chain: what a replay waits for in sequence when the
        parallel branches fit the GPU side by side (each node costs ~1 µs of launch latency or more)."""
        from cuda.bindings import driver as drv

        nodes = drv.cuGraphGetNodes(self._graph, self.n_nodes)
        _check(nodes[0])
        ids = [int(n) for n in nodes[1][: self.n_nodes]]
        n_edges = int(_check_count(drv.cuGraphGetEdges(self._graph, 0)))
        edges = []
        if n_edges:
            res = drv.cuGraphGetEdges(self._graph, n_edges)
            _check(res[0])
            edges = [(int(a), int(b)) for a, b in zip(res[1][:n_edges], res[2][:n_edges])]
        return max(chain_depths(ids, edges).values(), default=0)

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


class Branches:
    """Fork / join of side streams off one stream, so that independent work runs side by side.

    ``fork(i)`` makes side stream i wait for everything launched so far on the main stream and
    returns it; work launched on it then overlaps the main stream's until ``join(i)`` makes the
    main stream wait for it. Under a graph capture of the main stream the same event records and
    waits become the graph's edges: each side stream's work is a parallel branch (an event wait
    pulls a side stream into the capture), and every branch must be joined before the capture
    ends. A branch may only write buffers that nothing reads or writes between its fork and its
    join. Eagerly, the same calls order real concurrent streams; under the CUDA simulator every
    launch is synchronous and the order of the calls is the order of the work.
    """

    def __init__(self, stream, n: int):
        from numba import cuda

        # Ordering-only events (no timestamps); the simulator's events take no arguments.
        event = cuda.event if target.on_simulator() else (lambda: cuda.event(timing=False))
        self.main = stream
        self.sides = [cuda.stream() for _ in range(n)]
        self._forked = [event() for _ in range(n)]
        self._joined = [event() for _ in range(n)]

    def fork(self, i: int):
        """Side stream i, ordered after the main stream's work so far."""
        self._forked[i].record(self.main)
        self._forked[i].wait(self.sides[i])
        return self.sides[i]

    def join(self, i: int) -> None:
        """The main stream's later work waits for side stream i's."""
        self._joined[i].record(self.sides[i])
        self._joined[i].wait(self.main)
