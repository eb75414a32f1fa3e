"""Data-parallel ranks: what an update hands to the all-reduce, and what it takes back.

One all-reduce per sync point moves one contiguous float32 buffer (``stage``): the gradient
(``n_grad`` floats, 0 at a sync of the ISV alone) followed by the ISV slots listed in ``slots``
(the batch statistics each rank computes from its own backtests: alpharl.ranks). ``rl_rank_pack``
copies them in, the communicator sums ``stage`` over the ranks in place, ``rl_rank_unpack`` writes
the sum times 1/G back: every rank then holds the same mean gradient and the same ISV.
Both are predicated on the K-loop's gate: a gated-off update's all-reduce still runs (a collective
cannot be skipped by one rank alone; every rank's gate is the same), but writes nothing back.
"""
from numba import cuda

from alpharl.cuda_kernels.registry import kernel

#: Threads per block of the pack and unpack kernels.
RANK_BLOCK = 256


@kernel("void(int32[::1], float32[::1], int32, float32[::1], int32[::1], int32, float32[::1])")
def rl_rank_pack(gate, grads, n_grad, isv, slots, n_slots, stage):
    """stage = [grads[:n_grad] | isv[slots]]. Launch [ceil((n_grad + n_slots) / RANK_BLOCK), RANK_BLOCK]."""
    i = cuda.grid(1)
    if gate[0] == 0:
        return
    if i < n_grad:
        stage[i] = grads[i]
    elif i < n_grad + n_slots:
        stage[i] = isv[slots[i - n_grad]]


@kernel("void(int32[::1], float32[::1], int32, int32[::1], int32, float32, float32[::1], float32[::1])")
def rl_rank_unpack(gate, stage, n_grad, slots, n_slots, inv_g, grads, isv):
    """grads[:n_grad] = inv_g stage[:n_grad]; isv[slots] = inv_g stage[n_grad:] (the mean over the ranks).
    Launch as rl_rank_pack."""
    i = cuda.grid(1)
    if gate[0] == 0:
        return
    if i < n_grad:
        grads[i] = stage[i] * inv_g
    elif i < n_grad + n_slots:
        isv[slots[i - n_grad]] = stage[i] * inv_g
