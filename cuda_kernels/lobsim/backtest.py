"""One backtest's env step, phase by phase (SPEC numbering of lobsim_step): the device functions
``lobsim_step`` runs on a thread's register copy of its state, and that the CPU build
(alpharl.sim.cpu) compiles for the host, so both walk one definition of the step.

Each works on ``st`` / ``fs`` / ``rs`` (the state rows, agent.py) with the market read flat
through ``word`` from ``mb`` / ``me`` (the book and event tables, or a block's staged copy of
them) at word offsets; ``book`` is always the global book table (the rows a feed latency shows
may lie outside the staged ones)."""
from __future__ import annotations

import math

from numba import cuda, float32, float64, int32, uint32

from alpharl.cuda_kernels.lobsim.agent import close_if_flat, order_event, place_instructions, place_orders, walk
from alpharl.cuda_kernels.lobsim.book import level_caps, mid2, mid2_of, word
from alpharl.cuda_kernels.lobsim.observe import delay_own, write_obs
from alpharl.cuda_kernels.lobsim.switches import (FEED_DELAY, INSTRUCTIONS, QUADRATIC_PENALTY, RESP_DELAY,
                                                  SIGMA_PENALTY, SYNTHETIC, TIMED_ENTRY)
from alpharl.lobster.format import ASK_PRICE, BID_PRICE
from alpharl.prng import xorshift32
from alpharl.sim.layout import (BOOK_COLS, EV_DIR, EV_PRICE, EV_SIZE, EV_TYPE, FP_INV_PENALTY, FP_INV_PENALTY_Q2,
                                FP_TICK_DOLLARS, F_CASH, F_EQUITY, F_TRIP_BASE, F_VOL_MSQ, IP_EPISODE_STEPS,
                                IP_EVENTS_PER_STEP, IP_FEED_DELAY, IP_FORCE_FLATTEN, IP_LATENCY, IP_LEVELS, IP_LOT,
                                IP_PENALTY_QUADRATIC, IP_PENALTY_UNIT, IP_RESP_DELAY, IP_START_SPAN, IP_SYNTHETIC,
                                IP_TIMED_ENTRY, LIVE, N_EPISODE_F, N_MID_HIST, N_OUT, N_STATE_F, N_STATE_I, OUT_DONE,
                                OUT_LABEL_RET, OUT_LABEL_UP, OUT_REWARD, OUT_TRADE_DONE, OUT_TRADE_PNL, OUT_TRUNCATED,
                                PENALTY_SIGMA, SIDE_BUY, SIDE_SELL, S_BOUGHT, S_BUY_LIVE_AT, S_BUY_LIVE_ROW, S_BUY_OID,
                                S_BUY_PEG, S_BUY_POST, S_BUY_PX, S_BUY_QA, S_BUY_QA0, S_BUY_QTY, S_CURSOR, S_EPISODE,
                                S_INVENTORY, S_MID_HIST, S_MKT_FLAT, S_MKT_LIVE_AT, S_MKT_OID, S_MKT_QTY, S_NEXT_OID,
                                S_SELL_LIVE_AT, S_SELL_LIVE_ROW, S_SELL_OID, S_SELL_PEG, S_SELL_POST, S_SELL_PX,
                                S_SELL_QA, S_SELL_QA0, S_SELL_QTY, S_SOLD, S_STEP, S_STEP_IN_EP, S_TRADE_STEPS,
                                S_TRIPS, S_VOL_STEPS, S_WAS_OPEN, VOL_HORIZON)


@cuda.jit(device=True)
def draw_start(rs, pi):
    """Advance the PRNG state rs[0] one step; a uniform episode start in [0, span), span the
    packed IP_START_SPAN (layout.pack_params: the whole window fits in the data; one pass: 1)."""
    x = xorshift32(rs[0])
    rs[0] = x
    return int32(x % uint32(pi[IP_START_SPAN]))


@cuda.jit(device=True)
def has_orders(st):
    """True while the backtest has a resting, pending or market order."""
    return st[S_BUY_QTY] > 0 or st[S_SELL_QTY] > 0 or st[S_MKT_QTY] != 0 or st[S_MKT_FLAT] != 0


