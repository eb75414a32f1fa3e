"""NumPy references of cuda_kernels/nets/narrow.py and of rl_env_rows (cuda_kernels/nets/advantage.py).

Built from the per-layer and per-loss references (alpharl.reference.nets and
.controllers): the fused kernels must compute exactly what the separate layers
and losses would. Computes in the dtype of the inputs (float64 in the tests).
"""
from __future__ import annotations

import numpy as np

from alpharl import isv as S
from alpharl.cuda_kernels.nets import losses as KL
from alpharl.cuda_kernels.nets.advantage import ENV_COLLECT, ENV_GAE, ENV_ONE_STEP
from alpharl.reference import controllers as RC
from alpharl.reference import nets as R
from alpharl.sizes import N_ACTIONS


def layer_wb(p, layout, name: str):
    """(W [k_in, n_out], b [n_out]) of one layer in a flat buffer."""
    layer = layout.layers[name]
    return p[layer.w].reshape(layer.k_in, layer.n_out), p[layer.b]


def forward(h, th, p, target, layout, n_b: int, support=None) -> dict:
    """rl_narrow_forward: q_val, v_out, v_dq on every row of h; pi_logits, bce_out, aux_out on its first n_b
    rows; t_val = the target's q.val on th. V_dq on the support [V_MIN, V_MAX] (None: +-10)."""
    q_val = R.linear(h, *layer_wb(p, layout, "q.val"))
    return {"q_val": q_val, "v_out": R.linear(h, *layer_wb(p, layout, "v.out"))[:, 0],
            "v_dq": R.v_dq(q_val, support),
            "pi_logits": R.linear(h[:n_b], *layer_wb(p, layout, "pi.out")),
            "bce_out": R.linear(h[:n_b], *layer_wb(p, layout, "bce.out"))[:, 0],
            "aux_out": R.linear(h[:n_b], *layer_wb(p, layout, "aux.out"))[:, 0],
            "t_val": R.linear(th, *layer_wb(target, layout, "q.val"))}


def backward(h, p, layout, n_b: int, d_val, dv, d_pi, dbce, daux, dh_s):
    """rl_narrow_backward_dx + _dw: (dh [n_b + n_m, hidden], {layer name: (dW, db)}).

    h: the encoder output on [s_t (n_b) | s (n_m)]; dh_s [n_m, hidden]: the Q advantage
    stream's dX on the rows s, which dh adds before the tanh' factor."""
    n_m = len(d_val)
    grads = {}

    def layer(name, x, dy):
        dx, dw, db = R.linear_backward(x, dy, layer_wb(p, layout, name)[0])
        grads[name] = (dw, db)
        return dx

    h_t, h_s = h[:n_b], h[n_b:n_b + n_m]
    dh = np.concatenate([
        layer("pi.out", h_t, d_pi) + layer("v.out", h_t, dv[:, None]) + layer("bce.out", h_t, dbce[:, None])
        + layer("aux.out", h_t, daux[:, None]),
        dh_s + layer("q.val", h_s, d_val)])
    return dh * (1 - h[:n_b + n_m] ** 2), grads


def env_rows(inp: dict, isv, dtype=np.float64, mode: int = ENV_ONE_STEP) -> dict:
    """rl_env_rows on the dict of its inputs (v_s, v_dq, v_s_tp1, v_dq_tp1, reward, done, pi_logits,
    actions, logp_old, bce_out, label_up, aux_out, label_ret; ENV_GAE: ppo_adv and ret) at the ISV's alpha,
    gamma and PPO slots. The t+1 inputs may be shorter (n_next rows). ENV_COLLECT: d_pi and dv are zeros
    and the PPO/V outputs (loss_pi, loss_v, entropy, kl, ratio, advantage, ret) are absent."""
    n = len(inp["actions"])
    n_next = len(inp["v_s_tp1"])
    cast = lambda k: np.asarray(inp[k], dtype)  # noqa: E731
    v_used = np.zeros(n, np.float32)
    v_used_tp1 = np.zeros(n_next, np.float32)
    RC.rl_v_blend(inp["v_s"], inp["v_dq"], n, isv, v_used)
    RC.rl_v_blend(inp["v_s_tp1"], inp["v_dq_tp1"], n_next, isv, v_used_tp1)
    bl, dbce = R.scalar_loss(KL.LOSS_BCE, cast("bce_out"), cast("label_up"))
    al, daux = R.scalar_loss(KL.LOSS_MSE, cast("aux_out"), cast("label_ret"))
    out = {"v_used": v_used, "v_used_tp1": v_used_tp1, "dbce": dbce, "daux": daux, "loss_bce": bl, "loss_aux": al}
    if mode == ENV_COLLECT:
        return out | {"d_pi": np.zeros((n, N_ACTIONS), dtype), "dv": np.zeros(n, dtype)}
    if mode == ENV_GAE:
        ppo_adv, ret = cast("ppo_adv"), cast("ret")
    else:
        ppo_adv, ret = R.advantage_return(cast("reward"), cast("done"), v_used.astype(dtype), v_used_tp1.astype(dtype),
                                          dtype(isv[S.RL_GAMMA]))
        out |= {"advantage": ppo_adv, "ret": ret}
    pl, d_pi, ent, kl, ratio = R.ppo_loss(cast("pi_logits"), np.asarray(inp["actions"]), cast("logp_old"), ppo_adv,
                                          dtype(isv[S.RL_PPO_CLIP_EPS]), dtype(isv[S.RL_PPO_RATIO_CLAMP]),
                                          dtype(isv[S.RL_ENTROPY_COEF]))
    vl, dv = R.scalar_loss(KL.LOSS_HUBER, cast("v_s"), ret)
    return out | {"d_pi": d_pi, "entropy": ent, "kl": kl, "ratio": ratio, "dv": dv, "loss_pi": pl, "loss_v": vl}
