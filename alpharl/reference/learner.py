"""NumPy reference of one whole learning update (alpharl.learner.Learner.update).

Same sequence, same maths, on host arrays, in float64 (tests) or float32 (the
``numpy`` backend). ``total_loss`` is the scalar the update descends, with the
targets held fixed; tests differentiate it numerically.

The stacked encoder rows are [s_t (B) | s (M) | s' (M) | s_{t+1} (B)]; every
head's loss is a mean over its own batch and the encoder's gradient is the sum
of the heads' gradients (Q's from the replay rows s, the others' from s_t).

Modes as the device learner's (``mode``; alpharl.learner): ENV_COLLECT leaves PPO
and V out (zero head gradients, pi and V not stepped, their loss slots held);
ENV_GAE takes the rollout's T B env rows and B t+1 rows, and the advantages from
``gae_buffers`` (advantage, ret, ppo_adv: host arrays [T B]), which ``rl_gae`` fills
first when ``gae`` (alpharl.batches.GaeInputs on host arrays) is given.

``mirror`` (--mirror-policy; cuda_kernels/nets/mirror.py): the rows are
[s_t (B) | M s_t (B) | s | s' | s_{t+1}], the policy's logits z = (f(s_t) + P f(M s_t)) / 2,
and the PPO gradient reaches the encoder through both passes.

``policy_target`` (--q-target policy; cuda_kernels/sampling/policy_mixture.py): the C51 target is the
target net's distribution at s' mixed over the policy head's pi(. | s') (its own logits at the s' rows),
not Double DQN's (s', a*).
"""
from __future__ import annotations

from typing import NamedTuple

import numpy as np

from alpharl import isv as S
from alpharl.batches import EnvBatch, LearnerOutputs, ReplayBatch
from alpharl.cuda_kernels.nets import adam as KA
from alpharl.cuda_kernels.nets import losses as KL
from alpharl.cuda_kernels.nets.advantage import ENV_COLLECT, ENV_GAE, ENV_ONE_STEP
from alpharl.mirror import MIRROR_ACTION, levels_of, mirror_obs, symmetric_logits
from alpharl.nets import MODULES, NetLayout
from alpharl.reference import controllers as RC
from alpharl.reference import narrow as N
from alpharl.reference import nets as R
from alpharl.reference.rollout import rl_gae

_w = N.layer_wb


class UpdateResult(NamedTuple):
    """One reference update: the new state (as ``Nets.state_dict()``'s arrays), the updated ISV (a copy),
    the flat gradient and the per-sample outputs."""

    state: dict
    isv: np.ndarray
    grads: np.ndarray
    out: LearnerOutputs


def encode(p, layout: NetLayout, x):
    """(h1, h) of the encoder."""
    h1 = R.linear(x, *_w(p, layout, "enc.l1"), "tanh")
    return h1, R.linear(h1, *_w(p, layout, "enc.l2"), "tanh")


def pi_logits(p, layout: NetLayout, obs, mirror: bool = False) -> np.ndarray:
    """float32 [b, N_ACTIONS]: the policy's logits at obs [b, obs_dim] (acting; no gradient); with ``mirror``
    the mirror-averaged z (module docstring)."""
    def f(x):
        return R.linear(encode(p, layout, x)[1], *_w(p, layout, "pi.out"))
    if mirror:
        return np.asarray(symmetric_logits(f, np.asarray(obs), levels_of(layout.obs_dim)), np.float32)
    return np.asarray(f(obs), np.float32)


