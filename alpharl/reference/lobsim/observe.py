"""NumPy twin of cuda_kernels/lobsim/observe.py: the observation row of every backtest
(layout, units and the "no level" encoding: alpharl.sim.layout OBS_* / OBX_*), float32 as on
the device."""
from __future__ import annotations

import numpy as np

from alpharl.lobster.format import ASK_PRICE, ASK_SIZE, BID_PRICE, BID_SIZE
from alpharl.reference.lobsim.book import col, mid2
from alpharl.sim import layout as L

_F32 = np.float32


def write_obs(obs, book, rows, si, sf, ip, fp):
    """Write ``obs`` float32[B, obs_dim(obs_levels)] from the snapshots ``book[rows]`` (int32
    [rows, 4L]) and the state si / sf of each backtest; ip / fp the packed parameters (L and
    obs_levels from ip). The arguments of the kernel's lobsim_observe."""
    half = _F32(0.5)
    m = mid2(book, rows).astype(np.int64)
    bk = book[rows].astype(np.int64)
    nl, no = int(ip[L.IP_LEVELS]), int(ip[L.IP_OBS_LEVELS])
    n = len(rows)
    a1, b1 = bk[:, ASK_PRICE], bk[:, BID_PRICE]
    as1, bs1 = bk[:, ASK_SIZE], bk[:, BID_SIZE]
    unit = (as1.astype(_F32) + bs1.astype(_F32)) * half     # mean touch size, shares
    depth_a = np.zeros(n, np.int64)
    depth_b = np.zeros(n, np.int64)
    seen = min(nl, no)
    for lv in range(seen):
        a, az = bk[:, col(lv, ASK_PRICE)], bk[:, col(lv, ASK_SIZE)]
        bd, bz = bk[:, col(lv, BID_PRICE)], bk[:, col(lv, BID_SIZE)]
        ha, hb = a != L.ASK_EMPTY, bd != L.BID_EMPTY
        k = lv * L.OBS_PER_LEVEL
        obs[:, k + L.OBS_LEVEL_ASK_OFF] = np.where(ha, (2 * a - m).astype(_F32) * half, _F32(0))
        obs[:, k + L.OBS_LEVEL_ASK_LOGSZ] = np.where(ha, log_size(az, unit), _F32(0))
        obs[:, k + L.OBS_LEVEL_BID_OFF] = np.where(hb, (m - 2 * bd).astype(_F32) * half, _F32(0))
        obs[:, k + L.OBS_LEVEL_BID_LOGSZ] = np.where(hb, log_size(bz, unit), _F32(0))
        depth_a += np.where(ha, az, 0)
        depth_b += np.where(hb, bz, 0)
    obs[:, seen * L.OBS_PER_LEVEL:no * L.OBS_PER_LEVEL] = 0    # levels the file does not have
    x = L.obx_base(no)
    both = (a1 != L.ASK_EMPTY) & (b1 != L.BID_EMPTY)
    obs[:, x + L.OBX_SPREAD] = np.where(both, (a1 - b1).astype(_F32), _F32(0))
    obs[:, x + L.OBX_IMB1] = ratio(bs1 - as1, bs1 + as1)
    obs[:, x + L.OBX_IMB_DEPTH] = ratio(depth_b - depth_a, depth_b + depth_a)
    for k, lag in enumerate(L.RETURN_LAGS):
        d = si[L.S_MID_HIST].astype(np.int64) - si[L.S_MID_HIST + lag]
        obs[:, x + L.OBX_RET + k] = d.astype(_F32) * half
    inv = si[L.S_INVENTORY]
    obs[:, x + L.OBX_POSITION] = inv.astype(_F32) / _F32(ip[L.IP_MAX_POS])
    tick_d = float(fp[L.FP_TICK_DOLLARS])
    mid_d = m.astype(np.float64) * (0.5 * tick_d)
    upnl = inv * (mid_d - sf[L.F_AVG_PX]) / (float(ip[L.IP_LOT]) * tick_d)
    obs[:, x + L.OBX_UPNL] = np.where(inv != 0, upnl, 0.0).astype(_F32)
    for base, flag, sgn in ((L.S_BUY_PX, L.OBX_BUY_FLAG, -1), (L.S_SELL_PX, L.OBX_SELL_FLAG, 1)):
        has = si[base + L.O_QTY] > 0
        live = has & (si[base + L.O_LIVE_AT] == L.LIVE)
        obs[:, x + flag] = np.where(live, _F32(1), np.where(has, half, _F32(0)))
        obs[:, x + flag + 1] = np.where(live, log_size(si[base + L.O_QA], unit), _F32(0))
        off = sgn * (2 * si[base + L.O_PX].astype(np.int64) - m)
        obs[:, x + flag + 2] = np.where(has, off.astype(_F32) * half, _F32(0))
    steps = _F32(ip[L.IP_EPISODE_STEPS])
    obs[:, x + L.OBX_TIME_IN_TRADE] = si[L.S_TRADE_STEPS].astype(_F32) / steps
    obs[:, x + L.OBX_TIME_LEFT] = (ip[L.IP_EPISODE_STEPS] - si[L.S_STEP_IN_EP]).astype(_F32) / steps


def delay_own(ring, si, obs, rows, fresh, resp_rows, ip):
    """Response latency on the observation ``obs`` just written at the rows ``rows``: its own-state
    values enter ``ring`` (float64[N_RESP, B]) as the newest entry (``fresh``, an episode start: every
    entry, stamped RESP_SINCE_START); obs then shows the newest entry at a row <= resp_rows[rows]
    (entries fall in row, so those are a tail), else the oldest (counted in si[S_RESP_STALE])."""
    B = obs.shape[0]
    ring = ring.reshape(L.RESP_RING, L.RESP_WIDTH, B)
    x = L.obx_base(int(ip[L.IP_OBS_LEVELS])) + L.OBX_OWN
    own = slice(x, x + L.N_OWN_OBS)
    now = np.concatenate([np.where(fresh, L.RESP_SINCE_START, rows)[None, :].astype(np.float64),
                          obs[:, own].T.astype(np.float64)])
    ring[:] = np.where(fresh[None, None, :], now[None], np.concatenate([now[None], ring[:-1]]))
    held = ring[:, L.RESP_ROW] <= resp_rows[rows]                    # [RESP_RING, B]
    found = held.any(axis=0)
    pick = np.where(found, held.argmax(axis=0), L.RESP_RING - 1)
    si[L.S_RESP_STALE] += ~found
    obs[:, own] = ring[pick, L.RESP_VALUES:, np.arange(B)].astype(_F32)


def log_size(z, unit):
    """log1p(z / unit) in float32 (a size in units of the mean touch size), 0 where unit is 0."""
    safe = np.where(unit != 0, unit, _F32(1))
    return np.where(unit != 0, np.log1p(z.astype(_F32) / safe), _F32(0))


def ratio(num, den):
    """num / den in float32, 0 where den is 0."""
    safe = np.where(den != 0, den, 1).astype(_F32)
    return np.where(den != 0, num.astype(_F32) / safe, _F32(0))
