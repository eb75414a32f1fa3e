"""``lobsim_step`` and ``lobsim_reset``: one thread per backtest.

Both read the market from ``events int32[rows, N_EV_COLS]`` and
``book int32[rows, 4L]`` (alpharl.sim.layout). For the historical replay these
are the whole day, shared read-only by every backtest, and a backtest's
snapshot row is its cursor. For the synthetic market they are the per-step
tables ``lobsim_synth_flow`` wrote, ``E + 1`` rows per backtest (row 0 = the
book before the step). The semantics of a step are documented in
alpharl.reference.lobsim, the NumPy twin these kernels are tested against.

Launch both as ``[sim_grid(B), SIM_BLOCK]`` (one thread per backtest, no
shared memory, no syncthreads: threads past B exit at once).
"""
from __future__ import annotations

from numba import cuda, float32, float64, int32, uint32

from alpharl.cuda_kernels.lobsim.agent import activate, close_if_flat, order_event, place_orders, walk
from alpharl.cuda_kernels.lobsim.book import mid2
from alpharl.cuda_kernels.lobsim.observe import write_obs
from alpharl.cuda_kernels.registry import kernel
from alpharl.prng import xorshift32
from alpharl.sim.layout import (F_CASH, F_EQUITY, FP_TICK_DOLLARS, IP_EPISODE_STEPS, IP_EVENTS_PER_STEP,
                                IP_FORCE_FLATTEN, IP_N_ROWS, IP_SYNTHETIC, LIVE, N_MID_HIST, N_OUT, N_STATE_F,
                                N_STATE_I, OUT_DONE, OUT_LABEL_RET, OUT_LABEL_UP, OUT_REWARD, OUT_TRADE_DONE,
                                OUT_TRADE_PNL, OUT_TRUNCATED, S_BOUGHT, S_BUY_LIVE_AT, S_BUY_OID, S_BUY_PX, S_BUY_QA,
                                S_BUY_QA0, S_BUY_QTY, S_CURSOR, S_EPISODE, S_INVENTORY, S_MID_HIST, S_MKT_FLAT,
                                S_MKT_LIVE_AT, S_MKT_OID, S_MKT_QTY, S_NEXT_OID, S_SELL_LIVE_AT, S_SELL_OID,
                                S_SELL_PX, S_SELL_QA, S_SELL_QA0, S_SELL_QTY, S_SOLD, S_STEP, S_STEP_IN_EP,
                                S_TRADE_STEPS, S_WAS_OPEN, SIDE_BUY, SIDE_SELL)

#: Threads per block: one thread per backtest.
SIM_BLOCK = 128


def sim_grid(n: int) -> int:
    """Blocks of SIM_BLOCK threads covering n backtests."""
    return (n + SIM_BLOCK - 1) // SIM_BLOCK


@cuda.jit(device=True)
def draw_start(rng, b, ip):
    """Advance backtest b's PRNG one step; a uniform episode start in [0, span) where
    span = rows - window events (the whole window fits in the data)."""
    x = xorshift32(rng[b])
    rng[b] = x
    span = max(ip[IP_N_ROWS] - ip[IP_EVENTS_PER_STEP] * ip[IP_EPISODE_STEPS], 1)
    return int32(x % uint32(span))


@cuda.jit(device=True)
def has_orders(si, b):
    """True while backtest b has a resting, pending or market order."""
    return (si[S_BUY_QTY, b] > 0 or si[S_SELL_QTY, b] > 0 or si[S_MKT_QTY, b] != 0
            or si[S_MKT_FLAT, b] != 0)


@cuda.jit(device=True)
def select_reset(si, sf, b, done):
    """Branch-free reset of backtest b's episode state: every field keeps its value or, when
    ``done``, takes the fresh-episode value (orders gone, flat, zero money)."""
    for r in (S_STEP_IN_EP, S_INVENTORY, S_WAS_OPEN, S_TRADE_STEPS, S_BOUGHT, S_SOLD,
              S_BUY_PX, S_BUY_QTY, S_BUY_QA, S_BUY_QA0, S_BUY_OID,
              S_SELL_PX, S_SELL_QTY, S_SELL_QA, S_SELL_QA0, S_SELL_OID,
              S_MKT_QTY, S_MKT_FLAT, S_MKT_OID):
        si[r, b] = 0 if done else si[r, b]
    for r in (S_BUY_LIVE_AT, S_SELL_LIVE_AT, S_MKT_LIVE_AT):
        si[r, b] = LIVE if done else si[r, b]
    for r in range(N_STATE_F):
        sf[r, b] = float64(0.0) if done else sf[r, b]


@kernel("void(int32[::1], int32[:, ::1], int32[:, ::1], int32[::1], float64[::1], int32[:, ::1], "
        "float64[:, ::1], uint32[::1], float32[:, ::1], float32[:, ::1], int32[:, :, ::1], float64[:, ::1])")
