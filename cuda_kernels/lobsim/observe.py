"""The observation vector of SPEC §3.5, written by one thread per backtest.

Layout, units and the "no level" encoding are alpharl.sim.layout's (OBS_* / OBX_*);
NumPy twin in alpharl.reference.lobsim.observe. ``write_obs`` serves lobsim_step and
lobsim_reset; step.py's ``lobsim_observe`` (test_only) runs it alone on given snapshots and
states, so the tests compare it with its twin on random books of any depth."""
from __future__ import annotations

import math

from numba import cuda, float32, float64

from alpharl.cuda_kernels.lobsim.book import mid2_of, word
from alpharl.lobster.format import ASK_PRICE, ASK_SIZE, BID_PRICE, BID_SIZE, BOOK_COLS_PER_LEVEL
from alpharl.sim.layout import (ASK_EMPTY, BID_EMPTY, F_AVG_PX, FP_TICK_DOLLARS, IP_EPISODE_STEPS, IP_LEVELS, IP_LOT,
                                IP_MAX_POS, IP_OBS_LEVELS, LIVE, N_OWN_OBS, O_LIVE_AT, O_PX, O_QA, O_QTY,
                                OBS_LEVEL_ASK_LOGSZ, OBS_LEVEL_ASK_OFF, OBS_LEVEL_BID_LOGSZ, OBS_LEVEL_BID_OFF,
                                OBS_PER_LEVEL, OBX_BUY_FLAG,
                                OBX_IMB1, OBX_IMB_DEPTH, OBX_OWN, OBX_POSITION, OBX_RET, OBX_SELL_FLAG, OBX_SPREAD,
                                OBX_TIME_IN_TRADE, OBX_TIME_LEFT, OBX_UPNL, RET_LAG_0, RET_LAG_1, RET_LAG_2, RET_LAG_3,
                                RESP_RING, RESP_ROW, RESP_SINCE_START, RESP_VALUES, RESP_WIDTH, S_BUY_PX, S_INVENTORY,
                                S_MID_HIST, S_RESP_STALE, S_SELL_PX, S_STEP_IN_EP, S_TRADE_STEPS)

#: Flag value of an order still waiting out its entry latency (1 = live).
PENDING_FLAG = 0.5
#: Offsets of an order's queue and price-offset features from its flag.
FLAG_TO_QUEUE = 1
FLAG_TO_OFF = 2


@cuda.jit(device=True)
def ratio(num, den):
    """num / den in float32; 0 when den is 0."""
    if den == 0:
        return float32(0.0)
    return float32(num) / float32(den)


@cuda.jit(device=True)
def log_size(z, unit):
    """log1p(z / unit) in float32: a size in units of the mean touch size (layout.py); 0 when unit is 0."""
    if unit == float32(0.0):
        return float32(0.0)
    return math.log1p(float32(z) / unit)


@cuda.jit(device=True)
def order_features(st, b, base, sgn, m, unit, obs, k):
    """flag, log1p(queue ahead / unit), signed price offset from mid (ticks) of one resting order."""
    half = float32(0.5)
    qty = st[base + O_QTY]
    live = qty > 0 and st[base + O_LIVE_AT] == LIVE
    obs[b, k] = float32(1.0) if live else (float32(PENDING_FLAG) if qty > 0 else float32(0.0))
    obs[b, k + FLAG_TO_QUEUE] = log_size(st[base + O_QA], unit) if live else float32(0.0)
    obs[b, k + FLAG_TO_OFF] = float32(sgn * (2 * st[base + O_PX] - m)) * half if qty > 0 else float32(0.0)


