"""Prioritized experience replay for the Q critic (SPEC §6; Schaul et al. 2016,
proportional variant).

Device state (allocated by :class:`alpharl.replay.PrioritizedReplay`):
ring buffer of transitions obs_s[C, D], action[C], reward[C], done[C],
obs_s2[C, D]; raw priorities priority[C] (0 = empty slot); pmax[1], the running
max priority; meta[2] = (write cursor, filled size), int32, so inserting needs
no host read. Slots fill in order 0, 1, ... until the ring wraps, so the filled
slots are always [0, size).

Sampling distribution: P(i) = p_i^alpha / sum_k p_k^alpha over the filled
slots, alpha = isv[RL_PER_ALPHA] read in the kernel. The CDF is rebuilt on
every sampling pass (alpha moves every step, so a sum-tree of p^alpha could
not be kept incrementally anyway), in float64 and in a fixed order, on two
levels so the O(C) part runs on the whole GPU:

1. ``rl_per_build_cdf``, one block per tile of PER_TILE slots: each thread
   sums PER_THREAD_ITEMS contiguous masses p^alpha sequentially, a
   Hillis-Steele scan turns the thread sums into exclusive offsets, and
   cdf[i] becomes the inclusive prefix sum *within the tile*; the tile's sum
   (and sum of squares, for the ESS) go to tile_sum / tile_sq.
2. ``rl_per_sample``, one block: the same chunk-then-scan turns tile_sum into
   tile_cdf (inclusive prefix over tiles, total = the last). Draw j: u_j =
   uniform53 of two steps of the sampler state j, target u_j x total, binary
   search for the first tile with tile_cdf > target, then inside that tile
   for the first slot with cdf > target - (tiles before). float64 and a
   53-bit u: no slot loses its mass to rounding even in a 2^20-slot buffer.
3. Large minibatches (m > PER_GRID_ABOVE) run step 2 on the grid path
   instead: ``rl_per_scan_tiles`` (one block: the tile scan, the ESS, the
   total into scratch), ``rl_per_draw`` (one thread per draw: idx, the batch
   min of p^alpha by a float64 atomic min into scratch) and ``rl_per_weights``
   (one thread per row). One block draws m / PER_BLOCK rows per thread, each
   two dependent bisections through global memory, on one SM; the grid draws
   every row at once. The same device functions, so the same results.

Sampling is with replacement, so fewer filled slots than draws is fine; with
an empty buffer every draw is idx 0 with weight 0 (contributes no gradient).

Importance weights: w_j = (N P(i_j))^-beta / max_k (N P(i_k))^-beta, beta =
isv[RL_PER_BETA], N = size; the max is over the sampled batch, as Schaul et
al. normalise, so weights lie in (0, 1] and only scale the step down. Since
(N P)^-beta is decreasing in P, the max belongs to the batch's least likely
draw and w_j = (p_min^alpha / p_{i_j}^alpha)^beta: N and the total cancel.

Each sampling pass also writes isv[RL_PER_ESS_FRAC] = (sum P)^2 / (N sum P^2)
= (sum p^alpha)^2 / (N sum p^2alpha), 1 for uniform sampling, 1/N when one
transition holds all the mass; 0 ("not observed") while the buffer is empty.

Priority update after a Q step: p_i <- |loss_j| + PRIORITY_EPS for each sampled
row j (i = idx[j]); a transition drawn several times in one batch keeps the
largest of its new priorities (order-independent, so deterministic); a
non-finite loss (a NaN or inf in the transition itself: the weights are guarded
against non-finite updates) drops the transition: priority 0, never sampled
again, so one bad row cannot stall the Q head; it does not touch pmax. pmax <- max(pmax, batch max). New
transitions enter with priority pmax, so each is replayed at least once soon.
One block does it (``rl_per_update_priority``); above PER_GRID_ABOVE rows two
grid launches (``rl_per_clear_priority``, ``rl_per_max_priority``).

Kernels that run inside the learning K-loop (build_cdf, the draw, gather,
the priority update) take a
first argument gate[1] (int32): gate[0] == 0 makes every block exit at once,
writing nothing, so the trainer can predicate K-loop iterations on the device.
"""
from __future__ import annotations