def lobsim_step(actions, events, book, ip, fp, si, sf, rng, obs, out, fills_i, fills_f):
    """One env step of every backtest: action, E events with queue fills, reward / done /
    labels, branch-free auto-reset, observation.

    actions int32[B]; events/book the market tables; ip/fp packed SimParams; si int32[N_STATE_I, B],
    sf float64[N_STATE_F, B], rng uint32[B] (updated); obs float32[B, obs_dim] and out
    float32[N_OUT, B] (written); fills_i int32[B, cap, N_FILL_I] / fills_f float64[B, cap] (ring).
    Launch [sim_grid(B), SIM_BLOCK].
    """
    b = cuda.grid(1)
    if b >= si.shape[1]:
        return
    n_ev = ip[IP_EVENTS_PER_STEP]
    synthetic = ip[IP_SYNTHETIC] != 0
    row0 = b * (n_ev + 1) if synthetic else si[S_CURSOR, b]
    mid_before = mid2(book, row0)

    # 1-2. the action on the snapshot the agent saw; orders with no latency act at once
    place_orders(si, b, actions[b], book, row0, ip)
    closed = activate(si, sf, b, book, row0, ip, fp, fills_i, fills_f)
    # 3-4. replay the step's events against our orders; once the episode closed or no order
    # is left (resting, pending or market), the remaining events cannot touch this backtest
    # and only move its cursor
    j = 0
    while j < n_ev and not closed and has_orders(si, b):
        j += 1
        r1 = row0 + j
        order_event(si, sf, rng, b, SIDE_BUY, S_BUY_PX, events, book, r1 - 1, r1, ip, fp, fills_i, fills_f)
        closed = close_if_flat(si, b)
        if not closed:
            order_event(si, sf, rng, b, SIDE_SELL, S_SELL_PX, events, book, r1 - 1, r1, ip, fp, fills_i, fills_f)
            closed = close_if_flat(si, b)
        si[S_CURSOR, b] += 1
        if not closed:
            closed = activate(si, sf, b, book, r1, ip, fp, fills_i, fills_f)
    si[S_CURSOR, b] += n_ev - j

    # 5. end of step: window, forced flatten, reward, labels
    row_e = row0 + n_ev
    si[S_STEP_IN_EP, b] += 1
    si[S_STEP, b] += 1
    trunc = (not closed) and si[S_STEP_IN_EP, b] >= ip[IP_EPISODE_STEPS]
    inv = si[S_INVENTORY, b]
    if trunc and ip[IP_FORCE_FLATTEN] != 0 and inv != 0:
        oid = si[S_NEXT_OID, b]
        si[S_NEXT_OID, b] = oid + 1
        walk(si, sf, b, SIDE_SELL if inv > 0 else SIDE_BUY, abs(inv), book, row_e, True, oid, ip, fp,
             fills_i, fills_f)
    inv = si[S_INVENTORY, b]
    mid_e = mid2(book, row_e)
    equity = sf[F_CASH, b] + float64(inv) * (float64(mid_e) * (float64(0.5) * fp[FP_TICK_DOLLARS]))
    done = closed or trunc
    trade_done = done and si[S_WAS_OPEN, b] != 0
    out[OUT_REWARD, b] = float32(equity - sf[F_EQUITY, b])
    out[OUT_DONE, b] = float32(1.0) if done else float32(0.0)
    out[OUT_TRUNCATED, b] = float32(1.0) if trunc else float32(0.0)
    out[OUT_TRADE_DONE, b] = float32(1.0) if trade_done else float32(0.0)
    out[OUT_TRADE_PNL, b] = float32(equity) if trade_done else float32(0.0)
    out[OUT_LABEL_UP, b] = float32(1.0) if mid_e > mid_before else float32(0.0)
    out[OUT_LABEL_RET, b] = (float32(float64(mid_e - mid_before) / float64(mid_before))
                             if mid_before != 0 else float32(0.0))
    if inv != 0:
        si[S_TRADE_STEPS, b] += 1
    for k in range(N_MID_HIST - 1, 0, -1):
        si[S_MID_HIST + k, b] = si[S_MID_HIST + k - 1, b]
    si[S_MID_HIST, b] = mid_e
    sf[F_EQUITY, b] = equity
    if done:
        si[S_EPISODE, b] += 1

    # 6. branch-free auto-reset (a start is drawn every step), then the next observation
    start = draw_start(rng, b, ip)
    if not synthetic:
        si[S_CURSOR, b] = start if done else si[S_CURSOR, b]
    select_reset(si, sf, b, done)
    row = row_e if synthetic else si[S_CURSOR, b]
    m_new = mid2(book, row)
    for k in range(N_MID_HIST):
        si[S_MID_HIST + k, b] = m_new if done else si[S_MID_HIST + k, b]
    write_obs(si, sf, b, book, row, ip, fp, obs)


@kernel("void(int32[:, ::1], int32[:, ::1], int32[::1], float64[::1], int32[:, ::1], float64[:, ::1], "
        "uint32[::1], float32[:, ::1], float32[:, ::1])")
def lobsim_reset(events, book, ip, fp, si, sf, rng, obs, out):
    """Start every backtest afresh: counters cleared, a random start cursor (replay), flat,
    no orders, outputs zero, observation written. rng must hold freshly seeded states.
    Launch [sim_grid(B), SIM_BLOCK]."""
    b = cuda.grid(1)
    if b >= si.shape[1]:
        return
    for r in range(N_STATE_I):
        si[r, b] = 0
    for k in range(N_OUT):
        out[k, b] = float32(0.0)
    synthetic = ip[IP_SYNTHETIC] != 0
    start = draw_start(rng, b, ip)
    si[S_CURSOR, b] = 0 if synthetic else start
    select_reset(si, sf, b, True)
    row = b * (ip[IP_EVENTS_PER_STEP] + 1) + ip[IP_EVENTS_PER_STEP] if synthetic else si[S_CURSOR, b]
    m = mid2(book, row)
    for k in range(N_MID_HIST):
        si[S_MID_HIST + k, b] = m
    write_obs(si, sf, b, book, row, ip, fp, obs)