def forward(p, target, layout: NetLayout, env: EnvBatch, rep: ReplayBatch, dtype=np.float64, support=None,
            mirror: bool = False, policy_target: bool = False) -> dict:
    """Every activation of the update at parameters p (online) and target (encoder + Q); V_dq on the
    C51 support [V_MIN, V_MAX] (None: the bootstrap +-10). ``mirror``: module docstring (``pi_logits`` is z).
    ``policy_target``: also ``pi_sp``, the policy head's logits at the replay rows' s'."""
    cast = lambda a: np.asarray(a, dtype)  # noqa: E731
    b, m, n_next = len(env.action), len(rep.action), len(env.obs_next)
    env_rows = [cast(env.obs)] + ([mirror_obs(cast(env.obs), levels_of(layout.obs_dim))] if mirror else [])
    bm = b * len(env_rows)
    x0 = np.concatenate([*env_rows, cast(rep.obs), cast(rep.obs_next), cast(env.obs_next)])
    h1, h = encode(p, layout, x0)
    _, th = encode(target, layout, cast(rep.obs_next))
    o_s, o_sp, o_tp1 = bm, bm + m, bm + 2 * m
    fw = {
        "b": b, "bm": bm, "m": m, "n_next": n_next, "x0": x0, "h1": h1, "h": h,
        "q_adv": R.linear(h[o_s:o_tp1], *_w(p, layout, "q.adv")),
        "t_adv": R.linear(th, *_w(target, layout, "q.adv")),
        **N.forward(h, th, p, target, layout, bm, support),  # q_val, t_val, pi_logits, v_out, bce_out, aux_out, v_dq
        "o_s": o_s, "o_sp": o_sp, "o_tp1": o_tp1,
    }
    if policy_target:
        fw["pi_sp"] = R.linear(h[o_sp:o_tp1], *_w(p, layout, "pi.out"))
    if mirror:   # the pi head on [s_t | M s_t] -> z on s_t
        f = fw["pi_logits"]
        fw["pi_logits"] = 0.5 * (f[:b] + f[b:][:, MIRROR_ACTION])
        fw["bce_out"], fw["aux_out"] = fw["bce_out"][:b], fw["aux_out"][:b]
    return fw


