"""PrioritizedReplay: the device buffers of the Q critic's replay and their launch order.

The maths and the buffer layout are documented in
:mod:`alpharl.cuda_kernels.replay.per`. This class owns the device arrays and
only launches kernels: ``insert``, ``sample`` and ``update_priorities`` neither
synchronise nor copy between host and device (the write cursor and the size
live on the device), so they can be captured in a CUDA graph. Every array is
allocated once, here, and a checkpoint load copies into the same allocations,
so a captured graph stays valid after ``load_state_dict``.

Launch order per env step (the trainer's; SPEC §1 step 7)::

    for each K-loop iteration (gate[0] = 1 if it runs):
        mb = replay.sample(isv, m, gate)                 # a ReplayBatch: mb.obs ... mb.is_weight
        ... Q forward/backward on mb, per-row loss[m] (weighted by mb.is_weight) ...
        replay.update_priorities(loss, m, gate)           # p <- |loss| + eps
    replay.insert(obs, action, reward, done, obs_next)   # the step's B new transitions

The draws come from the replay as of the step's start (the first one needs nothing
of the step, so it can run beside acting), and the insert comes last: a slot the
step drew and then overwrites holds the new transition at the insert's max
priority, never the old one's write-back. The first step of a run, whose replay is
empty, inserts before it draws.
"""
from __future__ import annotations

from typing import Any

import numpy as np
from numba import cuda

from alpharl.batches import ReplayBatch
from alpharl.cuda_kernels.replay import per as K
from alpharl.prng import STREAM_REPLAY, seed_states
from alpharl.views import Views

#: Arrays saved by state_dict (everything but the CDF and draw scratch and the open gate). Their names are the
#: checkpoint's keys (``replay.<name>``), kept as they are so that older checkpoints load: the stored
#: transition is obs_s (s), action, reward, done, obs_s2 (s'), the drawn minibatch the same with mb_.
STATE_ARRAYS = ("obs_s", "action", "reward", "done", "obs_s2", "priority", "pmax", "meta", "sampler_state",
                "mb_obs_s", "mb_action", "mb_reward", "mb_done", "mb_obs_s2", "mb_weight", "mb_idx")
STATE_SIZES = ("capacity", "obs_dim", "max_batch")


def initial_arrays(capacity: int, obs_dim: int, max_batch: int, seed: int) -> dict[str, np.ndarray]:
    """Host arrays of an empty replay: zeros, pmax = INITIAL_MAX_PRIORITY, seeded sampler states."""
    f32, i32 = np.float32, np.int32
    pmax = np.full(1, K.INITIAL_MAX_PRIORITY, f32)
    tiles = K.n_tiles(capacity)
    return {
        "obs_s": np.zeros((capacity, obs_dim), f32), "action": np.zeros(capacity, i32),
        "reward": np.zeros(capacity, f32), "done": np.zeros(capacity, f32),
        "obs_s2": np.zeros((capacity, obs_dim), f32), "priority": np.zeros(capacity, f32),
        "pmax": pmax, "meta": np.zeros(K.META_LEN, i32),
        "sampler_state": seed_states(seed, max_batch, STREAM_REPLAY),
        "mb_obs_s": np.zeros((max_batch, obs_dim), f32), "mb_action": np.zeros(max_batch, i32),
        "mb_reward": np.zeros(max_batch, f32), "mb_done": np.zeros(max_batch, f32),
        "mb_obs_s2": np.zeros((max_batch, obs_dim), f32), "mb_weight": np.zeros(max_batch, f32),
        "mb_idx": np.zeros(max_batch, i32),
        "cdf": np.zeros(capacity, np.float64), "tile_sum": np.zeros(tiles, np.float64),
        "tile_sq": np.zeros(tiles, np.float64), "tile_cdf": np.zeros(tiles, np.float64),
        "scratch": np.zeros(K.SCRATCH_LEN, np.float64), "open_gate": np.ones(1, i32),
    }


