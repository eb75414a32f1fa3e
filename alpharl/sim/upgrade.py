"""Simulator states written by earlier versions, read in today's layout.

A checkpoint holds the simulator's state arrays; fields added since are filled
with the value they would have had: 0 (the round trips counted since reset, the
equity at the last round trip: in the only episode mode those versions had, an
episode starts flat at cash 0; the stale reads of a response latency they did not have), the fills
ring's new fields (``upgrade_ring``) and an empty own-state ring of the response latency.
The market's volatility estimate (``vol_steps``, ``vol_msq``) reads 0, "nothing seen
yet": it starts afresh from the next step, as after reset()."""
from __future__ import annotations

import numpy as np

from alpharl.sim import layout as L


def upgrade_ring(d: dict) -> dict:
    """A simulator state_dict ``d`` written before the fill records held their time and queue at
    fill, in today's layout: those fields of its records read 0 (NO_TIME for the time)."""
    fi = d["fills_i"]
    if "fills_t" in d and fi.shape[-1] == L.N_FILL_I:
        return d
    ring = np.zeros(fi.shape[:-1] + (L.N_FILL_I,), fi.dtype)
    ring[..., :fi.shape[-1]] = fi
    return d | {"fills_i": ring, "fills_t": np.full(fi.shape[:-1], L.NO_TIME, np.int64)}


def upgrade_state(d: dict) -> dict:
    """``d`` (a LobSim / ReferenceLobSim state_dict) in today's layout; refused in one line when its
    state rows match no version this one reads."""
    d = upgrade_ring(d)
    if "resp_ring" not in d:   # before the response latency: an empty own-state ring (read only with one)
        d = d | {"resp_ring": np.zeros((L.N_RESP, np.asarray(d["state_i"]).shape[1]), np.float64)}
    si, sf = np.asarray(d["state_i"]), np.asarray(d["state_f"])
    # rows inserted before the mid history since: S_TRIPS, then S_BUY_POST / S_SELL_POST (0: no
    # instruction made an order post-only), then S_VOL_STEPS, then S_RESP_STALE, then S_BUY_PEG /
    # S_SELL_PEG (PEG_NONE: the orders rest where they are)
    for first in (L.S_TRIPS, L.S_BUY_POST, L.S_VOL_STEPS, L.S_RESP_STALE, L.S_BUY_PEG):
        if si.shape[0] == first + L.N_MID_HIST:
            new = np.zeros((L.N_STATE_I,) + si.shape[1:], si.dtype)
            new[:first], new[L.S_MID_HIST:] = si[:first], si[first:]
            d, si = d | {"state_i": new}, new
    if L.F_TRIP_BASE <= sf.shape[0] < L.N_STATE_F:   # rows appended since: F_TRIP_BASE, then F_VOL_MSQ
        pad = np.zeros((L.N_STATE_F - sf.shape[0],) + sf.shape[1:], sf.dtype)
        d = d | {"state_f": np.concatenate([sf, pad])}
    if d["state_i"].shape[0] != L.N_STATE_I or d["state_f"].shape[0] != L.N_STATE_F:
        raise ValueError(f"simulator state of {si.shape[0]} int and {sf.shape[0]} float rows: this version reads "
                         f"{L.N_STATE_I} and {L.N_STATE_F} (or an older layout of them)")
    return d