@cuda.jit(device=True)
def select_reset(st, fs, done):
    """Branch-free reset of the episode state: every field keeps its value or, when ``done``,
    takes the fresh-episode value (orders gone, flat, zero money); the market's volatility estimate
    (S_VOL_STEPS, F_VOL_MSQ) carries on."""
    for r in (S_STEP_IN_EP, S_INVENTORY, S_WAS_OPEN, S_TRADE_STEPS, S_BOUGHT, S_SOLD,
              S_BUY_PX, S_BUY_QTY, S_BUY_QA, S_BUY_QA0, S_BUY_OID, S_BUY_LIVE_ROW,
              S_SELL_PX, S_SELL_QTY, S_SELL_QA, S_SELL_QA0, S_SELL_OID, S_SELL_LIVE_ROW,
              S_MKT_QTY, S_MKT_FLAT, S_MKT_OID, S_BUY_POST, S_SELL_POST, S_BUY_PEG, S_SELL_PEG):
        st[r] = 0 if done else st[r]
    for r in (S_BUY_LIVE_AT, S_SELL_LIVE_AT, S_MKT_LIVE_AT):
        st[r] = LIVE if done else st[r]
    for r in range(N_EPISODE_F):
        fs[r] = float64(0.0) if done else fs[r]


@cuda.jit(device=True)
def send_orders(st, act, orders, b, mb, sb0, book, row0, width, live_rows, seen_rows, pi):
    """1. The action ``act`` and the order instructions on the snapshot the agent saw (feed
    latency: an older row, read from the global ``book``); the cursor's snapshot is at ``sb0`` in
    ``mb``. Its orders go live latency_events later, or at the row the entry latency in time
    reaches (host-computed ``live_rows``)."""
    seen_b, seen_at = mb, sb0
    if FEED_DELAY and pi[IP_FEED_DELAY] != 0:
        seen_b, seen_at = book, seen_rows[row0] * width
    live_at = live_rows[row0] if TIMED_ENTRY and pi[IP_TIMED_ENTRY] != 0 else st[S_CURSOR] + pi[IP_LATENCY]
    place_orders(st, act, word(seen_b, seen_at + ASK_PRICE), word(seen_b, seen_at + BID_PRICE), mb, sb0,
                 seen_b, seen_at, live_at, pi)
    if INSTRUCTIONS:
        place_instructions(st, orders, b, mb, sb0, seen_b, seen_at, live_at, pi)


@cuda.jit(device=True)
def replay_event(st, fs, rs, b, me, e1, mb, at1, ask1, bid1, width, arrived, pi, pf, fills_i, fills_f, fills_t,
                 times):
    """3-4. The event at ``e1`` in ``me`` (row cursor + 1; the book after it at ``at1``, its best ask
    / bid ask1 / bid1) against the resting orders, buy first; the cursor moves onto it. Returns
    True when a fill closed the round trip and that ended the episode."""
    t = word(me, e1 + EV_TYPE)
    d = word(me, e1 + EV_DIR)
    s = word(me, e1 + EV_SIZE)
    p = word(me, e1 + EV_PRICE)
    # the queue caps at the orders' prices (read only for live orders)
    cap_buy, cap_sell = level_caps(mb, at1, st[S_BUY_PX], st[S_SELL_PX], pi[IP_LEVELS])
    order_event(st, fs, rs, b, SIDE_BUY, S_BUY_PX, t, d, s, p, ask1, bid1, cap_buy, mb, at1 - width,
                arrived, pi, pf, fills_i, fills_f, fills_t, times)
    closed = close_if_flat(st, fs, pi)
    if not closed:
        order_event(st, fs, rs, b, SIDE_SELL, S_SELL_PX, t, d, s, p, ask1, bid1, cap_sell, mb,
                    at1 - width, arrived, pi, pf, fills_i, fills_f, fills_t, times)
        closed = close_if_flat(st, fs, pi)
    st[S_CURSOR] += 1
    return closed


