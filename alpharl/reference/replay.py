"""NumPy references of cuda_kernels/replay/per.py, and the replay of the numpy backend.

Same arguments as the kernels, outputs written in place. ``rl_per_build_cdf``
and ``rl_per_sample`` repeat the kernels' block structure (contiguous chunk
per thread, sequential float64 sums within a chunk, Hillis-Steele scan of the
chunk sums, the same bisections), so the same sampler states give the same
indices: only ``pow`` may differ in the last bit between libm and CUDA, which
moves a draw only when u lands within ~1e-16 of a CDF boundary.
"""
from __future__ import annotations

import numpy as np

from alpharl.cuda_kernels.replay.per import (META_CURSOR, META_SIZE, PER_BLOCK, PER_THREAD_ITEMS, PER_TILE,
                                             PRIORITY_EPS, SCRATCH_LEAST, SCRATCH_LEN, SCRATCH_TOTAL)
from alpharl.isv import RL_PER_ALPHA, RL_PER_BETA, RL_PER_ESS_FRAC
from alpharl.prng import uniform53_np, xorshift32_np
from alpharl.replay import PrioritizedReplay

f32 = np.float32
f64 = np.float64


def _mass(p, alpha):
    return np.power(np.asarray(p, f64), alpha)


def rl_per_insert(new_obs_s, new_action, new_reward, new_done, new_obs_s2, meta, pmax,
                  obs_s, action, reward, done, obs_s2, priority):
    slots = (int(meta[META_CURSOR]) + np.arange(len(new_action))) % len(action)
    obs_s[slots] = new_obs_s
    obs_s2[slots] = new_obs_s2
    action[slots] = new_action
    reward[slots] = new_reward
    done[slots] = new_done
    priority[slots] = pmax[0]


def rl_per_advance(meta, n, capacity):
    meta[META_CURSOR] = (int(meta[META_CURSOR]) + n) % capacity
    meta[META_SIZE] = min(int(meta[META_SIZE]) + n, capacity)


def _hillis_steele_inclusive(a):
    """Inclusive Hillis-Steele scan along the last axis, in the kernel's order."""
    a = a.copy()
    offset = 1
    while offset < a.shape[-1]:
        a[..., offset:] = a[..., offset:] + a[..., :-offset]
        offset *= 2
    return a


def _chunk_scan(values, squares, chunk):
    """The kernels' two-level fixed-order sum over values[..., PER_BLOCK * chunk].

    Thread t of a block owns chunk contiguous values and sums them sequentially;
    the thread sums are Hillis-Steele scanned. Returns (inclusive prefix sums,
    the last axis's total of values, the same total of squares).
    """
    shape = values.shape[:-1] + (PER_BLOCK, chunk)
    runs = np.cumsum(values.reshape(shape), axis=-1)                # sequential within a thread
    sq = np.cumsum(squares.reshape(shape), axis=-1)[..., -1]
    incl = _hillis_steele_inclusive(runs[..., -1])
    sq = _hillis_steele_inclusive(sq)
    base = np.concatenate((np.zeros(incl.shape[:-1] + (1,)), incl[..., :-1]), axis=-1)
    prefix = (base[..., None] + runs).reshape(values.shape)
    return prefix, incl[..., -1], sq[..., -1]


def _first_above(arr, lo, hi, x):
    """The kernels' bisection, vectorised: smallest i in [lo, hi] with arr[i] > x, else hi."""
    lo, hi = lo.copy(), hi.copy()
    while (lo < hi).any():
        active = lo < hi
        mid = (lo + hi) // 2
        right = arr[np.where(active, mid, 0)] > x
        hi = np.where(active & right, mid, hi)
        lo = np.where(active & ~right, mid + 1, lo)
    return lo


