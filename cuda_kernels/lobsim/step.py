"""``lobsim_step`` and ``lobsim_reset``: one thread per backtest.

Both read the market from ``events int32[rows, N_EV_COLS]`` and
``book int32[rows, 4L]`` (alpharl.sim.layout). For the historical replay these
are the whole day, shared read-only by every backtest, and a backtest's
snapshot row is its cursor. For the synthetic market they are the per-step
tables ``lobsim_synth_flow`` wrote, ``E + 1`` rows per backtest (row 0 = the
book before the step). The semantics of a step are documented in
alpharl.reference.lobsim.step, the NumPy twin these kernels are tested against.

Register-resident state. A thread copies its backtest's whole state
(``si[:, b]``, ``sf[:, b]``, ``rng[b]``) and the packed parameters into
``cuda.local.array`` rows at the start, runs the step on those copies and
stores them back once at the end. Every index into the copies is a
compile-time constant after inlining, so they live in registers (and since
``si``, ``ip``, ``book`` and ``fills_i`` are all int32 arrays the compiler
could not keep any of them in registers across a store).

Shared-memory market. With few backtests (step_launch) ``lobsim_step`` first
copies the step's event and book rows of the block's backtests into shared
memory, the whole block taking part in one pass per chunk of events
(stage.py), so the serial walk over the events reads shared memory, not a
chain of dependent global loads; with many, the warps of a multiprocessor
overlap those latencies and the walk reads the global tables. Inside the
walk, each event's fields, the snapshot's best ask / bid and the queue caps of
the live orders are read together at the top of the event and shared by both
sides and the activation. Global memory written in the walk: the fills ring
only.

Launch ``lobsim_step`` with ``step_launch(B, E, L)`` (stage.py) and
``lobsim_reset`` as ``[sim_grid(B), SIM_BLOCK]`` (one thread per backtest, no
shared memory: threads past B exit at once). ``lobsim_observe`` (test_only) is
the observation alone, for the tests.
"""
from __future__ import annotations

from numba import cuda, float32, float64, int32, uint32

from alpharl.cuda_kernels.lobsim.backtest import (end_step, has_orders, observe_next, replay_event, restart,
                                                  send_orders, start_backtest)
from alpharl.cuda_kernels.lobsim.agent import activate
from alpharl.cuda_kernels.lobsim.book import mid2_of, word
from alpharl.cuda_kernels.lobsim.observe import write_obs
from alpharl.cuda_kernels.lobsim.stage import copy_row, stage_rows
from alpharl.cuda_kernels.lobsim.switches import OBS_SHAPE, OBS_STAGED, SYNTHETIC
from alpharl.cuda_kernels.registry import kernel
from alpharl.lobster.format import ASK_PRICE, BID_PRICE
from alpharl.sim.layout import (BOOK_COLS, F_TRIP_BASE, IP_EVENTS_PER_STEP, IP_LEVELS, IP_SYNTHETIC, N_EV_COLS, N_FP,
                                N_IP, N_STATE_F, N_STATE_I, S_CURSOR, S_TRIPS)
from alpharl.sizes import cdiv

#: Threads per block of lobsim_reset: one thread per backtest.
SIM_BLOCK = 128


def sim_grid(n: int) -> int:
    """Blocks of SIM_BLOCK threads covering n backtests."""
    return cdiv(n, SIM_BLOCK)


@cuda.jit(device=True)
def load_params(ip, fp, pi, pf):
    """Register copies pi / pf of the packed parameters."""
    for k in range(N_IP):
        pi[k] = ip[k]
    for k in range(N_FP):
        pf[k] = fp[k]


@cuda.jit(device=True)
def load_state(si, sf, rng, b, st, fs, rs):
    """Register copies st / fs / rs of backtest b's state and PRNG state."""
    for r in range(N_STATE_I):
        st[r] = si[r, b]
    for r in range(N_STATE_F):
        fs[r] = sf[r, b]
    rs[0] = rng[b]