@cuda.jit(device=True)
def write_obs(st, fs, b, book, at, pi, pf, obs):
    """obs[b, :] from the snapshot at ``at`` (flat book, see book.py) and backtest b's state
    ``st`` / ``fs`` (register copies, see lobsim_step; ``pi`` / ``pf`` the packed parameters).
    Book levels 1..min(L, obs_levels) are read; levels past L up to obs_levels are padded."""
    half = float32(0.5)
    zero = float32(0.0)
    # the best level once, before any obs store (the compiler cannot tell obs from book apart)
    a1 = word(book, at + ASK_PRICE)
    b1 = word(book, at + BID_PRICE)
    as1 = word(book, at + ASK_SIZE)
    bs1 = word(book, at + BID_SIZE)
    m = mid2_of(a1, b1)
    # the size unit: the mean touch size, shares (float32 sum: no int32 overflow; exact below 2^24)
    unit = (float32(as1) + float32(bs1)) * half
    nl = pi[IP_LEVELS]
    no = pi[IP_OBS_LEVELS]
    seen = min(nl, no)
    depth_a = 0
    depth_b = 0
    for lv in range(seen):
        c = lv * BOOK_COLS_PER_LEVEL
        k = lv * OBS_PER_LEVEL
        a = word(book, at + c + ASK_PRICE)
        az = word(book, at + c + ASK_SIZE)
        bd = word(book, at + c + BID_PRICE)
        bz = word(book, at + c + BID_SIZE)
        if a != ASK_EMPTY:
            obs[b, k + OBS_LEVEL_ASK_OFF] = float32(2 * a - m) * half
            obs[b, k + OBS_LEVEL_ASK_LOGSZ] = log_size(az, unit)
            depth_a += az
        else:
            obs[b, k + OBS_LEVEL_ASK_OFF] = zero
            obs[b, k + OBS_LEVEL_ASK_LOGSZ] = zero
        if bd != BID_EMPTY:
            obs[b, k + OBS_LEVEL_BID_OFF] = float32(m - 2 * bd) * half
            obs[b, k + OBS_LEVEL_BID_LOGSZ] = log_size(bz, unit)
            depth_b += bz
        else:
            obs[b, k + OBS_LEVEL_BID_OFF] = zero
            obs[b, k + OBS_LEVEL_BID_LOGSZ] = zero
    for k in range(seen * OBS_PER_LEVEL, no * OBS_PER_LEVEL):   # levels the file does not have
        obs[b, k] = zero
    x = OBS_PER_LEVEL * no
    obs[b, x + OBX_SPREAD] = float32(a1 - b1) if (a1 != ASK_EMPTY and b1 != BID_EMPTY) else zero
    obs[b, x + OBX_IMB1] = ratio(bs1 - as1, bs1 + as1)
    obs[b, x + OBX_IMB_DEPTH] = ratio(depth_b - depth_a, depth_b + depth_a)
    h0 = st[S_MID_HIST]
    obs[b, x + OBX_RET + 0] = float32(h0 - st[S_MID_HIST + RET_LAG_0]) * half
    obs[b, x + OBX_RET + 1] = float32(h0 - st[S_MID_HIST + RET_LAG_1]) * half
    obs[b, x + OBX_RET + 2] = float32(h0 - st[S_MID_HIST + RET_LAG_2]) * half
    obs[b, x + OBX_RET + 3] = float32(h0 - st[S_MID_HIST + RET_LAG_3]) * half
    inv = st[S_INVENTORY]
    obs[b, x + OBX_POSITION] = float32(inv) / float32(pi[IP_MAX_POS])
    tick_d = pf[FP_TICK_DOLLARS]
    if inv != 0:
        mid_d = float64(m) * (float64(0.5) * tick_d)
        obs[b, x + OBX_UPNL] = float32(float64(inv) * (mid_d - fs[F_AVG_PX]) / (float64(pi[IP_LOT]) * tick_d))
    else:
        obs[b, x + OBX_UPNL] = zero
    order_features(st, b, S_BUY_PX, -1, m, unit, obs, x + OBX_BUY_FLAG)
    order_features(st, b, S_SELL_PX, 1, m, unit, obs, x + OBX_SELL_FLAG)
    steps = float32(pi[IP_EPISODE_STEPS])
    obs[b, x + OBX_TIME_IN_TRADE] = float32(st[S_TRADE_STEPS]) / steps
    obs[b, x + OBX_TIME_LEFT] = float32(pi[IP_EPISODE_STEPS] - st[S_STEP_IN_EP]) / steps



@cuda.jit(device=True)
def delay_own(st, b, row, fresh, resp_rows, ring, pi, obs, orow):
    """Response latency (SimParams.response_latency_ns) on the observation write_obs just wrote at
    row ``row``: its own-state values enter the ring ``ring`` (float64[N_RESP, B], layout RESP_*) as
    the newest entry, or with ``fresh`` (an episode start, known at once) fill every entry stamped
    RESP_SINCE_START; obs then shows the newest entry at a row <= resp_rows[row]. Entries are newest
    first at falling rows, so the entries at or before that row are a tail: its first is the newest.
    With none (the latency spans more step ends than the ring holds) the oldest is shown and counted
    in S_RESP_STALE. Backtest b's observation is the row ``orow`` of ``obs`` (b, or its row of a
    block's staged rows: lobsim_step)."""
    x = OBS_PER_LEVEL * pi[IP_OBS_LEVELS] + OBX_OWN
    for e in range(RESP_RING - 1, -1, -1):
        at = e * RESP_WIDTH
        if fresh or e == 0:
            ring[at + RESP_ROW, b] = float64(RESP_SINCE_START if fresh else row)
            for k in range(N_OWN_OBS):
                ring[at + RESP_VALUES + k, b] = float64(obs[orow, x + k])
        else:
            for w in range(RESP_WIDTH):
                ring[at + w, b] = ring[at - RESP_WIDTH + w, b]
    want = float64(resp_rows[row])
    pick = RESP_RING - 1
    found = False
    for e in range(RESP_RING - 1, -1, -1):
        if ring[e * RESP_WIDTH + RESP_ROW, b] <= want:
            pick = e
            found = True
    if not found:
        st[S_RESP_STALE] += 1
    at = pick * RESP_WIDTH + RESP_VALUES
    for k in range(N_OWN_OBS):
        obs[orow, x + k] = float32(ring[at + k, b])
