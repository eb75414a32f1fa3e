"""Action sampling kernels: ``rl_pi_action_kernel`` (the actor, SPEC §5) and
``rl_action_kernel`` (Thompson sampling from Q, diagnostics only).

Both run one thread per backtest and draw from the backtest's xorshift32 state
``prng_state_d[b]`` (see :mod:`alpharl.prng`), advancing it in place, so the
sampled actions are a deterministic function of (seed, B, logits). Both take
the same state buffer: a diagnostic Thompson call advances the states the
actor will use next, exactly as in the seeds.

Categorical draw (``softmax_draw``): with m = max_k l_k, e_k = exp(l_k - m)
(so e_k <= 1, and the arg-max has e = 1: no overflow, Z >= 1) and
Z = sum_k e_k, the sampled index is the first k with u Z < e_0 + ... + e_k,
u = uniform24(state) in [0, 1). Comparing u Z against unnormalised partial
sums saves the divisions. float32 rounding can leave u Z >= the last partial
sum; the walk then keeps the last index with e_k > 0, so an index of
probability 0 (e_k underflowed) is never returned. log p(k) = (l_k - m) - ln Z.
"""
from __future__ import annotations

import math

from numba import cuda, float32, int32

from alpharl.cuda_kernels.nets.heads import support, support_grid
from alpharl.cuda_kernels.registry import kernel
from alpharl.prng import uniform24, xorshift32
from alpharl.sizes import cdiv

#: Threads per block of both kernels (one thread per backtest): grid = ceil(B / ACTION_BLOCK).
ACTION_BLOCK = 256


@cuda.jit(device=True)
def softmax_draw(logits, u):
    """Sample an index of softmax(logits) (1-D view) with uniform u; returns (index, log p(index))."""
    n = logits.shape[0]
    m = logits[0]
    for k in range(1, n):
        if logits[k] > m:
            m = logits[k]
    z = float32(0.0)
    last_positive = n - 1
    for k in range(n):
        e = math.exp(logits[k] - m)
        z += e
        if e > float32(0.0):
            last_positive = k
    target = u * z
    pick = last_positive
    cum = float32(0.0)
    for k in range(n):
        cum += math.exp(logits[k] - m)
        if target < cum:
            pick = k
            break
    return pick, (logits[pick] - m) - math.log(z)


def action_grid(n_backtests: int) -> int:
    """Blocks of ACTION_BLOCK threads covering n_backtests (at least one)."""
    return max(1, cdiv(n_backtests, ACTION_BLOCK))


@kernel("void(float32[:, ::1], uint32[::1], int32[::1], float32[::1])")
def rl_pi_action_kernel(pi_logits, prng_state, actions, logp):
    """a_b ~ softmax(pi_logits[b, :]) and log pi(a_b | s_b), per backtest b.

    pi_logits[B, N_ACTIONS] f32, prng_state[B] u32 (advanced one step in
    place), actions[B] i32 out, logp[B] f32 out (kept as log pi_old for PPO).
    Launch [action_grid(B), ACTION_BLOCK]: one thread per backtest.
    """
    b = cuda.grid(1)
    if b < pi_logits.shape[0]:
        s = xorshift32(prng_state[b])
        prng_state[b] = s
        a, lp = softmax_draw(pi_logits[b], uniform24(s))
        actions[b] = int32(a)
        logp[b] = lp


@kernel("void(float32[:, :, ::1], float32[::1], uint32[::1], int32[::1])", test_only=True)
def rl_action_kernel(q_logits, isv, prng_state, actions):
    """Thompson action from Q's return distribution, per backtest (diagnostics only).

    For each action a in id order, draw one atom z_a ~ softmax(q_logits[b, a, :])
    (one xorshift32 step each, so N_ACTIONS steps per call) and read its return
    z_{z_a} on the ISV's support (``support_grid``); the action is the argmax of these
    sampled returns, ties to the lowest action id. q_logits[B, N_ACTIONS, N_ATOMS] f32,
    isv f32, prng_state[B] u32 (advanced in place), actions[B] i32 out.
    Launch [action_grid(B), ACTION_BLOCK]: one thread per backtest.
    """
    b = cuda.grid(1)
    if b < q_logits.shape[0]:
        v_min, _, dz = support_grid(isv)
        s = prng_state[b]
        best_a = 0
        best_v = float32(0.0)
        for a in range(q_logits.shape[1]):
            s = xorshift32(s)
            z, _ = softmax_draw(q_logits[b, a], uniform24(s))
            v = support(z, v_min, dz)
            if a == 0 or v > best_v:
                best_a = a
                best_v = v
        prng_state[b] = s
        actions[b] = int32(best_a)
