"""NumPy references of cuda_kernels/nets and cuda_kernels/sampling/argmax_expected_q.

Each function mirrors one kernel (or one launch helper of alpharl.nets) on
host arrays and computes in the dtype of its inputs: float64 inputs give the
float64 reference the tests compare against and differentiate numerically;
float32 inputs give the ``numpy`` backend. Constants come from the kernel
modules: one definition each.
"""
from __future__ import annotations

import numpy as np

from alpharl import isv as S
from alpharl.cuda_kernels.nets import adam as KA
from alpharl.cuda_kernels.nets import losses as KL
from alpharl.sizes import N_ACTIONS, N_ATOMS


# ------------------------------------------------------------ the support
def support_of(isv=None) -> np.ndarray:
    """float32 [V_MIN, V_MAX] of the C51 support held in the ISV, read as ``support_grid`` reads it
    (slots at sentinel or not ordered: the bootstrap +-10); None: the bootstrap."""
    boot = np.array([S.V_MIN_BOOTSTRAP, S.V_MAX_BOOTSTRAP], np.float32)
    if isv is None:
        return boot
    lo, hi = np.float32(isv[S.RL_SUPPORT_V_MIN]), np.float32(isv[S.RL_SUPPORT_V_MAX])
    with np.errstate(over="ignore", invalid="ignore"):
        ok = bool(hi > lo) and np.isfinite(np.float32(hi - lo))
    return np.array([lo, hi], np.float32) if ok else boot


def grid(support=None, dtype=np.float64):
    """(V_MIN, V_MAX, DELTA_Z, z [N_ATOMS]) in ``dtype`` of a support [V_MIN, V_MAX] (None: the bootstrap)."""
    lo, hi = (np.asarray(support_of() if support is None else support)).astype(dtype)
    dz = dtype((hi - lo) / dtype(N_ATOMS - 1))
    return lo, hi, dz, (lo + np.arange(N_ATOMS).astype(dtype) * dz).astype(dtype)


def supports(dtype=np.float64, support=None):
    """The atoms z_j = V_MIN + j DELTA_Z of a support [V_MIN, V_MAX] (None: the bootstrap +-10)."""
    return grid(support, dtype)[3]


def gain_of(isv=None) -> np.float32:
    """The reward normaliser's gain as ``reward_gain`` reads it (sentinel or not positive: 1)."""
    g = np.float32(1.0) if isv is None else np.float32(isv[S.RL_REWARD_GAIN])
    return g if (g > 0 and np.isfinite(g)) else np.float32(1.0)


# ------------------------------------------------------------------ layers
def linear(x, w, b, act: str = "none"):
    """act(x W + b); x [n, k], w [k, m], b [m]; act 'tanh' or 'none'."""
    y = x @ w + b
    return np.tanh(y) if act == "tanh" else y


def linear_backward(x, dy, w, y_tanh=None):
    """(dx, dW, db) of y = x W + b given dy = dL/dy; with y_tanh, dy is first times (1 - y^2)."""
    if y_tanh is not None:
        dy = dy * (1 - y_tanh * y_tanh)
    return dy @ w.T, x.T @ dy, dy.sum(axis=0)


def log_softmax(x, axis=-1):
    mx = x.max(axis=axis, keepdims=True)
    s = x - mx
    return s - np.log(np.exp(s).sum(axis=axis, keepdims=True))


# ------------------------------------------------------------ dueling C51
def dueling_logits(adv, val):
    """[n, N_ACTIONS, N_ATOMS] logits from adv [n, N_ACTIONS * N_ATOMS] (action-major) and val [n, N_ATOMS]."""
    a = adv.reshape(-1, N_ACTIONS, N_ATOMS)
    return val[:, None, :] + a - a.mean(axis=1, keepdims=True)


def v_dq(val, support=None):
    """V_dq = sum_z softmax(val)[z] z_j (rl_v_dq) on a support [V_MIN, V_MAX] (None: +-10)."""
    return (np.exp(log_softmax(val)) * supports(val.dtype.type, support)).sum(axis=-1)