import math

from numba import cuda, float32, float64, int32

from alpharl.cuda_kernels.reductions import tree_max
from alpharl.cuda_kernels.registry import kernel
from alpharl.isv import RL_PER_ALPHA, RL_PER_BETA, RL_PER_ESS_FRAC
from alpharl.prng import uniform53, xorshift32
from alpharl.sizes import cdiv

#: meta[] layout: the write cursor (next slot written) and the filled size.
META_CURSOR = 0
META_SIZE = 1
META_LEN = 2
#: Threads of every kernel here but the copies (insert, gather); a power of two (scans, tree reductions).
PER_BLOCK = 128
#: Contiguous slots each build_cdf thread sums; PER_TILE slots per block.
PER_THREAD_ITEMS = 8
PER_TILE = PER_BLOCK * PER_THREAD_ITEMS
#: Threads per block of the grid-stride copy kernels (insert, gather).
COPY_BLOCK = 256
#: Added to |loss| so no stored transition reaches probability 0.
PRIORITY_EPS = 1.0e-6
#: Priority of the first transitions, before any loss is seen (Schaul et al.: p_1 = 1).
INITIAL_MAX_PRIORITY = 1.0
#: A minibatch of more rows than this draws and updates on the grid path (one thread per row, many
#: blocks) instead of the one-block path. One block runs ceil(m / PER_BLOCK) dependent rounds of two
#: bisections through global memory; the grid runs one round over all SMs but is three launches instead
#: of one for the draw and two instead of one for the update, each a graph node of ~3-5 us. So small
#: minibatches (the B = 16 step) stay on one block. 4 PER_BLOCK (four rounds) is a first estimate, to be
#: set by measurement on the GPU (benchmarks/bench_replay.py times both paths at each m).
PER_GRID_ABOVE = 4 * PER_BLOCK
#: scratch[] layout (float64) between the grid path's kernels: the total mass sum p^alpha, and the batch
#: min of p^alpha over the draws (the IS weights' normaliser).
SCRATCH_TOTAL = 0
SCRATCH_LEAST = 1
SCRATCH_LEN = 2


@cuda.jit(device=True)
def priority_mass(p, alpha):
    """p^alpha in float64: the unnormalised sampling mass of a stored priority."""
    return math.pow(float64(p), alpha)


@cuda.jit(device=True)
def block_scan(a, b, va, vb, tid):
    """Block-wide prefix sums of the threads' (va, vb); returns this thread's exclusive offset of va.

    Inclusive Hillis-Steele scans in shared a[0:PER_BLOCK] and b[0:PER_BLOCK]
    (log2 PER_BLOCK rounds of read, sync, write, sync): a fixed order, so the
    sums are bit-identical run to run. Afterwards a[PER_BLOCK - 1] and
    b[PER_BLOCK - 1] hold the block totals. Every thread of the block must call it.
    """
    a[tid] = va
    b[tid] = vb
    cuda.syncthreads()
    offset = 1
    while offset < PER_BLOCK:
        if tid >= offset:
            va += a[tid - offset]
            vb += b[tid - offset]
        cuda.syncthreads()
        a[tid] = va
        b[tid] = vb
        cuda.syncthreads()
        offset *= 2
    return a[tid - 1] if tid > 0 else float64(0.0)


@cuda.jit(device=True)
def first_above(arr, lo, hi, x):
    """Smallest i in [lo, hi] with arr[i] > x (arr ascending on [lo, hi]); hi when there is none."""
    while lo < hi:
        mid = (lo + hi) // 2
        if arr[mid] > x:
            hi = mid
        else:
            lo = mid + 1
    return lo


# ------------------------------------------------------------------ insert
@kernel("void(float32[:, ::1], int32[::1], float32[::1], float32[::1], float32[:, ::1], int32[::1], float32[::1], "
        "float32[:, ::1], int32[::1], float32[::1], float32[::1], float32[:, ::1], float32[::1])")