@cuda.jit(device=True)
def store_state(st, fs, rs, si, sf, rng, b):
    """Write the register copies back: the one store of backtest b's state per launch."""
    for r in range(N_STATE_I):
        si[r, b] = st[r]
    for r in range(N_STATE_F):
        sf[r, b] = fs[r]
    rng[b] = rs[0]


@kernel("void(int32[::1], int32[:, ::1], int32[::1], int32[::1], int32[::1], int32[::1], int32[::1], int32[::1], "
        "int32[::1], float64[::1], int32[:, ::1], float64[:, ::1], uint32[::1], float64[:, ::1], float32[:, ::1], "
        "float32[:, ::1], int32[:, :, ::1], float64[:, ::1], int64[:, ::1], int64[::1], int32, int32)")
def lobsim_step(actions, orders, events, book, live_rows, seen_rows, resp_rows, arrived, ip, fp, si, sf, rng, resp_ring,
                obs, out, fills_i, fills_f, fills_t, times, per_block, chunk):
    """One env step of every backtest: action, E events with queue fills, reward / done /
    labels, branch-free auto-reset, observation.

    actions int32[B]; orders int32[N_ORD, B] the order instructions (layout ORD_*; zeros: none), applied
    after the action; events/book the market tables, flat (rows of N_EV_COLS / 4L words);
    live_rows / seen_rows / resp_rows the latencies in time as rows (alpharl.sim.market.LatencyRows); arrived the
    row each event's order arrived at (l3_fifo, alpharl.sim.market.order_arrivals); ip/fp
    packed SimParams; si int32[N_STATE_I, B], sf float64[N_STATE_F, B], rng uint32[B], resp_ring
    float64[N_RESP, B] (the own-state ring of a response latency; read and written only with one) (updated);
    obs float32[B, obs_dim] and out float32[N_OUT, B] (written); fills_i int32[B, cap, N_FILL_I] /
    fills_f float64[B, cap] / fills_t int64[B, cap] (ring); times int64 ns of every row (read for the
    fills log only, alpharl.sim.market.row_times).
    Block k runs backtests k * per_block + t on its threads t < per_block; all its threads stage
    the market rows, ``chunk`` events at a time, in dynamic shared memory (stage.py), or with
    chunk 0 the walk reads the global tables.
    Launch ``l = step_launch(B, E, L)``: [l.grid, l.threads, stream, l.smem_bytes], per_block =
    l.per_block, chunk = l.chunk.
    """
    tid = cuda.threadIdx.x
    nthreads = cuda.blockDim.x
    first_b = cuda.blockIdx.x * per_block
    nb = min(per_block, si.shape[1] - first_b)
    b = first_b + tid
    mine = tid < nb                      # this thread walks backtest b; the others only help staging
    # 0. register copies of the parameters and of this backtest's state (stored back at the end)
    pi = cuda.local.array(N_IP, int32)
    pf = cuda.local.array(N_FP, float64)
    load_params(ip, fp, pi, pf)
    st = cuda.local.array(N_STATE_I, int32)
    fs = cuda.local.array(N_STATE_F, float64)
    rs = cuda.local.array(1, uint32)
    n_ev = pi[IP_EVENTS_PER_STEP]
    # the block's observation rows (OBS_STAGED builds: one thread per backtest, OBS_SHAPE = (threads, obs_dim))
    so = cuda.shared.array(OBS_SHAPE, float32)
    nl = pi[IP_LEVELS]
    width = BOOK_COLS * nl
    synthetic = SYNTHETIC and pi[IP_SYNTHETIC] != 0
    # the staging memory (stage.py); this thread's slot: book rows from word sb0 (the step's row
    # j0 + i at sb0 + i * width), the chunk's event i (1-based) at ev0 + i * N_EV_COLS
    staged = chunk > 0
    sm = cuda.shared.array(0, int32)
    book_words = per_block * (chunk + 1) * width
    sb0 = per_block + tid * (chunk + 1) * width
    ev0 = per_block + book_words + (tid * chunk - 1) * N_EV_COLS
    row0 = 0
    act = 0
    trips0 = 0
    base0 = float64(0.0)
    if mine:
        load_state(si, sf, rng, b, st, fs, rs)
        trips0 = st[S_TRIPS]             # the trades this step ends: round trips closed (close_if_flat)
        base0 = fs[F_TRIP_BASE]
        act = actions[b]
        row0 = b * (n_ev + 1) if synthetic else st[S_CURSOR]
        if staged:
            sm[tid] = row0
    closed = False
    walking = mine
    mid_before = 0
    j = 0                                # events walked
    j0 = 0                               # events of the step before the chunk
    staged_end = False                   # whether the last chunk staged the step's last book row
    last_n = 0                           # events of the last chunk staged
    # where the walk reads the market: the staged copy, or (chunk 0) the global tables in one pass
    mb = sm if staged else book
    me = sm if staged else events
    while j0 < n_ev:
        n = min(chunk, n_ev - j0) if staged else n_ev
        if staged:
            # the pass before the first chunk always runs: the action reads row0 and the end row is
            # read from the last chunk; a later one only while some backtest of the block still walks
            if cuda.syncthreads_or(1 if (walking or j0 == 0) else 0) == 0:
                break
            stage_rows(book, width, sm, per_block, (chunk + 1) * width, nb, j0, n + 1, tid, nthreads)
            stage_rows(events, N_EV_COLS, sm, per_block + book_words, chunk * N_EV_COLS, nb, j0 + 1, n, tid,
                       nthreads)
            cuda.syncthreads()
            staged_end = j0 + n == n_ev
            last_n = n
        else:
            sb0 = row0 * width
            ev0 = row0 * N_EV_COLS
        if j0 == 0 and mine:
            mid_before = mid2_of(word(mb, sb0 + ASK_PRICE), word(mb, sb0 + BID_PRICE))
            send_orders(st, act, orders, b, mb, sb0, book, row0, width, live_rows, seen_rows, pi)
        # 2-4. pass i = 0 (first chunk only): orders with no latency act on the snapshot the agent
        # saw; pass i > 0: replay the chunk's event i against our orders, then activate on the
        # book after it (one inlined copy of activate for both). Once the episode closed or no
        # order is left (resting, pending or market), the remaining events cannot touch this
        # backtest and only move its cursor
        i = 0 if j0 == 0 else 1
        while i <= n and walking:
            at1 = sb0 + i * width
            # everything this event reads from the market, issued together (independent loads)
            ask1 = word(mb, at1 + ASK_PRICE)
            bid1 = word(mb, at1 + BID_PRICE)
            if i > 0:
                j += 1
                closed = replay_event(st, fs, rs, b, me, ev0 + i * N_EV_COLS, mb, at1, ask1, bid1, width, arrived,
                                      pi, pf, fills_i, fills_f, fills_t, times)
            if not closed:
                closed = activate(st, fs, b, mb, at1, ask1, bid1, pi, pf, fills_i, fills_f, fills_t, times)
            walking = not closed and has_orders(st)
            i += 1
        j0 += n
        if staged:
            cuda.syncthreads()           # the next pass overwrites the rows
    if mine:
        st[S_CURSOR] += n_ev - j

        # 5. end of step: window, forced flatten, reward, labels (row_e: the step's last book row, at
        # at_e in mb: staged by the last chunk, or copied to the slot's first row now)
        row_e = row0 + n_ev
        at_e = row_e * width
        if staged:
            at_e = sb0 + last_n * width if staged_end else sb0
            if not staged_end:
                copy_row(book, row_e * width, sm, at_e, width)
        done, mid_e = end_step(st, fs, b, mb, at_e, row_e, closed, mid_before, trips0, base0, book, seen_rows, width,
                               pi, pf, out, fills_i, fills_f, fills_t, times)

        # 6. branch-free auto-reset, then the next observation (staged: a new start's book row is
        # copied over the slot row of row_e, no longer needed), into the thread's row of the block's
        # staged observations with OBS_STAGED (stored below), else straight into obs[b]
        row = restart(st, fs, rs, done, row_e, pi)
        if row != row_e:
            if staged:
                copy_row(book, row * width, sm, at_e, width)
            else:
                at_e = row * width
        if OBS_STAGED:
            observe_next(st, fs, b, mb, at_e, row, row_e, mid_e, done, book, seen_rows, resp_rows, resp_ring, width,
                         pi, pf, so, tid)
        else:
            observe_next(st, fs, b, mb, at_e, row, row_e, mid_e, done, book, seen_rows, resp_rows, resp_ring, width,
                         pi, pf, obs, b)

        # 7. the one store of the state
        store_state(st, fs, rs, si, sf, rng, b)
    if OBS_STAGED:
        # The block's observation rows are consecutive in obs: stored in one pass, consecutive
        # threads on consecutive words. A thread storing its own row instead puts each warp-wide
        # store on 32 rows, one 32-byte sector moved for every 4-byte word.
        cuda.syncthreads()
        dim = OBS_SHAPE[1]
        for k in range(tid, nb * dim, nthreads):
            r = k // dim
            obs[first_b + r, k - r * dim] = so[r, k - r * dim]


