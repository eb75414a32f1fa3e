"""Communicators of data-parallel ranks: the all-reduce the update calls, and host collectives.

``Communicator.allreduce_sum(array, stream)`` sums a float32 array over the ranks in place (every
rank gets the same bits); ``gather``/``broadcast`` move host objects (checkpoint parts, the weight
hashes, the stop flag) through a ``Channel``. Three implementations:

- ``SingleRank``: G = 1, every call a no-op (``is_noop``: the backends then add nothing to the
  step, so today's single-GPU path stays bit for bit what it was);
- ``NumpyRanks``: G ranks on the host, in threads of one process (``ThreadChannel``: the tests'
  virtual ranks) or in processes (``QueueChannel``: the launcher's ranks on the CPU backends).
  The sum is taken on the host in rank order by rank 0 and handed to every rank, so it is
  deterministic and identical everywhere;
- ``NcclComm``: CuPy's NCCL bindings on the numba arrays' device pointers and the step's stream,
  imported only when built; rank 0 creates the NCCL unique id and hands it over the channel.
  NCCL >= 2.9 lets the all-reduce be recorded in the captured step graph. Run on one H200 with one
  rank (eager and captured: the same bits as the plain path); never yet with several GPUs.
"""
from __future__ import annotations

import threading
from abc import ABC, abstractmethod

import numpy as np

from alpharl.graph import device_pointer, stream_handle

#: Seconds a rank waits for the others at a host collective before it gives up (a dead peer).
RANK_TIMEOUT_S = 600.0
#: NVLink multicast (NVLS) stays off in every rank: ``NCCL_NVLS_ENABLE=0`` in each rank's environment.
NCCL_ENV = {"NCCL_NVLS_ENABLE": "0"}


class RankError(RuntimeError):
    """Ranks that cannot go on together (a peer gone, states that differ, no NCCL): one line."""


# ------------------------------------------------------------------ host channels
class Channel(ABC):
    """Host-object collectives of ``size`` ranks; every rank calls them in the same order."""

    rank: int
    size: int

    @abstractmethod
    def gather(self, obj):
        """Rank 0: the list of every rank's ``obj`` in rank order; the others: None."""

    @abstractmethod
    def broadcast(self, obj):
        """Rank 0's ``obj`` on every rank (the others' argument is ignored)."""


class ThreadHub:
    """What the ``ThreadChannel``s of one group of virtual ranks share."""

    def __init__(self, size: int, timeout: float = RANK_TIMEOUT_S):
        self.size = size
        self.barrier = threading.Barrier(size, timeout=timeout)
        self.slots: list = [None] * size

    def abort(self) -> None:
        """Release every rank waiting at the barrier (they raise RankError): a rank has failed."""
        self.barrier.abort()


class ThreadChannel(Channel):
    """Ranks that are threads of one process (tests): two barriers per collective."""

    def __init__(self, hub: ThreadHub, rank: int):
        self.hub, self.rank, self.size = hub, rank, hub.size

    def _wait(self) -> None:
        try:
            self.hub.barrier.wait()
        except threading.BrokenBarrierError:
            raise RankError(f"rank {self.rank}: another rank stopped") from None

    def gather(self, obj):
        self.hub.slots[self.rank] = obj
        self._wait()
        out = list(self.hub.slots) if self.rank == 0 else None
        self._wait()  # nobody writes the next collective's slot before rank 0 has read this one's
        return out

    def broadcast(self, obj):
        if self.rank == 0:
            self.hub.slots[0] = obj
        self._wait()
        out = self.hub.slots[0]
        self._wait()
        return out


class QueueChannel(Channel):
    """Ranks that are processes: ``up`` carries every rank's objects to rank 0, ``down[r]`` rank 0's to
    rank r (multiprocessing queues on one host, ``ray.util.queue.Queue`` actors across a Ray cluster).
    Messages carry the collective's sequence number: a rank that runs ahead is kept for its turn."""

    def __init__(self, rank: int, size: int, up, down, timeout: float = RANK_TIMEOUT_S):
        self.rank, self.size, self.up, self.down, self.timeout = rank, size, up, down, timeout
        self._seq = 0
        self._early: dict[tuple[int, int], object] = {}

    def _get(self, q):
        try:
            return q.get(timeout=self.timeout)
        except Exception as exc:  # queue.Empty, or the Ray queue's own Empty
            raise RankError(f"rank {self.rank}: no word from the other ranks in {self.timeout:g} s "
                            f"({type(exc).__name__})") from None

    def gather(self, obj):
        seq, self._seq = self._seq, self._seq + 1
        if self.rank != 0:
            self.up.put((seq, self.rank, obj))
            return None
        parts = {0: obj}
        for r in range(1, self.size):
            if (seq, r) in self._early:
                parts[r] = self._early.pop((seq, r))
        while len(parts) < self.size:
            s, r, o = self._get(self.up)
            if s == seq:
                parts[r] = o
            else:
                self._early[(s, r)] = o
        return [parts[r] for r in range(self.size)]

    def broadcast(self, obj):
        self._seq += 1
        if self.rank == 0:
            for q in self.down[1:]:
                q.put(obj)
            return obj
        return self._get(self.down[self.rank])


