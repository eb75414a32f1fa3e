"""Data-parallel training over G ranks: what is averaged, where, and how ranks stay identical.

Each rank runs the whole step on its own B/G backtests, replay and simulator state
(seeded by ``prng.rank_seed``), from the same weights and ISV. Two sync points a step keep
every rank's weights and ISV bit-identical:

1. in every learning update, once each head's backward has written its part of the gradient
   and before the guard + Adam (``Learner.update``, ``reference.learner.update``): the whole
   gradient and the ``LEARN_SLOTS`` of the ISV (statistics a rank computed from its own
   batch so far: the PER sampler's effective sample size, the reward statistics, the V blend
   controller, the loss means) are averaged. The guard's grad norms, the Adam step and
   everything after them are then computed from identical inputs on every rank;
2. after step 14's batch statistics (``SIGNAL_SLOTS``), before the signal EMAs and controllers.

Average, not sum: every head's loss is a mean over its own batch, so the mean of the ranks'
gradients is the gradient of the mean over all G B/G env rows (each rank's Q minibatch of M is
one of G: a step learns Q from G M replay samples). G ranks of B/G backtests thus take the
step one rank of B would take, up to float rounding, the ranks' own draws, and the statistics
that are not means: a variance, kurtosis, ratio maximum or per-trade mean of the ranks is the
average of each rank's, not the statistic of the pooled batch.

One all-reduce moves one buffer per sync point (the gradient and the slots side by side:
cuda_kernels/ranks.py). G = 1 (``SingleRank``) adds nothing to the step.
"""
from __future__ import annotations

import hashlib

import numpy as np
from numba import cuda

from alpharl import isv as S
from alpharl.comm import Communicator, RankError
from alpharl.config import TrainConfig
from alpharl.cuda_kernels import ranks as K
from alpharl.reference import ranks as R
from alpharl.signals import SIGNAL_MOMENTS
from alpharl.sizes import cdiv

#: ISV slots a rank writes from its own batch before the update's guard (sync point 1).
LEARN_SLOTS = tuple(sorted({S.RL_PER_ESS_FRAC} | {s.index for s in S.SLOTS
                                                   if s.group in ("reward_norm", "v_blend", "losses")}))
#: ISV slots of step 14's batch statistics (sync point 2).
SIGNAL_SLOTS = tuple(sorted({slot for r in SIGNAL_MOMENTS for slot in r.slots if slot >= 0}))


def rank_config(config: TrainConfig) -> TrainConfig:
    """The config of one rank's trainer: B/G backtests, one rank (the group is the communicator's)."""
    return config.with_overrides(b=config.b // config.gpus, gpus=1)


class RankSync:
    """The two sync points of one rank's step (module docstring), on the backend's arrays: device
    arrays and kernel launches on ``stream`` (device=True), or host arrays and the references."""

    def __init__(self, comm: Communicator, n_grad: int, device: bool, stream=None):
        self.comm, self.n_grad, self.device, self.stream = comm, int(n_grad), device, stream
        self.inv_g = np.float32(1.0 / comm.size)
        slots = {k: np.array(v, np.int32) for k, v in (("learn", LEARN_SLOTS), ("signals", SIGNAL_SLOTS))}
        n_stage = self.n_grad + max(len(LEARN_SLOTS), len(SIGNAL_SLOTS))
        if device:
            self.slots = {k: cuda.to_device(v, stream=stream) for k, v in slots.items()}
            self.stage = cuda.device_array(n_stage, np.float32, stream=stream)
            self.open_gate = cuda.to_device(np.ones(1, np.int32), stream=stream)
        else:
            self.slots = slots
            self.stage = np.zeros(n_stage, np.float32)
            self.open_gate = np.ones(1, np.int32)

    def learn(self, grads, isv, gate) -> None:
        """Sync point 1: grads (float32 [n_grad]) and the LEARN_SLOTS of isv <- their means over the ranks."""
        self._sync(grads, self.n_grad, isv, "learn", gate)

    def signals(self, isv) -> None:
        """Sync point 2: the SIGNAL_SLOTS of isv <- their means over the ranks."""
        self._sync(self.stage, 0, isv, "signals", self.open_gate)

    def _sync(self, grads, n_grad: int, isv, which: str, gate) -> None:
        slots = self.slots[which]
        n = n_grad + slots.size
        stage = self.stage[:n]
        i32 = np.int32
        if self.device:
            launch = (cdiv(n, K.RANK_BLOCK), K.RANK_BLOCK, self.stream)
            K.rl_rank_pack[launch](gate, grads, i32(n_grad), isv, slots, i32(slots.size), stage)
            self.comm.allreduce_sum(stage, self.stream)
            K.rl_rank_unpack[launch](gate, stage, i32(n_grad), slots, i32(slots.size), self.inv_g, grads, isv)
        else:
            R.rl_rank_pack(gate, grads, n_grad, isv, slots, slots.size, stage)
            self.comm.allreduce_sum(stage)
            R.rl_rank_unpack(gate, stage, n_grad, slots, slots.size, self.inv_g, grads, isv)


def rank_sync(comm: Communicator | None, n_grad: int, device: bool, stream=None) -> RankSync | None:
    """The backend's RankSync, or None where there is nothing to reduce (no communicator, or SingleRank)."""
    if comm is None or comm.is_noop:
        return None
    return RankSync(comm, n_grad, device, stream)


def state_digest(trainer) -> str:
    """sha256 of what must be identical on every rank: the networks' state (weights, Adam moments and
    counters, target net) and the ISV."""
    ops = trainer.ops
    h = hashlib.sha256()
    for k, v in sorted(ops.nets.state_dict().items()):
        h.update(k.encode())
        h.update(np.ascontiguousarray(v).tobytes())
    h.update(np.ascontiguousarray(trainer.read_isv()).tobytes())
    return h.hexdigest()


def check_identical(comm: Communicator, trainer, step: int) -> None:
    """Every rank's weights and ISV are the same bits (RankError naming the first rank that differs)."""
    bad = comm.first_mismatch(state_digest(trainer))
    if bad is not None:
        raise RankError(f"step {step}: rank {bad}'s weights or ISV differ from rank 0's; stopped")


def rank_prefix(rank: int) -> str:
    """The checkpoint's key prefix of rank ``rank``'s own state (rank 0's keys have none: a G = 1 layout)."""
    return "" if rank == 0 else f"rank{rank}."


def merge_rank_states(parts: list[dict]) -> dict:
    """One checkpoint of every rank's state dict (rank 0's as a single-rank run's, the others' prefixed)."""
    merged = dict(parts[0])
    for r, part in enumerate(parts[1:], 1):
        merged |= {rank_prefix(r) + k: v for k, v in part.items()}
    return merged


def rank_owns(key: str, rank: int) -> bool:
    """Whether a ``merge_rank_states`` checkpoint's ``key`` is rank ``rank``'s (the keys a resuming rank reads)."""
    return not key.startswith("rank") if rank == 0 else key.startswith(rank_prefix(rank))


def rank_state(arrays: dict, rank: int) -> dict:
    """Rank ``rank``'s state dict out of a ``merge_rank_states`` checkpoint (or of its ``rank_owns`` keys)."""
    p = rank_prefix(rank)
    return {k[len(p):]: v for k, v in arrays.items() if rank_owns(k, rank)}