@cuda.jit(device=True)
def penalty_ticks(fs, pi, pf, held):
    """Ticks per share held of the step's holding penalty at ``held`` shares (float64): lambda, plus
    lambda_2 x held / lot with inventory_penalty_quadratic, times sigma with inventory_penalty_unit
    "sigma" (sigma = sqrt(F_VOL_MSQ), the RMS mid change per step seen before it)."""
    lam = pf[FP_INV_PENALTY]
    if QUADRATIC_PENALTY and pi[IP_PENALTY_QUADRATIC] != 0:
        lam = lam + pf[FP_INV_PENALTY_Q2] * (held / float64(pi[IP_LOT]))
    if SIGMA_PENALTY and pi[IP_PENALTY_UNIT] == PENALTY_SIGMA:
        lam = lam * math.sqrt(fs[F_VOL_MSQ])
    return lam


@cuda.jit(device=True)
def observe_move(st, fs, mid_before, mid_e):
    """Fold the step's mid change x (ticks; doubled mids ``mid_before`` -> ``mid_e``; skipped without
    a mid at either end) into the mean square F_VOL_MSQ: m += (x^2 - m) / n, n = the steps seen capped
    at VOL_HORIZON (the running mean, then an EMA of that horizon)."""
    if mid_before != 0 and mid_e != 0:
        n = min(st[S_VOL_STEPS] + 1, VOL_HORIZON)
        st[S_VOL_STEPS] = n
        dm = float64(mid_e - mid_before) * float64(0.5)      # ticks
        fs[F_VOL_MSQ] = fs[F_VOL_MSQ] + (dm * dm - fs[F_VOL_MSQ]) / float64(n)


@cuda.jit(device=True)
def end_step(st, fs, b, mb, at_e, row_e, closed, mid_before, trips0, base0, book, seen_rows, width, pi, pf, out,
             fills_i, fills_f, fills_t, times):
    """5. End of step on its last book row ``row_e`` (at ``at_e`` in ``mb``): window, forced flatten,
    reward, labels, the market's volatility estimate, the mid history. ``trips0`` / ``base0``: round
    trips and trip base before the step. Returns (done, the mid after the step)."""
    st[S_STEP_IN_EP] += 1
    st[S_STEP] += 1
    trunc = (not closed) and st[S_STEP_IN_EP] >= pi[IP_EPISODE_STEPS]
    inv = st[S_INVENTORY]
    if trunc and pi[IP_FORCE_FLATTEN] != 0 and inv != 0:
        oid = st[S_NEXT_OID]
        st[S_NEXT_OID] = oid + 1
        walk(st, fs, b, SIDE_SELL if inv > 0 else SIDE_BUY, abs(inv), mb, at_e, True, oid, pi, pf,
             fills_i, fills_f, fills_t, times)
    inv = st[S_INVENTORY]
    mid_e = mid2_of(word(mb, at_e + ASK_PRICE), word(mb, at_e + BID_PRICE))
    equity = fs[F_CASH] + float64(inv) * (float64(mid_e) * (float64(0.5) * pf[FP_TICK_DOLLARS]))
    done = closed or trunc
    open_end = trunc and st[S_WAS_OPEN] != 0      # the window ends a trade still open
    trade_done = st[S_TRIPS] != trips0 or open_end
    base = fs[F_TRIP_BASE]
    # ((lambda [+ lambda_2 |q| / lot]) [x sigma]) x |q| x tick in this order: "tick" without lambda_2 is
    # bit for bit the term before the unit and the quadratic term
    held = float64(abs(inv))
    penalty = float32(penalty_ticks(fs, pi, pf, held) * held * pf[FP_TICK_DOLLARS])
    out[OUT_REWARD, b] = float32(equity - fs[F_EQUITY]) - penalty
    out[OUT_DONE, b] = float32(1.0) if done else float32(0.0)
    out[OUT_TRUNCATED, b] = float32(1.0) if trunc else float32(0.0)
    out[OUT_TRADE_DONE, b] = float32(1.0) if trade_done else float32(0.0)
    out[OUT_TRADE_PNL, b] = float32((base - base0) + (equity - base if open_end else float64(0.0)))
    out[OUT_LABEL_UP, b] = float32(1.0) if mid_e > mid_before else float32(0.0)
    out[OUT_LABEL_RET, b] = (float32(float64(mid_e - mid_before) / float64(mid_before))
                             if mid_before != 0 else float32(0.0))
    observe_move(st, fs, mid_before, mid_e)                  # after the penalty: it used the past only
    if inv != 0:
        st[S_TRADE_STEPS] += 1
    for k in range(N_MID_HIST - 1, 0, -1):
        st[S_MID_HIST + k] = st[S_MID_HIST + k - 1]
    # the observation's mids and book come from the seen rows under a feed latency
    st[S_MID_HIST] = mid2(book, seen_rows[row_e] * width) if FEED_DELAY and pi[IP_FEED_DELAY] != 0 else mid_e
    fs[F_EQUITY] = equity
    if done:
        st[S_EPISODE] += 1
    return done, mid_e