class PrioritizedReplay:
    """Device ring buffer of ``capacity`` transitions with proportional prioritized sampling.

    ``obs_dim``: length of one observation; ``max_batch``: the largest minibatch
    ``sample`` may draw; ``seed``: seeds the per-row sampler states (stream
    ``STREAM_REPLAY`` of :func:`alpharl.prng.seed_states`); ``stream``: the CUDA
    stream (or graph builder) every kernel is launched on (None: the default stream);
    ``grid_above``: minibatches of more rows draw and update on the grid path
    (``alpharl.cuda_kernels.replay.per``: the same results, more launches), fewer
    on one block; an attribute, read at each launch (a captured graph keeps the
    path of its capture).
    """

    def __init__(self, capacity: int, obs_dim: int, max_batch: int, seed: int, stream=None,
                 grid_above: int = K.PER_GRID_ABOVE):
        if not 1 <= capacity < 2**31 or obs_dim < 1 or max_batch < 1:
            raise ValueError(f"PrioritizedReplay: capacity={capacity}, obs_dim={obs_dim}, "
                             f"max_batch={max_batch} must all be >= 1 (capacity < 2^31)")
        self.capacity, self.obs_dim, self.max_batch, self.seed = capacity, obs_dim, max_batch, seed
        self.stream = 0 if stream is None else stream
        self.grid_above = grid_above
        self.views = Views()  # the minibatch's first m rows, sliced once per m (alpharl.views)
        for name, host in initial_arrays(capacity, obs_dim, max_batch, seed).items():
            setattr(self, name, self._to_storage(host))

    # ------------------------------------------------------- storage hooks
    def _to_storage(self, host: np.ndarray):
        return cuda.to_device(host)

    def _to_host(self, arr) -> np.ndarray:
        return arr.copy_to_host()

    def _load(self, arr, host: np.ndarray) -> None:
        arr.copy_to_device(host)

    def _launch(self, k, grid: int, block: int, *args, stream=None) -> None:
        k[grid, block, self.stream if stream is None else stream](*args)

    def _sync(self) -> None:
        cuda.synchronize()

    # ------------------------------------------------------------ hot path
    def insert(self, obs, action, reward, done, obs_next, stream=None) -> None:
        """Append n transitions (obs[n, D] f32, action[n] i32, reward[n] f32, done[n] f32,
        obs_next[n, D] f32; n <= capacity) at the device cursor, with the running max priority.

        stream: launch on this stream instead (the caller orders it after the step's last gather and
        priority update, so that an overwritten slot keeps the insert's priority)."""
        n = action.shape[0]
        if not n <= self.capacity:
            raise ValueError(f"insert: {n} transitions exceed the capacity {self.capacity}")
        for name, arr, shape in (("obs", obs, (n, self.obs_dim)), ("obs_next", obs_next, (n, self.obs_dim)),
                                 ("reward", reward, (n,)), ("done", done, (n,))):
            if tuple(arr.shape) != shape:
                raise ValueError(f"insert: {name} has shape {tuple(arr.shape)}, expected {shape}")
        if n == 0:
            return
        self._launch(K.rl_per_insert, K.copy_grid(n * self.obs_dim), K.COPY_BLOCK,
                     obs, action, reward, done, obs_next, self.meta, self.pmax,
                     self.obs_s, self.action, self.reward, self.done, self.obs_s2, self.priority, stream=stream)
        self._launch(K.rl_per_advance, 1, 1, self.meta, np.int32(n), np.int32(self.capacity), stream=stream)

    def draw(self, isv, m: int | None = None, gate=None, stream=None) -> None:
        """Draw m slots into mb_idx and their importance weights into mb_weight; write the ESS fraction."""
        m = self._rows(m)
        gate = self._gate(gate)
        self._launch(K.rl_per_build_cdf, K.n_tiles(self.capacity), K.PER_BLOCK, gate, self.priority, self.meta,
                     isv, self.cdf, self.tile_sum, self.tile_sq, stream=stream)
        if m <= self.grid_above:
            self._launch(K.rl_per_sample, 1, K.PER_BLOCK, gate, self.priority, self.meta, isv, self.cdf,
                         self.tile_sum, self.tile_sq, self.tile_cdf, self.sampler_state, np.int32(m),
                         self.mb_idx, self.mb_weight, stream=stream)
            return
        rows = K.row_grid(m)
        self._launch(K.rl_per_scan_tiles, 1, K.PER_BLOCK, gate, self.meta, isv, self.tile_sum, self.tile_sq,
                     self.tile_cdf, self.scratch, stream=stream)
        self._launch(K.rl_per_draw, rows, K.PER_BLOCK, gate, self.priority, self.meta, isv, self.cdf, self.tile_cdf,
                     self.scratch, self.sampler_state, np.int32(m), self.mb_idx, stream=stream)
        self._launch(K.rl_per_weights, rows, K.PER_BLOCK, gate, self.priority, self.meta, isv, self.scratch,
                     np.int32(m), self.mb_idx, self.mb_weight, stream=stream)

    def gather(self, m: int | None = None, gate=None, stream=None) -> ReplayBatch:
        """Copy the drawn transitions into the minibatch arrays; returns views of rows 0..m-1."""
        m = self._rows(m)
        self._launch(K.rl_per_gather, K.copy_grid(m * self.obs_dim), K.COPY_BLOCK, self._gate(gate),
                     self.mb_idx, np.int32(m), self.obs_s, self.action, self.reward, self.done, self.obs_s2,
                     self.mb_obs_s, self.mb_action, self.mb_reward, self.mb_done, self.mb_obs_s2, stream=stream)
        v = self.views
        return ReplayBatch(v(self.mb_obs_s, 0, m), v(self.mb_action, 0, m), v(self.mb_reward, 0, m),
                           v(self.mb_done, 0, m), v(self.mb_obs_s2, 0, m), v(self.mb_weight, 0, m),
                           v(self.mb_idx, 0, m))

    def sample(self, isv, m: int | None = None, gate=None, stream=None) -> ReplayBatch:
        """``draw`` then ``gather``: a prioritized minibatch of m rows (default max_batch).

        isv: the float32 ISV (alpha, beta read; RL_PER_ESS_FRAC written);
        gate: int32[1] device array, 0 skips both kernels (default: always run);
        stream: launch on this stream instead (a side branch the caller joins before the Q step).
        """
        self.draw(isv, m, gate, stream)
        return self.gather(m, gate, stream)

    def update_priorities(self, loss, m: int | None = None, gate=None, stream=None) -> None:
        """After a Q step on the last sample: p[idx[j]] <- |loss[j]| + eps (loss: float32[>= m]).

        stream: launch on this stream instead (the caller orders it after the Q step and before the
        next ``sample``)."""
        m = self._rows(m)
        if loss.shape[0] < m:
            raise ValueError(f"update_priorities: loss has {loss.shape[0]} rows, the minibatch {m}")
        gate = self._gate(gate)
        if m <= self.grid_above:
            self._launch(K.rl_per_update_priority, 1, K.PER_BLOCK, gate, self.mb_idx, loss, np.int32(m),
                         self.priority, self.pmax, stream=stream)
            return
        rows = K.row_grid(m)
        self._launch(K.rl_per_clear_priority, rows, K.PER_BLOCK, gate, self.mb_idx, np.int32(m), self.priority,
                     stream=stream)
        self._launch(K.rl_per_max_priority, rows, K.PER_BLOCK, gate, self.mb_idx, loss, np.int32(m),
                     self.priority, self.pmax, stream=stream)

    def _rows(self, m: int | None) -> int:
        m = self.max_batch if m is None else int(m)
        if not 1 <= m <= self.max_batch:
            raise ValueError(f"minibatch of {m} rows: expected 1..max_batch={self.max_batch}")
        return m

    def _gate(self, gate):
        return self.open_gate if gate is None else gate

    # ---------------------------------------------------- off the hot path
    def host_size(self) -> tuple[int, int]:
        """(cursor, size) read back to the host: synchronises, for diagnostics and tests only."""
        self._sync()
        meta = self._to_host(self.meta)
        return int(meta[K.META_CURSOR]), int(meta[K.META_SIZE])

    def state_dict(self) -> dict[str, Any]:
        """Host copies of everything that defines the replay (buffers, priorities, cursor, PRNG states)."""
        self._sync()
        state: dict[str, Any] = {name: getattr(self, name) for name in STATE_SIZES}
        state.update({name: self._to_host(getattr(self, name)) for name in STATE_ARRAYS})
        return state

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore a state_dict into the existing device arrays (same sizes required)."""
        for name in STATE_SIZES:
            if int(state[name]) != getattr(self, name):
                raise ValueError(f"load_state_dict: {name}={state[name]} but this replay has {getattr(self, name)}")
        self._sync()
        for name in STATE_ARRAYS:
            arr = getattr(self, name)
            host = np.ascontiguousarray(state[name], dtype=arr.dtype)
            if host.shape != tuple(arr.shape):
                raise ValueError(f"load_state_dict: {name} has shape {host.shape}, expected {tuple(arr.shape)}")
            self._load(arr, host)
