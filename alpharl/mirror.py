"""The market's mirror image: buy and sell exchanged (a diagnosis of a policy's side tilt).

Quoting is symmetric under exchanging the two sides of the book: the mirror of a state has the ask
levels where the bid levels were, the position and every signed quantity negated, and each side's
order in the other's place; its best action is the mirror of the original's (a buy quote for a sell
quote). The map on the observation (alpharl.sim.layout's fields):

    level offsets and log sizes   ask <-> bid (both are distances from mid, >= 0)
    imbalances, mid returns       negated
    position                      negated
    unrealised PnL                unchanged: (-q)(-mid - (-entry)) = q (mid - entry)
    own orders' flag/queue/offset buy <-> sell (offsets are distances too)
    spread, times                 unchanged

and on the actions: market buy <-> market sell, join bid <-> join ask, improve bid <-> improve ask;
hold, cancel and flatten are their own mirrors. Both maps are involutions.

A policy's logits averaged with its mirror's, z(s) = (f(s) + f(M s)[P]) / 2, give a policy that is
exactly mirror-equivariant: a constant tilt of the logits toward one side cancels, a dependence on
the position (a lean against it) is kept.
"""
from __future__ import annotations

import functools

import numpy as np

from alpharl.actions import Action
from alpharl.sim import layout as L

#: The mirror of each action (index: action id).
MIRROR_ACTION = np.arange(len(Action), dtype=np.int64)
for _a, _b in ((Action.MARKET_BUY, Action.MARKET_SELL), (Action.JOIN_BID, Action.JOIN_ASK),
               (Action.IMPROVE_BID, Action.IMPROVE_ASK)):
    MIRROR_ACTION[_a], MIRROR_ACTION[_b] = _b, _a


def levels_of(obs_dim: int) -> int:
    """The book levels a side of an observation of length obs_dim (the inverse of layout.obs_dim)."""
    levels, rest = divmod(obs_dim - L.N_OBS_EXTRA, L.OBS_PER_LEVEL)
    if rest or levels < 1:
        raise ValueError(f"observation length {obs_dim} is not that of whole book levels")
    return levels


@functools.lru_cache(maxsize=None)
def mirror_index(obs_levels: int) -> tuple[np.ndarray, np.ndarray]:
    """(source index, sign) per observation element: mirrored[i] = sign[i] * obs[source[i]]; built once per
    level count (an evaluation mirrors every step's observations), read-only."""
    n = L.obs_dim(obs_levels)
    src, sign = np.arange(n), np.ones(n, np.float32)
    for lv in range(obs_levels):
        b = L.OBS_PER_LEVEL * lv
        for ask, bid in ((L.OBS_LEVEL_ASK_OFF, L.OBS_LEVEL_BID_OFF), (L.OBS_LEVEL_ASK_LOGSZ, L.OBS_LEVEL_BID_LOGSZ)):
            src[b + ask], src[b + bid] = b + bid, b + ask
    x = L.obx_base(obs_levels)
    for k in [L.OBX_IMB1, L.OBX_IMB_DEPTH, L.OBX_POSITION] + [L.OBX_RET + j for j in range(L.N_RET)]:
        sign[x + k] = -1.0
    for buy, sell in ((L.OBX_BUY_FLAG, L.OBX_SELL_FLAG), (L.OBX_BUY_QUEUE, L.OBX_SELL_QUEUE),
                      (L.OBX_BUY_OFF, L.OBX_SELL_OFF)):
        src[x + buy], src[x + sell] = x + sell, x + buy
    src.flags.writeable = sign.flags.writeable = False
    return src, sign


def mirror_obs(obs: np.ndarray, obs_levels: int) -> np.ndarray:
    """The mirrored observations of obs [..., obs_dim(obs_levels)], C-contiguous (a gather along the last axis
    alone would come back column-major, which a device copy keeps and a flat view of it misreads)."""
    src, sign = mirror_index(obs_levels)
    return np.ascontiguousarray(obs[..., src] * sign)


def symmetric_logits(logits_fn, obs: np.ndarray, obs_levels: int) -> np.ndarray:
    """(f(s) + f(M s)[P]) / 2 for f = logits_fn [n, obs_dim] -> [n, N_ACTIONS] (module doc)."""
    return 0.5 * (logits_fn(obs) + logits_fn(mirror_obs(obs, obs_levels))[:, MIRROR_ACTION])