def rl_per_build_cdf(gate, priority, meta, isv, cdf, tile_sum, tile_sq):
    if gate[0] == 0:
        return
    n = int(meta[META_SIZE])
    tiles = -(-n // PER_TILE)
    w = np.zeros(tiles * PER_TILE, f64)
    w[:n] = _mass(priority[:n], f64(isv[RL_PER_ALPHA]))
    w = w.reshape(tiles, PER_TILE)
    prefix, total, sq = _chunk_scan(w, w * w, PER_THREAD_ITEMS)
    cdf[:n] = prefix.reshape(-1)[:n]
    tile_sum[:tiles] = total
    tile_sq[:tiles] = sq


def _scan_tiles(n, tile_sum, tile_sq, tile_cdf, isv):
    """rl_per_sample's tile scan: tile_cdf over the filled tiles, the ESS into isv; returns the total mass."""
    tiles = -(-n // PER_TILE)
    chunk = -(-tiles // PER_BLOCK)
    padded_sum = np.zeros(PER_BLOCK * chunk, f64)
    padded_sq = np.zeros(PER_BLOCK * chunk, f64)
    padded_sum[:tiles] = tile_sum[:tiles]
    padded_sq[:tiles] = tile_sq[:tiles]
    if chunk:
        prefix, total, sq = _chunk_scan(padded_sum, padded_sq, chunk)
        tile_cdf[:tiles] = prefix[:tiles]
    else:
        total = sq = f64(0.0)
    isv[RL_PER_ESS_FRAC] = f32(total * total / (n * sq)) if n > 0 else f32(0.0)
    return total


def rl_per_scan_tiles(gate, meta, isv, tile_sum, tile_sq, tile_cdf, scratch):
    if gate[0] == 0:
        return
    scratch[SCRATCH_TOTAL] = _scan_tiles(int(meta[META_SIZE]), tile_sum, tile_sq, tile_cdf, isv)
    scratch[SCRATCH_LEAST] = np.inf


def rl_per_draw(gate, priority, meta, isv, cdf, tile_cdf, scratch, sampler_state, m, idx):
    if gate[0] == 0:
        return
    n = int(meta[META_SIZE])
    if n == 0:
        idx[:m] = 0
        return
    tiles = -(-n // PER_TILE)
    a = xorshift32_np(sampler_state[:m])
    b = xorshift32_np(a)
    sampler_state[:m] = b
    target = uniform53_np(a, b) * scratch[SCRATCH_TOTAL]
    t = _first_above(tile_cdf, np.zeros(m, np.int64), np.full(m, tiles - 1, np.int64), target)
    before = np.where(t > 0, tile_cdf[np.maximum(t - 1, 0)], 0.0)
    pick = _first_above(cdf, t * PER_TILE, np.minimum((t + 1) * PER_TILE, n) - 1, target - before)
    idx[:m] = pick
    scratch[SCRATCH_LEAST] = min(scratch[SCRATCH_LEAST], _mass(priority[pick], f64(isv[RL_PER_ALPHA])).min())


def rl_per_weights(gate, priority, meta, isv, scratch, m, idx, is_weight):
    if gate[0] == 0:
        return
    if int(meta[META_SIZE]) == 0:
        is_weight[:m] = 0.0
        return
    mass = _mass(priority[idx[:m]], f64(isv[RL_PER_ALPHA]))
    is_weight[:m] = np.power(scratch[SCRATCH_LEAST] / mass, f64(isv[RL_PER_BETA])).astype(f32)


def rl_per_sample(gate, priority, meta, isv, cdf, tile_sum, tile_sq, tile_cdf, sampler_state, m, idx, is_weight):
    """The grid path's three references in turn: the one block computes the same (the kernels share code)."""
    scratch = np.empty(SCRATCH_LEN, f64)
    rl_per_scan_tiles(gate, meta, isv, tile_sum, tile_sq, tile_cdf, scratch)
    rl_per_draw(gate, priority, meta, isv, cdf, tile_cdf, scratch, sampler_state, m, idx)
    rl_per_weights(gate, priority, meta, isv, scratch, m, idx, is_weight)


def rl_per_gather(gate, idx, m, obs_s, action, reward, done, obs_s2,
                  mb_obs_s, mb_action, mb_reward, mb_done, mb_obs_s2):
    if gate[0] == 0:
        return
    i = idx[:m]
    mb_obs_s[:m] = obs_s[i]
    mb_obs_s2[:m] = obs_s2[i]
    mb_action[:m] = action[i]
    mb_reward[:m] = reward[i]
    mb_done[:m] = done[i]


def rl_per_clear_priority(gate, idx, m, priority):
    if gate[0] == 0:
        return
    priority[idx[:m]] = 0.0


def rl_per_max_priority(gate, idx, loss, m, priority, pmax):
    if gate[0] == 0:
        return
    p = np.abs(np.asarray(loss[:m], f32)) + f32(PRIORITY_EPS)
    p[~np.isfinite(p)] = 0.0  # dropped
    np.maximum.at(priority, idx[:m], p)
    top = p.max() if m > 0 else f32(0.0)
    if top > pmax[0]:
        pmax[0] = top


def rl_per_update_priority(gate, idx, loss, m, priority, pmax):
    """The grid path's two references in turn (clear, then max)."""
    rl_per_clear_priority(gate, idx, m, priority)
    rl_per_max_priority(gate, idx, loss, m, priority, pmax)


_REFERENCE = {f.__name__: f for f in (rl_per_insert, rl_per_advance, rl_per_build_cdf, rl_per_sample, rl_per_scan_tiles,
                                      rl_per_draw, rl_per_weights, rl_per_gather, rl_per_update_priority,
                                      rl_per_clear_priority, rl_per_max_priority)}


class PrioritizedReplayReference(PrioritizedReplay):
    """:class:`alpharl.replay.PrioritizedReplay` on host arrays: the replay of the numpy backend.

    Same API, state dict and launch order; every kernel launch runs its
    NumPy reference instead, and the ISV / inputs are NumPy arrays.
    """

    def _to_storage(self, host: np.ndarray) -> np.ndarray:
        return host.copy()

    def _to_host(self, arr: np.ndarray) -> np.ndarray:
        return arr.copy()

    def _load(self, arr: np.ndarray, host: np.ndarray) -> None:
        arr[...] = host

    def _launch(self, k, grid: int, block: int, *args, stream=None) -> None:
        _REFERENCE[k.name](*args)

    def _sync(self) -> None:
        pass