def expected_q(adv, val, support=None):
    """E[Z(s, a)] for every action: [n, N_ACTIONS]."""
    return (np.exp(log_softmax(dueling_logits(adv, val))) * supports(val.dtype.type, support)).sum(axis=-1)


def argmax_expected_q(adv, val, support=None):
    """a* = argmax_a E[Z(s, a)], ties to the lowest index (np.argmax's rule); int32 [n]."""
    return np.argmax(expected_q(adv, val, support), axis=1).astype(np.int32)


def c51_project(q, reward, done, gamma, support=None):
    """Project q [n, N_ATOMS] shifted by r + gamma (1 - done) z onto the supports (rl_c51_loss).

    The support [V_MIN, V_MAX] (None: +-10) gives z_j = V_MIN + j DELTA_Z; Tz is clamped to
    [V_MIN, V_MAX], b = (Tz - V_MIN) / DELTA_Z. l == u (b an exact integer) gives all of q_j to l.
    """
    dt = q.dtype
    n = q.shape[0]
    v_min, v_max, dz, z = grid(support, dt.type)
    disc = (gamma * (1 - done)).astype(dt)
    tz = np.clip(reward[:, None].astype(dt) + disc[:, None] * z[None, :], v_min, v_max)
    b = np.clip((tz - v_min) / dz, 0, N_ATOMS - 1)
    bad = ~(np.isfinite(reward) & np.isfinite(disc)) | ~np.isfinite(b).all(axis=1)
    b = np.where(np.isfinite(b), b, 0)  # keep indices in range; bad rows are poisoned below
    lo = np.floor(b).astype(np.int64)
    hi = np.ceil(b).astype(np.int64)
    m = np.zeros((n, N_ATOMS), dt)
    rows = np.repeat(np.arange(n), N_ATOMS)
    same = (lo == hi)
    np.add.at(m, (rows, lo.ravel()), np.where(same, q, q * (hi - b)).ravel())
    np.add.at(m, (rows, hi.ravel()), np.where(same, 0, q * (b - lo)).ravel())
    m[bad] = np.nan  # a non-finite reward/done: NaN target, loss and gradients (the guard skips the update)
    return m


def policy_mixture(pi_logits, t_adv, t_val):
    """The target distribution at s' under the acting policy (``--q-target policy``):
    q[n, z] = sum_a pi(a | s') p_target(z | s', a), pi = softmax(pi_logits) [n, N_ACTIONS]."""
    pi = np.exp(log_softmax(pi_logits))
    return (pi[:, :, None] * np.exp(log_softmax(dueling_logits(t_adv, t_val)))).sum(axis=1)


def c51_target(t_adv, t_val, a_star, reward, done, gamma, support=None, pi_logits=None):
    """(m projected target [n, N_ATOMS], E[Z_target(s')] [n]): the target net's distribution at (s', a*)
    (Double DQN), or with ``pi_logits`` (the policy at s') its mixture over the policy (``policy_mixture``)."""
    n = t_adv.shape[0]
    if pi_logits is None:
        q = np.exp(log_softmax(dueling_logits(t_adv, t_val)[np.arange(n), a_star]))
    else:
        q = policy_mixture(pi_logits, t_adv, t_val)
    return c51_project(q, reward, done, gamma, support), (q * supports(q.dtype.type, support)).sum(axis=1)


def c51_loss(adv, val, actions, m, is_w, support=None):
    """(per-sample CE [n], weighted mean loss, d_adv, d_val, E[Z(s, a)]) for a fixed projected target m."""
    n = adv.shape[0]
    lp = log_softmax(dueling_logits(adv, val)[np.arange(n), actions])
    ce = -(m * lp).sum(axis=1)
    p = np.exp(lp)
    g = (is_w / n)[:, None] * (p * m.sum(axis=1, keepdims=True) - m)
    sel = np.zeros((n, N_ACTIONS, 1), adv.dtype)
    sel[np.arange(n), actions] = 1
    d_adv = (g[:, None, :] * (sel - 1.0 / N_ACTIONS)).reshape(n, -1)
    return ce, (is_w * ce).sum() / n, d_adv, g, (p * supports(p.dtype.type, support)).sum(axis=1)


