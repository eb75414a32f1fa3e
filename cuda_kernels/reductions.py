"""Block reductions: ``rl_l2_norm``, ``rl_batch_moments``, ``rl_batch_moments_multi``
and the shared tree-reduce device functions.

Every reduction here runs in ONE block per result and reduces in a fixed order
(per-thread block-stride partial sums, then a shared-memory tree), so results
are bit-identical run to run: no floating-point atomics.
"""
from __future__ import annotations

import math
from typing import NamedTuple, Sequence

import numpy as np
from numba import cuda, float32, float64

from alpharl import target
from alpharl.cuda_kernels.registry import kernel

#: Threads of the single-block reductions (seed: 256-thread single-block reduce; 32 under the CUDA
#: simulator, whose cost is its thread count: alpharl.target.SIM_OVERRIDES).
REDUCE_BLOCK = target.gpu_or_sim("reductions.REDUCE_BLOCK", gpu=256, sim=32)


@cuda.jit(device=True)
def tree_sum(sh, tid, width):
    """Sum sh[0:width] into sh[0] (width a power of two). Every thread must call it."""
    s = width // 2
    while s > 0:
        if tid < s:
            sh[tid] += sh[tid + s]
        cuda.syncthreads()
        s //= 2


@cuda.jit(device=True)
def tree_sum_rows(sh, n_rows, tid, width):
    """tree_sum of each row r < n_rows of sh ([n_rows, width] flat) into sh[r width], one barrier per level
    for all rows (each row summed in tree_sum's order). Every thread must call it."""
    s = width // 2
    while s > 0:
        if tid < s:
            for r in range(n_rows):
                sh[r * width + tid] += sh[r * width + tid + s]
        cuda.syncthreads()
        s //= 2


@cuda.jit(device=True)
def tree_max(sh, tid, width):
    """Max of sh[0:width] into sh[0] (width a power of two). Every thread must call it."""
    s = width // 2
    while s > 0:
        if tid < s:
            if sh[tid + s] > sh[tid]:
                sh[tid] = sh[tid + s]
        cuda.syncthreads()
        s //= 2


@cuda.jit(device=True)
def strided_sumsq(x, begin, end, tid, stride):
    """sum of x[i]^2 over i = begin + tid + j stride < end: one thread's share of a block-stride
    sum of squares. Four partial sums, so four loads are in flight at a time instead of one
    dependent chain, combined in a fixed order (deterministic)."""
    a0 = float32(0.0)
    a1 = float32(0.0)
    a2 = float32(0.0)
    a3 = float32(0.0)
    i = begin + tid
    while i + 3 * stride < end:
        v0 = x[i]
        v1 = x[i + stride]
        v2 = x[i + 2 * stride]
        v3 = x[i + 3 * stride]
        a0 += v0 * v0
        a1 += v1 * v1
        a2 += v2 * v2
        a3 += v3 * v3
        i += 4 * stride
    while i < end:
        v0 = x[i]
        a0 += v0 * v0
        i += stride
    return (a0 + a1) + (a2 + a3)


@kernel("void(float32[::1], int32, float32[::1], int32)", test_only=True)
def rl_l2_norm(x, n, out, out_idx):
    """out[out_idx] = ||x[0:n]||_2. Launch [1, REDUCE_BLOCK].

    Block-stride sum of squares (the grid is one block) + shared-memory tree reduce.
    A non-finite element makes the norm non-finite; the signal EMA refuses it.
    """
    sh = cuda.shared.array(REDUCE_BLOCK, float32)
    tid = cuda.threadIdx.x
    sh[tid] = strided_sumsq(x, 0, n, tid, REDUCE_BLOCK)
    cuda.syncthreads()
    tree_sum(sh, tid, REDUCE_BLOCK)
    if tid == 0:
        out[out_idx] = math.sqrt(sh[0])


#: Columns of the per-statistic parameter table of ``rl_batch_moments_multi``
#: (int32 [n_stats, MOM_COLS]): the length n, then the six ISV slots (-1 = not written).
MOM_N = 0
MOM_COUNT = 1
MOM_MEAN = 2
MOM_VAR = 3
MOM_KURT = 4
MOM_MAX = 5
MOM_NEG_FRAC = 6
MOM_COLS = 7
#: Statistics one ``rl_batch_moments_multi`` launch can take (the length of its x and w tuples).
MOMENTS_MULTI = 8


