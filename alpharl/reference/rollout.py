"""NumPy references of cuda_kernels/nets/rollout.py: the rollout store and GAE(lambda).

Both work in place on the rollout's arrays, as the kernels do. ``rl_gae`` computes
in ``dtype`` (float64 in the tests, float32 in the numpy backend) in the kernel's
order of operations, vectorised over the columns.
"""
from __future__ import annotations

import numpy as np

from alpharl import isv as S
from alpharl.cuda_kernels.nets.rollout import ADV_NORM_EPS


def rl_rollout_store(step_count, t_len, n_b, dim, with_v, obs, action, logp, reward, done, label_up, label_ret,
                     v_used, r_obs, r_action, r_logp, r_reward, r_done, r_label_up, r_label_ret, r_v_used):
    """Slice t = step_count[0] mod t_len of the rollout <- this step's batch (r_v_used only if with_v)."""
    t = int(step_count[0]) % int(t_len)
    rows = slice(t * n_b, (t + 1) * n_b)
    np.asarray(r_obs).reshape(t_len * n_b, dim)[rows] = np.asarray(obs).reshape(n_b, dim)
    for dst, src in ((r_action, action), (r_logp, logp), (r_reward, reward), (r_done, done),
                     (r_label_up, label_up), (r_label_ret, label_ret)) + (((r_v_used, v_used),) if with_v else ()):
        dst[rows] = np.asarray(src)[:n_b]


def rl_rollout_gather(step_count, t_len, n_b, stride, n_sub, dim, r_obs, r_action, r_logp, r_reward, r_done,
                      r_label_up, r_label_ret, r_v_used, obs_next, s_obs, s_action, s_logp, s_reward, s_done,
                      s_label_up, s_label_ret, s_v_used, s_obs_next):
    """Columns (u + stride i) mod n_b, i < n_sub, u = step_count[0] // t_len, of the rollout into the s_* one."""
    cols = (int(step_count[0]) // int(t_len) + int(stride) * np.arange(n_sub, dtype=np.int64)) % int(n_b)
    np.asarray(s_obs).reshape(t_len, n_sub, dim)[...] = np.asarray(r_obs).reshape(t_len, n_b, dim)[:, cols]
    for dst, src in ((s_action, r_action), (s_logp, r_logp), (s_reward, r_reward), (s_done, r_done),
                     (s_label_up, r_label_up), (s_label_ret, r_label_ret), (s_v_used, r_v_used)):
        np.asarray(dst).reshape(t_len, n_sub)[...] = np.asarray(src).reshape(t_len, n_b)[:, cols]
    np.asarray(s_obs_next).reshape(n_sub, dim)[...] = np.asarray(obs_next).reshape(n_b, dim)[cols]


def rl_gae(reward, done, v_used, v_s_last, v_dq_last, v_s_next, v_dq_next, t_len, n_b, lam, isv, advantage, ret,
           ppo_adv, dtype=np.float64):
    """GAE(lambda) over the rollout (see the kernel): v_used's last slice, advantage, ret, ppo_adv in place."""
    c = lambda a: np.asarray(a, dtype)  # noqa: E731
    alpha, gamma = dtype(isv[S.RL_V_BLEND_ALPHA]), dtype(isv[S.RL_GAMMA])
    gl = gamma * dtype(lam)
    one = dtype(1.0)
    r = c(reward).reshape(t_len, n_b)
    nd = one - c(done).reshape(t_len, n_b)
    v = c(v_used).reshape(t_len, n_b).copy()
    v[t_len - 1] = alpha * c(v_s_last) + (one - alpha) * c(v_dq_last)
    v_next = alpha * c(v_s_next) + (one - alpha) * c(v_dq_next)
    adv = np.zeros((t_len, n_b), dtype)
    a = np.zeros(n_b, dtype)
    for t in range(t_len - 1, -1, -1):
        delta = r[t] + gamma * nd[t] * v_next - v[t]
        a = delta + gl * nd[t] * a
        adv[t] = a
        v_next = v[t]
    mean = adv.mean()
    std = np.sqrt(((adv - mean) ** 2).mean())
    v_used[(t_len - 1) * n_b:t_len * n_b] = v[t_len - 1]
    advantage[:t_len * n_b] = adv.ravel()
    ret[:t_len * n_b] = (adv + v).ravel()
    ppo_adv[:t_len * n_b] = ((adv - mean) * (one / (std + dtype(ADV_NORM_EPS)))).ravel()