def rl_c51_loss(adv, val, actions, t_adv, t_val, a_star, reward, done, is_w, gamma, support=None, gain=1.0):
    """Whole rl_c51_loss: (loss [n], td [n], d_adv, d_val); reward in learning units = reward x gain."""
    reward = reward * reward.dtype.type(gain) if gain != 1 else reward
    m, e_target = c51_target(t_adv, t_val, a_star, reward, done, gamma, support)
    ce, _, d_adv, d_val, e_online = c51_loss(adv, val, actions, m, is_w, support)
    td = reward + gamma * (1 - done) * e_target - e_online
    return ce, td, d_adv, d_val


# --------------------------------------------------------------------- PPO
def ppo_loss(logits, actions, logp_old, adv, eps, c, coef):
    """rl_ppo_loss: (per-sample loss, d_logits of the mean, entropy, kl, ratio)."""
    n = logits.shape[0]
    lp = log_softmax(logits)
    p = np.exp(lp)
    idx = np.arange(n)
    log_ratio = lp[idx, actions] - logp_old
    ratio = np.exp(log_ratio)
    clipped = np.clip(ratio, 1 - eps, 1 + eps)
    s1, s2 = ratio * adv, clipped * adv
    use1 = s1 <= s2
    obj = np.where(use1, s1, s2)
    d_obj = np.where(use1, adv, np.where(clipped == ratio, adv, 0))
    dual = (adv < 0) & (c * adv > obj)
    obj = np.where(dual, c * adv, obj)
    d_obj = np.where(dual, 0, d_obj)
    h = -(p * lp).sum(axis=1)
    loss = -obj - coef * h
    sel = np.zeros_like(p)
    sel[idx, actions] = 1
    d = (-(d_obj * ratio)[:, None] * (sel - p) + coef * p * (lp + h[:, None])) / n
    return loss, d, h, np.maximum((ratio - 1) - log_ratio, 0), ratio


def ppo_loss_value(logits, actions, logp_old, adv, eps, c, coef):
    """Mean PPO loss (for finite differences)."""
    return ppo_loss(logits, actions, logp_old, adv, eps, c, coef)[0].mean()


# ---------------------------------------------------------- scalar heads
def scalar_loss(kind: int, pred, target):
    """rl_scalar_loss: (per-sample loss, d(mean loss)/d pred)."""
    n = pred.shape[0]
    if kind == KL.LOSS_BCE:
        loss = np.maximum(pred, 0) - target * pred + np.log1p(np.exp(-np.abs(pred)))
        return loss, (1 / (1 + np.exp(-pred)) - target) / n
    e = pred - target
    if kind == KL.LOSS_HUBER:
        big = np.abs(e) > KL.HUBER_DELTA
        loss = np.where(big, KL.HUBER_DELTA * (np.abs(e) - 0.5 * KL.HUBER_DELTA), 0.5 * e * e)
        return loss, np.where(big, np.copysign(KL.HUBER_DELTA, e), e) / n
    return 0.5 * e * e, e / n


# ----------------------------------------------------- advantage / Adam / tau
def advantage_return(reward, done, v_used, v_used_tp1, gamma):
    """rl_compute_advantage_return: (A, return)."""
    a = reward + gamma * (1 - done) * v_used_tp1 - v_used
    return a, a + v_used


def adam_moments(m, v, grad):
    """This step's Adam moments (m', v') from the last ones and the gradient."""
    b1, b2 = KA.ADAM_BETA1, KA.ADAM_BETA2
    return b1 * m + (1 - b1) * grad, b2 * v + (1 - b2) * grad * grad


def adam(params, grad, m, v, t, lr):
    """One bias-corrected Adam step at step count t (already advanced); returns (params, m, v)."""
    b1, b2 = KA.ADAM_BETA1, KA.ADAM_BETA2
    m, v = adam_moments(m, v, grad)
    m_hat = m / (1 - b1 ** t)
    v_hat = v / (1 - b2 ** t)
    return params - lr * m_hat / (np.sqrt(v_hat) + KA.ADAM_EPS), m, v


def soft_update(target, online, tau):
    return tau * online + (1 - tau) * target