@cuda.jit(device=True)
def restart(st, fs, rs, done, row_e, pi):
    """6. Branch-free auto-reset: a start is drawn every step, ``done`` selects the reset state.
    Returns the row the next observation reads (the new start, or row_e going on)."""
    start = draw_start(rs, pi)
    synthetic = SYNTHETIC and pi[IP_SYNTHETIC] != 0
    if not synthetic:
        st[S_CURSOR] = start if done else st[S_CURSOR]
    select_reset(st, fs, done)
    return row_e if synthetic else st[S_CURSOR]


@cuda.jit(device=True)
def observe_next(st, fs, b, mb, at, row, row_e, mid_e, done, book, seen_rows, resp_rows, resp_ring, width, pi, pf,
                 obs, orow):
    """6. The next observation from the book row ``row`` (at ``at`` in ``mb``; the seen row of the
    global ``book`` under a feed latency); an episode that restarts fills its mid history with the
    new start's mid. Under a response latency its own-state part is an older one (delay_own). It is
    written to the row ``orow`` of ``obs`` (b, or the thread's row of a block's staged rows)."""
    ob_b, ob_at = mb, at
    if FEED_DELAY and pi[IP_FEED_DELAY] != 0:
        ob_b, ob_at = book, seen_rows[row] * width
        m_new = mid2(ob_b, ob_at)
    else:
        m_new = mid_e if row == row_e else mid2_of(word(mb, at + ASK_PRICE), word(mb, at + BID_PRICE))
    for k in range(N_MID_HIST):
        st[S_MID_HIST + k] = m_new if done else st[S_MID_HIST + k]
    write_obs(st, fs, orow, ob_b, ob_at, pi, pf, obs)
    if RESP_DELAY and pi[IP_RESP_DELAY] != 0:
        delay_own(st, b, row, done, resp_rows, resp_ring, pi, obs, orow)


@cuda.jit(device=True)
def start_backtest(st, fs, rs, b, book, seen_rows, resp_rows, resp_ring, pi, pf, obs, out):
    """Backtest b afresh (lobsim_reset): counters cleared, a random start cursor (replay) drawn from
    the freshly seeded rs, flat, no orders, outputs zero, observation written (of the seen row with
    a feed latency)."""
    for r in range(N_STATE_I):
        st[r] = 0
    for r in range(N_STATE_F):
        fs[r] = float64(0.0)
    for k in range(N_OUT):
        out[k, b] = float32(0.0)
    synthetic = SYNTHETIC and pi[IP_SYNTHETIC] != 0
    start = draw_start(rs, pi)
    st[S_CURSOR] = 0 if synthetic else start
    select_reset(st, fs, True)
    row = b * (pi[IP_EVENTS_PER_STEP] + 1) + pi[IP_EVENTS_PER_STEP] if synthetic else st[S_CURSOR]
    if FEED_DELAY and pi[IP_FEED_DELAY] != 0:
        row = seen_rows[row]
    at = row * BOOK_COLS * pi[IP_LEVELS]
    m = mid2_of(word(book, at + ASK_PRICE), word(book, at + BID_PRICE))
    for k in range(N_MID_HIST):
        st[S_MID_HIST + k] = m
    write_obs(st, fs, b, book, at, pi, pf, obs)
    if RESP_DELAY and pi[IP_RESP_DELAY] != 0:
        delay_own(st, b, st[S_CURSOR], True, resp_rows, resp_ring, pi, obs, b)