@cuda.jit(device=True)
def batch_moments_block(x, w, n, isv, slot_count, slot_mean, slot_var, slot_kurt, slot_max, slot_neg_frac):
    """The maths of ``rl_batch_moments`` for one block (every thread of it must call it).

    count = sum w; mean = sum w x / count; var = sum w (x-mean)^2 / count;
    kurtosis = (sum w (x-mean)^4 / count) / var^2; max = max of x where w > 0;
    neg_frac = sum w [x < 0] / count (e.g. the loss rate of closed trades).
    Two passes (mean first, then centred moments) in float64 to keep the
    fourth moment accurate. A slot of -1 is not written. With count = 0 only
    the count slot is written (0): there was no observation, the EMAs gate on it.
    """
    s_w = cuda.shared.array(REDUCE_BLOCK, float64)
    s_1 = cuda.shared.array(REDUCE_BLOCK, float64)
    s_2 = cuda.shared.array(REDUCE_BLOCK, float64)
    s_mx = cuda.shared.array(REDUCE_BLOCK, float64)
    s_neg = cuda.shared.array(REDUCE_BLOCK, float64)
    tid = cuda.threadIdx.x
    aw = float64(0.0)
    ax = float64(0.0)
    mx = float64(-math.inf)
    aneg = float64(0.0)
    for i in range(tid, n, REDUCE_BLOCK):
        wi = float64(w[i])
        if wi > 0.0:
            xi = float64(x[i])
            aw += wi
            ax += wi * xi
            if xi < 0.0:
                aneg += wi
            if xi > mx or xi != xi:
                mx = xi
    s_w[tid] = aw
    s_1[tid] = ax
    s_mx[tid] = mx
    s_neg[tid] = aneg
    cuda.syncthreads()
    tree_sum(s_w, tid, REDUCE_BLOCK)
    tree_sum(s_1, tid, REDUCE_BLOCK)
    tree_sum(s_neg, tid, REDUCE_BLOCK)
    tree_max(s_mx, tid, REDUCE_BLOCK)
    count = s_w[0]
    mean = s_1[0] / count if count > 0.0 else 0.0
    cuda.syncthreads()  # everyone has read the pass-1 results before they are overwritten
    a2 = float64(0.0)
    a4 = float64(0.0)
    for i in range(tid, n, REDUCE_BLOCK):
        wi = float64(w[i])
        if wi > 0.0:
            d = float64(x[i]) - mean
            d2 = d * d
            a2 += wi * d2
            a4 += wi * d2 * d2
    s_1[tid] = a2
    s_2[tid] = a4
    cuda.syncthreads()
    tree_sum(s_1, tid, REDUCE_BLOCK)
    tree_sum(s_2, tid, REDUCE_BLOCK)
    if tid == 0:
        if slot_count >= 0:
            isv[slot_count] = count
        if count > 0.0:
            var = s_1[0] / count
            if slot_mean >= 0:
                isv[slot_mean] = mean
            if slot_var >= 0:
                isv[slot_var] = var
            if slot_kurt >= 0:
                # A constant batch has no tails: report the Gaussian value 3.
                isv[slot_kurt] = (s_2[0] / count) / (var * var) if var > 0.0 else 3.0
            if slot_max >= 0:
                isv[slot_max] = s_mx[0]
            if slot_neg_frac >= 0:
                isv[slot_neg_frac] = s_neg[0] / count


@kernel("void(float32[::1], float32[::1], int32, float32[::1], int32, int32, int32, int32, int32, int32)", test_only=True)
def rl_batch_moments(x, w, n, isv, slot_count, slot_mean, slot_var, slot_kurt, slot_max, slot_neg_frac):
    """Weighted batch statistics of x[0:n] with weights w (0 = excluded), into ISV slots
    (``batch_moments_block`` has the maths). Launch [1, REDUCE_BLOCK].
    """
    batch_moments_block(x, w, n, isv, slot_count, slot_mean, slot_var, slot_kurt, slot_max, slot_neg_frac)


_F32_TUPLE = f"UniTuple(float32[::1], {MOMENTS_MULTI})"


@kernel(f"void({_F32_TUPLE}, {_F32_TUPLE}, int32[:, ::1], float32[::1])")
def rl_batch_moments_multi(xs, ws, table, isv):
    """Block b does ``rl_batch_moments`` of (xs[b], ws[b]) with n and slots from table[b].

    xs, ws: tuples of MOMENTS_MULTI float32 device arrays (each its own length:
    a tuple is passed as its arrays' pointers, so nothing is staged or copied);
    table: int32 [n_stats, MOM_COLS] (``moments_table``). Blocks are
    independent (each writes only its own slots), and each runs the very code
    of the single-statistic kernel, so the ISV is bit-identical to n_stats
    ``rl_batch_moments`` launches. Launch [n_stats, REDUCE_BLOCK] with
    n_stats = table.shape[0] <= MOMENTS_MULTI (``pad_moments_inputs`` fills
    the unused tuple entries).
    """
    b = cuda.blockIdx.x
    batch_moments_block(xs[b], ws[b], table[b, MOM_N], isv, table[b, MOM_COUNT], table[b, MOM_MEAN],
                        table[b, MOM_VAR], table[b, MOM_KURT], table[b, MOM_MAX], table[b, MOM_NEG_FRAC])


# ------------------------------------------------------------------ host side of the multi launch

class MomentSlots(NamedTuple):
    """The ISV slots one batch statistic writes (-1 = not written)."""

    count: int = -1
    mean: int = -1
    var: int = -1
    kurt: int = -1
    max: int = -1
    neg_frac: int = -1


def moments_table(stats: Sequence[tuple[int, MomentSlots]]) -> np.ndarray:
    """int32 [len(stats), MOM_COLS] parameter table of ``rl_batch_moments_multi`` from (n, slots) pairs."""
    if not 0 < len(stats) <= MOMENTS_MULTI:
        raise ValueError(f"rl_batch_moments_multi takes 1..{MOMENTS_MULTI} statistics, got {len(stats)}")
    table = np.empty((len(stats), MOM_COLS), np.int32)
    for row, (n, slots) in zip(table, stats):
        row[MOM_N] = n
        row[MOM_COUNT:] = slots  # MomentSlots' fields are in column order
    return table


def pad_moments_inputs(arrays: Sequence) -> tuple:
    """The MOMENTS_MULTI-tuple the kernel takes: ``arrays`` then repeats of the first (never read)."""
    if not 0 < len(arrays) <= MOMENTS_MULTI:
        raise ValueError(f"rl_batch_moments_multi takes 1..{MOMENTS_MULTI} statistics, got {len(arrays)}")
    return tuple(arrays) + (arrays[0],) * (MOMENTS_MULTI - len(arrays))