# ------------------------------------------------------------------ communicators
class Communicator(ABC):
    """One rank's view of the group: rank, size, the in-place all-reduce and host collectives."""

    #: True only for ``SingleRank``: nothing to reduce, the backends leave the step as it is.
    is_noop = False

    def __init__(self, channel: Channel):
        self.channel = channel
        self.rank, self.size = channel.rank, channel.size

    @abstractmethod
    def allreduce_sum(self, array, stream=None) -> None:
        """array (float32, device or host) <- its sum over the ranks, identical on every rank."""

    def gather(self, obj):
        return self.channel.gather(obj)

    def broadcast(self, obj):
        return self.channel.broadcast(obj)

    def first_mismatch(self, value) -> int | None:
        """The lowest rank whose ``value`` differs from rank 0's (None: all equal), on every rank."""
        values = self.gather(value)
        verdict = None if values is None else next((r for r, v in enumerate(values) if v != values[0]), None)
        return self.broadcast(verdict)

    def close(self) -> None:
        pass


class _OneRankChannel(Channel):
    rank, size = 0, 1

    def gather(self, obj):
        return [obj]

    def broadcast(self, obj):
        return obj


class SingleRank(Communicator):
    """G = 1: nothing to reduce."""

    is_noop = True

    def __init__(self):
        super().__init__(_OneRankChannel())

    def allreduce_sum(self, array, stream=None) -> None:
        pass


def _host_copy(array, stream) -> np.ndarray:
    if isinstance(array, np.ndarray):
        return array.copy()
    if stream is not None:
        stream.synchronize()
    return array.copy_to_host()


def _write_back(array, host: np.ndarray, stream) -> None:
    if isinstance(array, np.ndarray):
        array[...] = host
    else:
        array.copy_to_device(host, stream=stream)
        if stream is not None:
            stream.synchronize()


class NumpyRanks(Communicator):
    """The all-reduce on the host: rank 0 sums the ranks' copies in rank order (float32, one
    deterministic order) and hands the sum to every rank. A stand-in for NCCL where there is none:
    virtual ranks in tests (``virtual_group``), CPU ranks of the launcher; never inside a CUDA graph."""

    def allreduce_sum(self, array, stream=None) -> None:
        if array.dtype != np.float32:
            raise TypeError(f"allreduce_sum: float32 only, got {array.dtype}")
        parts = self.gather(_host_copy(array, stream))
        total = None
        if parts is not None:
            total = parts[0].copy()
            for p in parts[1:]:
                total += p
        _write_back(array, self.broadcast(total), stream)


def virtual_group(size: int, timeout: float = RANK_TIMEOUT_S) -> tuple[list[NumpyRanks], ThreadHub]:
    """``size`` NumpyRanks whose ranks are threads of this process (one per rank), and their hub
    (``hub.abort()`` releases the others when one rank fails)."""
    hub = ThreadHub(size, timeout)
    return [NumpyRanks(ThreadChannel(hub, r)) for r in range(size)], hub


def import_nccl():
    """CuPy's NCCL module, or RankError saying what is missing (NCCL is never required by the package)."""
    try:
        from cupy.cuda import nccl
    except ImportError as exc:
        raise RankError(f"--gpus > 1 on the cuda backend needs NCCL through CuPy "
                        f"(pip install cupy-cuda13x): {exc}") from None
    if not nccl.available:
        raise RankError("CuPy is installed without NCCL: --gpus > 1 on the cuda backend needs it")
    return nccl


class NcclComm(Communicator):
    """NCCL all-reduce on numba device arrays, on the caller's stream (recorded into the step's graph
    when that stream is being captured: NCCL >= 2.9). Rank 0 creates the unique id and broadcasts it
    over ``channel``. Run with one rank on a GPU (benchmarks/ranks_check.py); not yet with several."""

    def __init__(self, channel: Channel):
        super().__init__(channel)
        nccl = self._nccl = import_nccl()
        uid = self.broadcast(nccl.get_unique_id() if self.rank == 0 else None)
        self._comm = nccl.NcclCommunicator(self.size, uid, self.rank)

    def allreduce_sum(self, array, stream=None) -> None:
        if array.dtype != np.float32:
            raise TypeError(f"allreduce_sum: float32 only, got {array.dtype}")
        ptr = device_pointer(array)
        self._comm.allReduce(ptr, ptr, array.size, self._nccl.NCCL_FLOAT32, self._nccl.NCCL_SUM,
                             stream_handle(stream))

    def close(self) -> None:
        if getattr(self, "_comm", None) is not None:
            self._comm.destroy()
            self._comm = None
