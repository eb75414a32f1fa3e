"""Shared-memory staging of the market rows a ``lobsim_step`` block reads.

A step of backtest b reads the event rows ``row0 + 1 .. row0 + E`` and the book
rows ``row0 .. row0 + E`` (contiguous in both tables), and its walk over them is
serial: read global memory inside it and every event costs a few dependent L2
round trips (the level scans' loads wait on the price in the state, and none
can be hoisted above the fills-log stores of the previous event, which may
alias). Instead the block first copies those rows of all its backtests into
shared memory, every thread of the block helping and each thread keeping
``STAGE_UNROLL`` loads in flight, so the step pays a few memory latencies in
all; the walk then reads shared memory only.

The rows are copied ``chunk`` events at a time (the shared memory of a block
is bounded), one block-wide pass per chunk. Shared memory of a block, int32:

    [per_block]                              row0 of each backtest (slot) of the block
    [per_block * (chunk + 1) * 4L]           slot s: book rows row0 + j0 .. row0 + j0 + chunk
    [per_block * chunk * N_EV_COLS]          slot s: event rows row0 + j0 + 1 .. row0 + j0 + chunk

(j0: events of the step before the chunk). ``step_launch`` picks the launch
configuration and sizes this memory.
"""
from __future__ import annotations

from dataclasses import dataclass

from numba import cuda, int32, uint32

from alpharl.cuda_kernels.lobsim.book import word
from alpharl.sim.layout import BOOK_COLS, N_EV_COLS
from alpharl.sizes import cdiv

#: Shared memory a block may use without the opt-in for more (bytes).
STAGE_SMEM_BYTES = 48 * 1024
#: Backtests per block of lobsim_step when staged: about STAGE_TARGET_BLOCKS blocks, between 1
#: and STAGE_MAX_PER_BLOCK backtests each. The walk is a long serial chain of branchy code per
#: thread, and a warp that walks several backtests runs the union of their branches: with few
#: backtests every one gets a warp (and a multiprocessor) of its own (H200, B = 16: 32 us a step
#: against 41 us with 16 backtests a block); with many, ~256 blocks (two a multiprocessor) keep
#: the staging copies of some blocks under the walks of others (H200, bench_sim 8-step graph:
#: B = 1024 23.9 us at 4 a block against 40.1 direct; B = 4096 29.1 us at 16 a block against
#: 40.8 direct, 64.7 at 4, 47.4 at 8, 43.1 at 32).
STAGE_TARGET_BLOCKS = 256
STAGE_MAX_PER_BLOCK = 16
#: Global loads each thread keeps in flight while staging.
STAGE_UNROLL = 8
#: Threads per block when staged: the extra threads only help the copy (one backtest's 17 rows
#: of a 5-level book are 404 words: one batch of loads for 64 threads); 128 with several backtests.
STAGE_THREADS = 64
STAGE_THREADS_SHARED = 128
#: Above this many backtests lobsim_step reads the market straight from global memory (chunk 0,
#: DIRECT_BLOCK backtests and threads a block, no shared memory): with many warps per
#: multiprocessor their latencies overlap.
STAGE_MAX_BACKTESTS = 4096
DIRECT_BLOCK = 128


@dataclass(frozen=True)
class StepLaunch:
    """Launch configuration of lobsim_step: ``kernel[grid, threads, stream, smem_bytes]`` with the
    kernel arguments ``per_block`` (backtests per block) and ``chunk`` (events staged per pass;
    0: no staging, the market is read from global memory)."""

    grid: int
    threads: int
    per_block: int
    chunk: int
    smem_bytes: int


def stage_ints(per_block: int, chunk: int, levels: int) -> int:
    """int32 words of a block's staging memory (layout in the module docstring)."""
    return per_block * (1 + (chunk + 1) * BOOK_COLS * levels + chunk * N_EV_COLS)


def step_launch(n: int, events: int, levels: int, per_block: int | None = None, threads: int | None = None,
                smem_bytes: int = STAGE_SMEM_BYTES, staged: bool | None = None) -> StepLaunch:
    """The launch of lobsim_step for n backtests, ``events`` per step on an L-level book. Staged
    (by default up to STAGE_MAX_BACKTESTS backtests): the largest chunk (at most ``events``) whose
    staging fits ``smem_bytes``, halving the backtests per block when not even one event fits."""
    if not (n <= STAGE_MAX_BACKTESTS if staged is None else staged):
        pb = per_block or DIRECT_BLOCK
        return StepLaunch(cdiv(n, pb), max(threads or pb, pb), pb, 0, 0)
    pb = max(1, min(per_block or min(max(1, n // STAGE_TARGET_BLOCKS), STAGE_MAX_PER_BLOCK), n))
    while pb > 1 and 4 * stage_ints(pb, 1, levels) > smem_bytes:
        pb //= 2
    if 4 * stage_ints(pb, 1, levels) > smem_bytes:
        raise ValueError(f"one event of a {levels}-level book does not fit {smem_bytes} bytes of shared memory")
    chunk = 1
    while chunk < events and 4 * stage_ints(pb, chunk + 1, levels) <= smem_bytes:
        chunk += 1
    grid = cdiv(n, pb)
    threads = max(threads or (STAGE_THREADS if pb == 1 else STAGE_THREADS_SHARED), (pb + 31) // 32 * 32)
    return StepLaunch(grid, threads, pb, chunk, 4 * stage_ints(pb, chunk, levels))


@cuda.jit(device=True)
def stage_rows(src, width, sm, dst0, slot_words, nb, first, nrows, tid, nthreads):
    """Block-wide copy: for every slot s < nb, the ``nrows`` rows from sm[s] + first (sm[s]: the
    slot's row0) of a flat table of ``width`` words a row go to sm[dst0 + s * slot_words ...].
    Word e of the nb * nrows * width is copied by thread e % nthreads: its (slot, word) pairs
    advance by a fixed step without a division, and STAGE_UNROLL loads (past the end, of a
    clamped valid word) are issued before their stores, which may alias them as far as the
    compiler knows: a plain loop would wait a whole memory latency per word."""
    per = nrows * width
    total = nb * per
    ds = nthreads // per                 # (slot, word) step of nthreads words
    dk = nthreads - ds * per
    s = tid // per
    k = tid - s * per
    val = cuda.local.array(STAGE_UNROLL, int32)
    at = cuda.local.array(STAGE_UNROLL, int32)
    e = tid
    while e < total:
        for u in range(STAGE_UNROLL):
            sc = min(s, nb - 1)
            val[u] = word(src, (word(sm, sc) + first) * width + k)
            at[u] = dst0 + s * slot_words + k
            k += dk
            s += ds
            wrap = k >= per
            k = k - per if wrap else k
            s = s + 1 if wrap else s
        for u in range(STAGE_UNROLL):
            if e + u * nthreads < total:
                sm[uint32(at[u])] = val[u]
        e += STAGE_UNROLL * nthreads


@cuda.jit(device=True)
def copy_row(src, at, dst, dst_at, width):
    """One thread's copy of the ``width`` words src[at:] to dst[dst_at:], STAGE_UNROLL loads in
    flight (a load past the end reads the last word again)."""
    val = cuda.local.array(STAGE_UNROLL, int32)
    for c0 in range(0, width, STAGE_UNROLL):
        for u in range(STAGE_UNROLL):
            val[u] = word(src, at + min(c0 + u, width - 1))
        for u in range(STAGE_UNROLL):
            if c0 + u < width:
                dst[uint32(dst_at + c0 + u)] = val[u]