@kernel("void(int32[::1], int32[::1], int32[::1], int32[::1], int32[::1], float64[::1], int32[:, ::1], "
        "float64[:, ::1], uint32[::1], float64[:, ::1], float32[:, ::1], float32[:, ::1])")
def lobsim_reset(events, book, seen_rows, resp_rows, ip, fp, si, sf, rng, resp_ring, obs, out):
    """Start every backtest afresh: counters cleared, a random start cursor (replay), flat,
    no orders, outputs zero, observation written (of the seen row with a feed latency; the own-state
    ring filled with a response latency). rng must
    hold freshly seeded states; events / book flat as in lobsim_step. Launch [sim_grid(B), SIM_BLOCK]."""
    b = cuda.grid(1)
    if b >= si.shape[1]:
        return
    pi = cuda.local.array(N_IP, int32)
    pf = cuda.local.array(N_FP, float64)
    load_params(ip, fp, pi, pf)
    st = cuda.local.array(N_STATE_I, int32)
    fs = cuda.local.array(N_STATE_F, float64)
    rs = cuda.local.array(1, uint32)
    rs[0] = rng[b]
    start_backtest(st, fs, rs, b, book, seen_rows, resp_rows, resp_ring, pi, pf, obs, out)
    store_state(st, fs, rs, si, sf, rng, b)


@kernel("void(int32[::1], int32[::1], int32[::1], float64[::1], int32[:, ::1], float64[:, ::1], uint32[::1], "
        "float32[:, ::1])", test_only=True)
def lobsim_observe(book, rows, ip, fp, si, sf, rng, obs):
    """The observation alone, the unit twin of the last part of lobsim_step / lobsim_reset:
    obs[b, :] from the snapshot row rows[b] of the flat book table and backtest b's state
    (si, sf, rng: read only), through the same register copies. Launch [sim_grid(B), SIM_BLOCK]."""
    b = cuda.grid(1)
    if b >= si.shape[1]:
        return
    pi = cuda.local.array(N_IP, int32)
    pf = cuda.local.array(N_FP, float64)
    load_params(ip, fp, pi, pf)
    st = cuda.local.array(N_STATE_I, int32)
    fs = cuda.local.array(N_STATE_F, float64)
    rs = cuda.local.array(1, uint32)
    load_state(si, sf, rng, b, st, fs, rs)
    write_obs(st, fs, b, book, rows[b] * BOOK_COLS * pi[IP_LEVELS], pi, pf, obs)
