"""NumPy references of cuda_kernels/sampling/action.py.

Same arguments as the kernels, outputs and PRNG states written in place, with
the kernels' float32 arithmetic in the kernels' order (sequential sums over
the categories, vectorised over the backtests), so the same states give the
same actions.
"""
from __future__ import annotations

import numpy as np

from alpharl.prng import uniform24_np, xorshift32_np
from alpharl.reference import nets as R

f32 = np.float32


def softmax_draw(logits: np.ndarray, u: np.ndarray):
    """Twin of the device ``softmax_draw``, one draw per row of logits[R, n]; returns (index[R], logp[R])."""
    logits = np.asarray(logits, dtype=f32)
    rows, n = logits.shape
    m = logits.max(axis=1)
    z = np.zeros(rows, f32)
    last_positive = np.full(rows, n - 1, np.int64)
    for k in range(n):
        e = np.exp(logits[:, k] - m)
        z += e
        last_positive[e > 0] = k
    target = np.asarray(u, f32) * z
    pick = last_positive.copy()
    found = np.zeros(rows, bool)
    cum = np.zeros(rows, f32)
    for k in range(n):
        cum += np.exp(logits[:, k] - m)
        hit = ~found & (target < cum)
        pick[hit] = k
        found |= hit
    r = np.arange(rows)
    return pick, (logits[r, pick] - m) - np.log(z)


def rl_pi_action_kernel(pi_logits, prng_state, actions, logp):
    """a_b ~ softmax(pi_logits[b]); prng_state advanced one step; actions, logp written."""
    s = xorshift32_np(prng_state)
    prng_state[:] = s
    a, lp = softmax_draw(pi_logits, uniform24_np(s))
    actions[:] = a
    logp[:] = lp


def rl_action_kernel(q_logits, isv, prng_state, actions):
    """Thompson action: one atom per action (action order), argmax of the sampled returns on the ISV's
    support, ties low."""
    supports = R.supports(f32, R.support_of(isv))
    q_logits = np.asarray(q_logits, dtype=f32)
    n_b, n_a, _ = q_logits.shape
    s = np.asarray(prng_state, dtype=np.uint32)
    values = np.empty((n_b, n_a), f32)
    for a in range(n_a):
        s = xorshift32_np(s)
        z, _ = softmax_draw(q_logits[:, a, :], uniform24_np(s))
        values[:, a] = np.asarray(supports, f32)[z]
    prng_state[:] = s
    actions[:] = np.argmax(values, axis=1)  # argmax returns the first maximum: ties -> lowest id