def rl_per_insert(new_obs_s, new_action, new_reward, new_done, new_obs_s2, meta, pmax,
                  obs_s, action, reward, done, obs_s2, priority):
    """Write n = len(new_action) transitions at slots (cursor + j) mod C, priority pmax.

    Does not move the cursor: rl_per_advance does, after every block has read it.
    Needs n <= C (else a slot would be written twice in one launch).
    Launch [copy_grid(n * D), COPY_BLOCK], grid-stride.
    """
    n = new_action.shape[0]
    cap = action.shape[0]
    d = obs_s.shape[1]
    cursor = meta[META_CURSOR]
    start = cuda.grid(1)
    stride = cuda.gridsize(1)
    for e in range(start, n * d, stride):
        j = e // d
        k = e - j * d
        slot = (cursor + j) % cap
        obs_s[slot, k] = new_obs_s[j, k]
        obs_s2[slot, k] = new_obs_s2[j, k]
    p_new = pmax[0]
    for j in range(start, n, stride):
        slot = (cursor + j) % cap
        action[slot] = new_action[j]
        reward[slot] = new_reward[j]
        done[slot] = new_done[j]
        priority[slot] = p_new


@kernel("void(int32[::1], int32, int32)")
def rl_per_advance(meta, n, capacity):
    """cursor <- (cursor + n) mod C, size <- min(size + n, C), after rl_per_insert. Launch [1, 1]."""
    if cuda.grid(1) == 0:
        meta[META_CURSOR] = (meta[META_CURSOR] + n) % capacity
        meta[META_SIZE] = min(meta[META_SIZE] + n, capacity)


# ------------------------------------------------------------------ sample
@kernel("void(int32[::1], float32[::1], int32[::1], float32[::1], float64[::1], float64[::1], float64[::1])")
def rl_per_build_cdf(gate, priority, meta, isv, cdf, tile_sum, tile_sq):
    """Tile-local inclusive CDF of p^alpha over the filled slots, and each tile's sums.

    cdf[C] f64 out (slots < size), tile_sum / tile_sq[n_tiles(C)] f64 out (sum of
    p^alpha and of p^2alpha per tile, tiles holding filled slots).
    Launch [n_tiles(C), PER_BLOCK]; a tile with no filled slot exits at once.
    """
    if gate[0] == 0:
        return
    n = meta[META_SIZE]
    tile = cuda.blockIdx.x
    if tile * PER_TILE >= n:
        return
    s_sum = cuda.shared.array(PER_BLOCK, float64)
    s_sq = cuda.shared.array(PER_BLOCK, float64)
    tid = cuda.threadIdx.x
    alpha = float64(isv[RL_PER_ALPHA])
    lo = tile * PER_TILE + tid * PER_THREAD_ITEMS
    hi = min(lo + PER_THREAD_ITEMS, n)
    s = float64(0.0)
    s2 = float64(0.0)
    for i in range(lo, hi):
        w = priority_mass(priority[i], alpha)
        s += w
        s2 += w * w
        cdf[i] = s  # this thread's running sum; its offset is added after the scan
    base = block_scan(s_sum, s_sq, s, s2, tid)
    for i in range(lo, hi):
        cdf[i] = base + cdf[i]
    if tid == 0:
        tile_sum[tile] = s_sum[PER_BLOCK - 1]
        tile_sq[tile] = s_sq[PER_BLOCK - 1]


@cuda.jit(device=True)
def scan_tiles(n, tile_sum, tile_sq, tile_cdf, isv, s_sum, s_sq, tid):
    """tile_cdf[t] <- inclusive prefix sum of tile_sum over the filled tiles; isv[RL_PER_ESS_FRAC] <- ESS.

    A contiguous chunk of tiles per thread, then a block scan of the chunk sums
    (s_sum, s_sq: shared PER_BLOCK f64). Returns the total mass; every thread of
    the block must call it, and tile_cdf is complete after its closing sync.
    """
    n_tiles = (n + PER_TILE - 1) // PER_TILE
    chunk = (n_tiles + PER_BLOCK - 1) // PER_BLOCK
    lo = tid * chunk
    hi = min(lo + chunk, n_tiles)
    s = float64(0.0)
    s2 = float64(0.0)
    for t in range(lo, hi):
        s += tile_sum[t]
        s2 += tile_sq[t]
        tile_cdf[t] = s
    base = block_scan(s_sum, s_sq, s, s2, tid)
    for t in range(lo, hi):
        tile_cdf[t] = base + tile_cdf[t]
    total = s_sum[PER_BLOCK - 1]
    if tid == 0:
        ess = total * total / (float64(n) * s_sq[PER_BLOCK - 1]) if n > 0 else float64(0.0)
        isv[RL_PER_ESS_FRAC] = float32(ess)
    cuda.syncthreads()  # tile_cdf complete; the shared arrays are free again
    return total