def targets(fw: dict, env: EnvBatch, rep: ReplayBatch, isv, dtype=np.float64, mode: int = ENV_ONE_STEP,
            gae=None, gae_buffers: dict | None = None) -> dict:
    """The stop-gradient quantities: a*, projected C51 target, V blend (updates isv), advantage, return and the
    PPO advantage (ENV_COLLECT: none of the last three; ENV_GAE: from gae_buffers, filled by rl_gae if gae).

    The C51 target reads the support and the replay rewards at the reward gain held in isv."""
    b, m, n_next = fw["b"], fw["m"], fw["n_next"]
    gamma = dtype(isv[S.RL_GAMMA])
    cast = lambda a: np.asarray(a, dtype)  # noqa: E731
    sup = R.support_of(isv)
    a_star = R.argmax_expected_q(fw["q_adv"][m:], fw["q_val"][fw["o_sp"]:fw["o_tp1"]], sup)
    m_tgt, e_target = R.c51_target(fw["t_adv"], fw["t_val"], a_star, replay_reward(rep, isv, dtype), cast(rep.done),
                                   gamma, sup, fw.get("pi_sp"))
    v_scalar, v_dq = fw["v_out"], fw["v_dq"]
    RC.rl_v_blend_alpha_controller(v_scalar[:b], v_dq[:b], b, isv)
    v_used = np.zeros(b, np.float32)
    v_used_next = np.zeros(n_next, np.float32)
    RC.rl_v_blend(v_scalar[:b], v_dq[:b], b, isv, v_used)
    RC.rl_v_blend(v_scalar[fw["o_tp1"]:], v_dq[fw["o_tp1"]:], n_next, isv, v_used_next)
    fixed = {"a_star": a_star, "m": m_tgt, "e_target": e_target, "v_used": v_used, "v_used_next": v_used_next,
             "advantage": None, "ret": None, "ppo_adv": None}
    if mode == ENV_ONE_STEP:
        adv, ret = R.advantage_return(cast(env.reward), cast(env.done), cast(v_used), cast(v_used_next), gamma)
        fixed |= {"advantage": adv, "ret": ret, "ppo_adv": adv}
    elif mode == ENV_GAE:
        g = gae_buffers
        if gae is not None:
            last, o_tp1 = b - n_next, fw["o_tp1"]
            rl_gae(gae.reward, gae.done, gae.v_used, v_scalar[last:b], v_dq[last:b], v_scalar[o_tp1:],
                   v_dq[o_tp1:], b // n_next, n_next, gae.lam, isv, g["advantage"], g["ret"], g["ppo_adv"], dtype)
        fixed |= {k: cast(g[k][:b]) for k in ("advantage", "ret", "ppo_adv")}
    return fixed


def replay_reward(rep: ReplayBatch, isv, dtype=np.float64):
    """The replay minibatch's rewards in learning units: as stored, times the reward gain (``reward_gain``)."""
    r = np.asarray(rep.reward, dtype)
    g = R.gain_of(isv)
    return r * dtype(g) if g != 1 else r


def head_losses(fw: dict, env: EnvBatch, rep: ReplayBatch, fixed: dict, isv, dtype=np.float64) -> dict:
    """Per-sample losses and d(loss)/d(head output) of all five heads at fixed targets (no PPO/V losses and
    zero gradients of theirs where ``fixed`` has no PPO advantage: a collect step)."""
    b, m = fw["b"], fw["m"]
    cast = lambda a: np.asarray(a, dtype)  # noqa: E731
    ce, lq, d_adv, d_val, e_online = R.c51_loss(fw["q_adv"][:m], fw["q_val"][fw["o_s"]:fw["o_sp"]],
                                                 np.asarray(rep.action), fixed["m"], cast(rep.is_weight),
                                                 R.support_of(isv))
    if fixed["ppo_adv"] is None:
        pl = d_pi = ent = kl = ratio = vl = None
        d_pi, dv = np.zeros((b, fw["pi_logits"].shape[1]), fw["pi_logits"].dtype), np.zeros(b, fw["v_out"].dtype)
    else:
        pl, d_pi, ent, kl, ratio = R.ppo_loss(fw["pi_logits"], np.asarray(env.action), cast(env.logp_old),
                                              fixed["ppo_adv"], dtype(isv[S.RL_PPO_CLIP_EPS]),
                                              dtype(isv[S.RL_PPO_RATIO_CLAMP]), dtype(isv[S.RL_ENTROPY_COEF]))
        vl, dv = R.scalar_loss(KL.LOSS_HUBER, fw["v_out"][:b], fixed["ret"])
    bl, dbce = R.scalar_loss(KL.LOSS_BCE, fw["bce_out"], cast(env.label_up))
    al, daux = R.scalar_loss(KL.LOSS_MSE, fw["aux_out"], cast(env.label_ret))
    return {"q_ce": ce, "q_loss_weighted": lq, "d_adv": d_adv, "d_val": d_val, "e_online": e_online,
            "pi": pl, "d_pi": d_pi, "entropy": ent, "kl": kl, "ratio": ratio,
            "v": vl, "dv": dv, "bce": bl, "dbce": dbce, "aux": al, "daux": daux}


def total_loss(p, target, layout: NetLayout, env: EnvBatch, rep: ReplayBatch, fixed: dict, isv,
               dtype=np.float64, mirror: bool = False) -> float:
    """L = L_q (IS-weighted) + L_pi + L_v + L_bce + L_aux at parameters p, targets held fixed (no L_pi, L_v on
    a collect step)."""
    fw = forward(p, target, layout, env, rep, dtype, R.support_of(isv), mirror)
    hl = head_losses(fw, env, rep, fixed, isv, dtype)
    ppo_v = 0.0 if hl["pi"] is None else hl["pi"].mean() + hl["v"].mean()
    return float(hl["q_loss_weighted"] + ppo_v + hl["bce"].mean() + hl["aux"].mean())


def gradients(p, layout: NetLayout, fw: dict, hl: dict) -> np.ndarray:
    """The flat gradient of total_loss (analytic backward, as the kernels run it)."""
    b, bm = fw["b"], fw["bm"]
    h, h1 = fw["h"], fw["h1"]
    g = np.zeros_like(p)
    d_pi, dv, dbce, daux = hl["d_pi"], hl["dv"], hl["dbce"], hl["daux"]
    if bm > b:   # the mirror: dL/dz half to each pass (the mirror pass's through P), nothing else on its rows
        d_pi = 0.5 * np.concatenate([d_pi, d_pi[:, np.argsort(MIRROR_ACTION)]])
        dv, dbce, daux = (np.concatenate([x, np.zeros_like(x)]) for x in (dv, dbce, daux))
    o_s, o_sp = fw["o_s"], fw["o_sp"]

    def head(name, x, dy):
        layer = layout.layers[name]
        w, _ = _w(p, layout, name)
        dx, dw, db = R.linear_backward(x, dy, w)
        g[layer.w] = dw.ravel()
        g[layer.b] = db
        return dx

    # The Q advantage stream's dX on s, then the narrow layers (q.val on s; pi, V, BCE, AUX on s_t) and tanh'.
    dh_s = head("q.adv", h[o_s:o_sp], hl["d_adv"])
    dpre2, narrow = N.backward(h, p, layout, bm, hl["d_val"], dv, d_pi, dbce, daux, dh_s)
    for name, (dw, db) in narrow.items():
        g[layout.layers[name].w] = dw.ravel()
        g[layout.layers[name].b] = db
    grows = bm + fw["m"]
    dh1 = head("enc.l2", h1[:grows], dpre2) * (1 - h1[:grows] ** 2)
    head("enc.l1", fw["x0"][:grows], dh1)
    return g


def relative_update(p_w, g_w, m_w, v_w, t: int, lr: float, ref_sq: float) -> float:
    """rl_grad_guard's rho = lr ||u|| / max(||p_w||, sqrt(ref_sq)) of the Adam step at step t
    (u = m_hat / (sqrt(v_hat) + eps), from this gradient and the last moments); 0 when the norm is 0."""
    m1, v1 = R.adam_moments(m_w, v_w, g_w)
    u = (m1 / (1 - KA.ADAM_BETA1 ** t)) / (np.sqrt(v1 / (1 - KA.ADAM_BETA2 ** t)) + KA.ADAM_EPS)
    pn = np.sqrt(max((p_w * p_w).sum(), ref_sq))
    return float(lr * np.sqrt((u * u).sum()) / pn) if pn > 0 else 0.0


def update(state: dict, isv, env: EnvBatch, rep: ReplayBatch, layout: NetLayout, dtype=np.float64,
           mode: int = ENV_ONE_STEP, gae=None, gae_buffers: dict | None = None, rel_update: bool = False,
           ranks=None, mirror: bool = False, policy_target: bool = False) -> UpdateResult:
    """One whole learning update. state: params, adam_m, adam_v, target, adam_state (as Nets.state_dict()).
    mode, gae, gae_buffers: see the module docstring. rel_update: also each learning module's relative update
    into its RL_OBS_*_REL_UPDATE slot (rl_grad_guard's flag). ranks: alpharl.ranks.RankSync (float32 only) with
    data-parallel ranks: the gradient and the ISV's batch statistics averaged over them before the guard.
    mirror: the mirror-equivariant actor (module docstring). policy_target: the C51 target under the acting
    policy (module docstring).

    Returns the new state, the updated isv (a copy), the gradient and every per-sample output (the PPO/V ones
    None on a collect step).
    """
    isv = np.array(isv, np.float32, copy=True)
    p = np.asarray(state["params"], dtype)
    target = np.asarray(state["target"], dtype)
    fw = forward(p, target, layout, env, rep, dtype, R.support_of(isv), mirror, policy_target)
    fixed = targets(fw, env, rep, isv, dtype, mode, gae, gae_buffers)
    hl = head_losses(fw, env, rep, fixed, isv, dtype)
    g = gradients(p, layout, fw, hl)
    learns = [mode != ENV_COLLECT or mod not in ("pi", "v") for mod in MODULES]
    isv[S.RL_LOSS_Q] = hl["q_ce"].mean()
    if hl["pi"] is not None:
        isv[S.RL_LOSS_PI] = hl["pi"].mean()
        isv[S.RL_LOSS_V] = hl["v"].mean()
    isv[S.RL_LOSS_BCE] = hl["bce"].mean()
    isv[S.RL_LOSS_AUX] = hl["aux"].mean()
    if ranks is not None:
        g = np.ascontiguousarray(g, np.float32)
        ranks.learn(g, isv, ranks.open_gate)
    new_p = p.copy()
    new_m = np.asarray(state["adam_m"], dtype).copy()
    new_v = np.asarray(state["adam_v"], dtype).copy()
    st = np.array(state["adam_state"], np.int32).reshape(len(MODULES), KA.STATE_COLS).copy()
    for k, mod in enumerate(MODULES):
        if not learns[k]:   # the guard's module mask: disarmed, nothing else written
            st[k, KA.STATE_ARMED] = 0
            continue
        sl = layout.module_slice[mod]
        gm = g[sl]
        isv[S.RL_OBS_Q_GRAD_NORM + k] = np.sqrt((gm[: layout.n_w[mod]] ** 2).sum())
        if not np.isfinite(np.sqrt((gm ** 2).sum())):
            st[k, KA.STATE_ARMED] = 0
            isv[S.RL_NAN_SKIPS_Q + k] += 1
            continue
        if rel_update:
            nw = layout.n_w[mod]
            isv[S.RL_OBS_Q_REL_UPDATE + k] = relative_update(
                p[sl][:nw], gm[:nw], new_m[sl][:nw], new_v[sl][:nw], int(st[k, KA.STATE_STEP]) + 1,
                dtype(isv[S.RL_LR_Q + k]), layout.w_ref_sq[mod])
        st[k, KA.STATE_STEP] += 1
        st[k, KA.STATE_ARMED] = 1
        new_p[sl], new_m[sl], new_v[sl] = R.adam(p[sl], gm, new_m[sl], new_v[sl], st[k, KA.STATE_STEP],
                                                 dtype(isv[S.RL_LR_Q + k]))
    n, o_tp1, n_next = fw["b"], fw["o_tp1"], fw["n_next"]
    gamma = dtype(isv[S.RL_GAMMA])
    r_rep = replay_reward(rep, isv, dtype)
    td = r_rep + gamma * (1 - np.asarray(rep.done, dtype)) * fixed["e_target"] - hl["e_online"]
    out = LearnerOutputs(
        q_priority=hl["q_ce"], td=td, entropy=hl["entropy"], kl=hl["kl"], ratio=hl["ratio"],
        advantage=fixed["advantage"], ret=fixed["ret"], a_star=fixed["a_star"], v_used=fixed["v_used"],
        v_used_next=fixed["v_used_next"], v_scalar=fw["v_out"][:n], v_dq=fw["v_dq"][:n],
        v_scalar_next=fw["v_out"][o_tp1:o_tp1 + n_next], v_dq_next=fw["v_dq"][o_tp1:o_tp1 + n_next],
        pi_logits=fw["pi_logits"])
    state = {"params": new_p, "adam_m": new_m, "adam_v": new_v, "target": target, "adam_state": st.reshape(-1)}
    return UpdateResult(state, isv, g, out)


def soft_update(target, params, n_target: int, isv):
    """rl_soft_update over the target prefix (encoder + Q)."""
    tau = float(isv[S.RL_TARGET_TAU])
    return R.soft_update(np.asarray(target), np.asarray(params)[:n_target], tau)
