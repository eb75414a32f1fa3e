"""NumPy twin of cuda_kernels/lobsim/observe.py: the observation row of every backtest
(layout: alpharl.sim.layout OBS_* / OBX_*), float32 as on the device."""
from __future__ import annotations

import numpy as np

from alpharl.lobster.format import ASK_PRICE, ASK_SIZE, BID_PRICE, BID_SIZE
from alpharl.reference.lobsim.book import col, mid2
from alpharl.sim import layout as L


def write_obs(sim, rows):
    """Write ``sim.obs_buf`` from the snapshots ``rows`` and the state of each backtest."""
    si, sf, p = sim.state_i, sim.state_f, sim.params
    o = sim.obs_buf
    f32 = np.float32
    half = f32(0.5)
    m = mid2(sim.book, rows).astype(np.int64)
    bk = sim.book[rows].astype(np.int64)
    nl = sim.levels
    depth_a = np.zeros(sim.B, np.int64)
    depth_b = np.zeros(sim.B, np.int64)
    for lv in range(nl):
        a, az = bk[:, col(lv, ASK_PRICE)], bk[:, col(lv, ASK_SIZE)]
        bd, bz = bk[:, col(lv, BID_PRICE)], bk[:, col(lv, BID_SIZE)]
        ha, hb = a != L.ASK_EMPTY, bd != L.BID_EMPTY
        k = lv * L.OBS_PER_LEVEL
        o[:, k + L.OBS_LEVEL_ASK_OFF] = np.where(ha, (2 * a - m).astype(f32) * half, f32(0))
        o[:, k + L.OBS_LEVEL_ASK_LOGSZ] = np.where(ha, np.log1p(az.astype(f32)), f32(0))
        o[:, k + L.OBS_LEVEL_BID_OFF] = np.where(hb, (m - 2 * bd).astype(f32) * half, f32(0))
        o[:, k + L.OBS_LEVEL_BID_LOGSZ] = np.where(hb, np.log1p(bz.astype(f32)), f32(0))
        depth_a += np.where(ha, az, 0)
        depth_b += np.where(hb, bz, 0)
    x = L.OBS_PER_LEVEL * nl
    a1, b1 = bk[:, ASK_PRICE], bk[:, BID_PRICE]
    as1, bs1 = bk[:, ASK_SIZE], bk[:, BID_SIZE]
    both = (a1 != L.ASK_EMPTY) & (b1 != L.BID_EMPTY)
    o[:, x + L.OBX_SPREAD] = np.where(both, (a1 - b1).astype(f32), f32(0))
    o[:, x + L.OBX_IMB1] = ratio(bs1 - as1, bs1 + as1)
    o[:, x + L.OBX_IMB_DEPTH] = ratio(depth_b - depth_a, depth_b + depth_a)
    for k, lag in enumerate(L.RETURN_LAGS):
        d = si[L.S_MID_HIST].astype(np.int64) - si[L.S_MID_HIST + lag]
        o[:, x + L.OBX_RET + k] = d.astype(f32) * half
    inv = si[L.S_INVENTORY]
    o[:, x + L.OBX_POSITION] = inv.astype(f32) / f32(p.max_position)
    mid_d = m.astype(np.float64) * (0.5 * sim.tick_dollars)
    upnl = inv * (mid_d - sf[L.F_AVG_PX]) / (p.lot_size * sim.tick_dollars)
    o[:, x + L.OBX_UPNL] = np.where(inv != 0, upnl, 0.0).astype(f32)
    for base, flag, sgn in ((L.S_BUY_PX, L.OBX_BUY_FLAG, -1), (L.S_SELL_PX, L.OBX_SELL_FLAG, 1)):
        has = si[base + L.O_QTY] > 0
        live = has & (si[base + L.O_LIVE_AT] == L.LIVE)
        o[:, x + flag] = np.where(live, f32(1), np.where(has, half, f32(0)))
        o[:, x + flag + 1] = np.where(live, np.log1p(si[base + L.O_QA].astype(f32)), f32(0))
        off = sgn * (2 * si[base + L.O_PX].astype(np.int64) - m)
        o[:, x + flag + 2] = np.where(has, off.astype(f32) * half, f32(0))
    steps = f32(p.episode_steps)
    o[:, x + L.OBX_TIME_IN_TRADE] = si[L.S_TRADE_STEPS].astype(f32) / steps
    o[:, x + L.OBX_TIME_LEFT] = (p.episode_steps - si[L.S_STEP_IN_EP]).astype(f32) / steps


def ratio(num, den):
    """num / den in float32, 0 where den is 0."""
    f32 = np.float32
    safe = np.where(den != 0, den, 1).astype(f32)
    return np.where(den != 0, num.astype(f32) / safe, f32(0))