@cuda.jit(device=True)
def draw_row(j, n, total, alpha, priority, cdf, tile_cdf, sampler_state, idx, least):
    """Draw j into idx[j]; returns min(least, its p^alpha).

    u_j = uniform53 of two xorshift32 steps of sampler_state[j] (advanced in
    place), target u_j x total; bisect for the tile, then for the slot inside it.
    With an empty buffer (n = 0) idx[j] = 0 and the state is left alone.
    """
    pick = 0
    if n > 0:
        a = xorshift32(sampler_state[j])
        b = xorshift32(a)
        sampler_state[j] = b
        target = uniform53(a, b) * total
        t = first_above(tile_cdf, 0, (n + PER_TILE - 1) // PER_TILE - 1, target)
        before = tile_cdf[t - 1] if t > 0 else float64(0.0)
        pick = first_above(cdf, t * PER_TILE, min((t + 1) * PER_TILE, n) - 1, target - before)
        least = min(least, priority_mass(priority[pick], alpha))
    idx[j] = int32(pick)
    return least


@cuda.jit(device=True)
def block_min(sh, v, tid):
    """Min of the block's v, returned to every thread (sh: shared PER_BLOCK f64, left holding the
    reduction; a max of negatives, negation being exact). Every thread of the block must call it."""
    sh[tid] = -v
    cuda.syncthreads()
    tree_max(sh, tid, PER_BLOCK)
    return -sh[0]


@cuda.jit(device=True)
def weight_row(j, n, least, alpha, beta, priority, idx, is_weight):
    """is_weight[j] <- (p_min^alpha / p_{idx[j]}^alpha)^beta, in (0, 1]; 0 with an empty buffer."""
    wj = float64(0.0)
    if n > 0:
        wj = math.pow(least / priority_mass(priority[idx[j]], alpha), beta)
    is_weight[j] = float32(wj)


@kernel("void(int32[::1], float32[::1], int32[::1], float32[::1], float64[::1], float64[::1], float64[::1], "
        "float64[::1], uint32[::1], int32, int32[::1], float32[::1])")
def rl_per_sample(gate, priority, meta, isv, cdf, tile_sum, tile_sq, tile_cdf, sampler_state, m, idx, is_weight):
    """Draw m slots with P(i) proportional to p_i^alpha, their IS weights, and the ESS fraction: the
    one-block path (m <= PER_GRID_ABOVE).

    Reads rl_per_build_cdf's cdf / tile_sum / tile_sq; tile_cdf[n_tiles(C)] f64
    is scratch. sampler_state[>= m] u32 (two xorshift32 steps per draw,
    advanced in place), idx[>= m] i32 out, is_weight[>= m] f32 out,
    isv[RL_PER_ESS_FRAC] out. Launch [1, PER_BLOCK] (one block: fixed-order
    scan over the tiles and the batch min of p^alpha).
    """
    if gate[0] == 0:
        return
    s_sum = cuda.shared.array(PER_BLOCK, float64)
    s_sq = cuda.shared.array(PER_BLOCK, float64)
    tid = cuda.threadIdx.x
    n = meta[META_SIZE]
    alpha = float64(isv[RL_PER_ALPHA])
    beta = float64(isv[RL_PER_BETA])
    total = scan_tiles(n, tile_sum, tile_sq, tile_cdf, isv, s_sum, s_sq, tid)
    least = float64(math.inf)
    for j in range(tid, m, PER_BLOCK):
        least = draw_row(j, n, total, alpha, priority, cdf, tile_cdf, sampler_state, idx, least)
    least = block_min(s_sum, least, tid)
    for j in range(tid, m, PER_BLOCK):
        weight_row(j, n, least, alpha, beta, priority, idx, is_weight)


# The grid path of the draw (m > PER_GRID_ABOVE): rl_per_scan_tiles, rl_per_draw, rl_per_weights run
# rl_per_sample's three phases as three launches, a kernel boundary in place of each grid-wide sync.
# The same device functions on the same inputs: the same idx, weights, ESS and sampler states.
@kernel("void(int32[::1], int32[::1], float32[::1], float64[::1], float64[::1], float64[::1], float64[::1])")
def rl_per_scan_tiles(gate, meta, isv, tile_sum, tile_sq, tile_cdf, scratch):
    """rl_per_sample's tile scan and ESS; scratch[SCRATCH_TOTAL] <- the total mass, scratch[SCRATCH_LEAST] <- +inf.

    scratch[SCRATCH_LEN] f64 out. Launch [1, PER_BLOCK].
    """
    if gate[0] == 0:
        return
    s_sum = cuda.shared.array(PER_BLOCK, float64)
    s_sq = cuda.shared.array(PER_BLOCK, float64)
    tid = cuda.threadIdx.x
    total = scan_tiles(meta[META_SIZE], tile_sum, tile_sq, tile_cdf, isv, s_sum, s_sq, tid)
    if tid == 0:
        scratch[SCRATCH_TOTAL] = total
        scratch[SCRATCH_LEAST] = math.inf


@kernel("void(int32[::1], float32[::1], int32[::1], float32[::1], float64[::1], float64[::1], float64[::1], "
        "uint32[::1], int32, int32[::1])")
def rl_per_draw(gate, priority, meta, isv, cdf, tile_cdf, scratch, sampler_state, m, idx):
    """Draw j = thread j < m into idx[j], after rl_per_scan_tiles; scratch[SCRATCH_LEAST] <- the batch min of p^alpha.

    Each block reduces its min in shared memory, then one float64 atomic min per
    block: min is exact and order-independent, so the result is deterministic.
    Launch [row_grid(m), PER_BLOCK].
    """
    if gate[0] == 0:
        return
    sh = cuda.shared.array(PER_BLOCK, float64)
    tid = cuda.threadIdx.x
    j = cuda.grid(1)
    least = float64(math.inf)
    if j < m:  # a guarded draw, not an early return: every thread reaches block_min's syncs
        least = draw_row(j, meta[META_SIZE], scratch[SCRATCH_TOTAL], float64(isv[RL_PER_ALPHA]), priority, cdf,
                         tile_cdf, sampler_state, idx, least)
    least = block_min(sh, least, tid)
    if tid == 0:
        cuda.atomic.min(scratch, SCRATCH_LEAST, least)


@kernel("void(int32[::1], float32[::1], int32[::1], float32[::1], float64[::1], int32, int32[::1], float32[::1])")
def rl_per_weights(gate, priority, meta, isv, scratch, m, idx, is_weight):
    """is_weight[j] for j < m from rl_per_draw's idx and batch min. Launch [row_grid(m), PER_BLOCK]."""
    if gate[0] == 0:
        return
    j = cuda.grid(1)
    if j < m:
        weight_row(j, meta[META_SIZE], scratch[SCRATCH_LEAST], float64(isv[RL_PER_ALPHA]),
                   float64(isv[RL_PER_BETA]), priority, idx, is_weight)


# ------------------------------------------------------------------ gather
@kernel("void(int32[::1], int32[::1], int32, float32[:, ::1], int32[::1], float32[::1], float32[::1], "
        "float32[:, ::1], float32[:, ::1], int32[::1], float32[::1], float32[::1], float32[:, ::1])")
def rl_per_gather(gate, idx, m, obs_s, action, reward, done, obs_s2,
                  mb_obs_s, mb_action, mb_reward, mb_done, mb_obs_s2):
    """Copy the sampled transitions idx[0:m] into the minibatch arrays (rows 0..m-1).

    Launch [copy_grid(m * D), COPY_BLOCK], grid-stride.
    """
    if gate[0] == 0:
        return
    d = obs_s.shape[1]
    start = cuda.grid(1)
    stride = cuda.gridsize(1)
    for e in range(start, m * d, stride):
        j = e // d
        k = e - j * d
        i = idx[j]
        mb_obs_s[j, k] = obs_s[i, k]
        mb_obs_s2[j, k] = obs_s2[i, k]
    for j in range(start, m, stride):
        i = idx[j]
        mb_action[j] = action[i]
        mb_reward[j] = reward[i]
        mb_done[j] = done[i]


# --------------------------------------------------------- priority update
@cuda.jit(device=True)
def new_priority(loss):
    """|loss| + PRIORITY_EPS, or 0 (the transition is dropped) when that is not finite."""
    p = abs(loss) + float32(PRIORITY_EPS)
    if not math.isfinite(p):
        p = float32(0.0)
    return p


@kernel("void(int32[::1], int32[::1], float32[::1], int32, float32[::1], float32[::1])")
def rl_per_update_priority(gate, idx, loss, m, priority, pmax):
    """p[idx[j]] <- new_priority(loss[j]) for j < m (max over duplicates); pmax <- max(pmax, new): the
    one-block path (m <= PER_GRID_ABOVE).

    Two phases split by syncthreads: clear the sampled slots, then atomic max of
    the new priorities into them. Float atomic max is order-independent (unlike
    an atomic sum), so the result is deterministic.
    Launch [1, PER_BLOCK] (one block: the clear must finish before the max).
    """
    if gate[0] == 0:
        return
    batch_max = cuda.shared.array(PER_BLOCK, float32)
    tid = cuda.threadIdx.x
    for j in range(tid, m, PER_BLOCK):
        priority[idx[j]] = float32(0.0)
    cuda.syncthreads()
    fallback = pmax[0]
    top = float32(0.0)
    for j in range(tid, m, PER_BLOCK):
        p = new_priority(loss[j])
        cuda.atomic.max(priority, idx[j], p)
        top = max(top, p)
    batch_max[tid] = top
    cuda.syncthreads()
    tree_max(batch_max, tid, PER_BLOCK)
    if tid == 0 and batch_max[0] > fallback:
        pmax[0] = batch_max[0]


# The grid path of the priority update (m > PER_GRID_ABOVE): the clear and the max as two launches, the
# kernel boundary in place of the syncthreads; pmax by one atomic max per block. Every max is exact and
# order-independent: the same priorities and pmax as rl_per_update_priority.
@kernel("void(int32[::1], int32[::1], int32, float32[::1])")
def rl_per_clear_priority(gate, idx, m, priority):
    """p[idx[j]] <- 0 for j = thread j < m, before rl_per_max_priority. Launch [row_grid(m), PER_BLOCK]."""
    if gate[0] == 0:
        return
    j = cuda.grid(1)
    if j < m:
        priority[idx[j]] = float32(0.0)


@kernel("void(int32[::1], int32[::1], float32[::1], int32, float32[::1], float32[::1])")
def rl_per_max_priority(gate, idx, loss, m, priority, pmax):
    """p[idx[j]] <- max(p[idx[j]], new_priority(loss[j])) for j = thread j < m; pmax <- max(pmax, new).

    Launch [row_grid(m), PER_BLOCK], after rl_per_clear_priority.
    """
    if gate[0] == 0:
        return
    batch_max = cuda.shared.array(PER_BLOCK, float32)
    tid = cuda.threadIdx.x
    j = cuda.grid(1)
    top = float32(0.0)
    if j < m:  # guarded, not an early return: every thread reaches tree_max's syncs
        top = new_priority(loss[j])
        cuda.atomic.max(priority, idx[j], top)
    batch_max[tid] = top
    cuda.syncthreads()
    tree_max(batch_max, tid, PER_BLOCK)
    if tid == 0:
        cuda.atomic.max(pmax, 0, batch_max[0])


def n_tiles(capacity: int) -> int:
    """Tiles of PER_TILE slots covering the capacity: the grid of rl_per_build_cdf."""
    return max(1, cdiv(capacity, PER_TILE))


def copy_grid(n_elements: int) -> int:
    """Blocks of COPY_BLOCK threads for a grid-stride copy of n_elements (at least one)."""
    return max(1, cdiv(n_elements, COPY_BLOCK))


def row_grid(m: int) -> int:
    """Blocks of PER_BLOCK threads, one thread per row, for the grid path's m rows (at least one)."""
    return max(1, cdiv(m, PER_BLOCK))
