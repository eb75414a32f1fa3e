"""NumPy references of the controllers (cuda_kernels/controllers).

Each function takes the host ISV (float32 array) and updates it in place with
the same rule, in float32, as its kernel. Constants come from the kernel
modules: one definition each.
"""
import math

import numpy as np

from alpharl import isv as S
from alpharl.cuda_kernels.controllers import anchors as AN
from alpharl.cuda_kernels.controllers import k_loop as KL
from alpharl.cuda_kernels.controllers import lr as LR
from alpharl.cuda_kernels.controllers import per as PER
from alpharl.cuda_kernels.controllers import ppo as PPO
from alpharl.cuda_kernels.controllers import reward_norm as RN
from alpharl.cuda_kernels.controllers import target_tau as TAU
from alpharl.cuda_kernels.controllers import v_blend as VB
from alpharl.cuda_kernels.controllers.signals import COL_DST, COL_GATE, COL_SRC

f32 = np.float32


def _finite(x):
    return bool(np.isfinite(x))


def _observed(x):
    return _finite(x) and x != 0


def _clamp(x, lo, hi):
    return f32(min(max(f32(x), f32(lo)), f32(hi)))


def _ema(ema, obs, beta):
    return f32(obs) if ema == 0 else f32(f32(beta) * f32(ema) + (f32(1) - f32(beta)) * f32(obs))


def rl_v_blend_alpha_controller(v_scalar, v_dq, n, isv, gate=(1,)):
    if gate[0] == 0:
        return
    err_ema, mag_ema = isv[S.RL_V_TRACK_ERR_EMA], isv[S.RL_V_SCALAR_MAG_EMA]
    fresh = err_ema == 0 and mag_ema == 0
    if n > 0:
        vs = np.asarray(v_scalar[:n], np.float32)
        obs_err = f32(np.abs(np.asarray(v_dq[:n], np.float32) - vs).sum(dtype=np.float32) / f32(n))
        obs_mag = f32(np.abs(vs).sum(dtype=np.float32) / f32(n))
        if _finite(obs_err) and _finite(obs_mag):
            err_ema = _ema(err_ema, obs_err, VB.V_EMA_BETA)
            mag_ema = _ema(mag_ema, obs_mag, VB.V_EMA_BETA)
            isv[S.RL_V_TRACK_ERR_EMA], isv[S.RL_V_SCALAR_MAG_EMA] = err_ema, mag_ema
        else:
            isv[S.RL_NAN_SIGNALS] += 1
    alpha = isv[S.RL_V_BLEND_ALPHA]
    if alpha == 0 and fresh:
        alpha = f32(VB.V_ALPHA_BOOTSTRAP)
    elif mag_ema >= f32(VB.V_DEAD_SIGNAL):
        ratio = f32(err_ema / mag_ema)
        if ratio > f32(VB.V_TRACK_BAND * VB.V_TRACK_TARGET):
            alpha = f32(alpha + f32(VB.V_ALPHA_STEP))
        elif ratio < f32(VB.V_TRACK_TARGET / VB.V_TRACK_BAND):
            alpha = f32(alpha - f32(VB.V_ALPHA_STEP))
    isv[S.RL_V_BLEND_ALPHA] = _clamp(alpha, 0.0, 1.0)


def rl_v_blend(v_scalar, v_dq, n, isv, out, gate=(1,)):
    if gate[0] == 0:
        return
    a = isv[S.RL_V_BLEND_ALPHA]
    out[:n] = a * np.asarray(v_scalar[:n], np.float32) + (f32(1) - a) * np.asarray(v_dq[:n], np.float32)


def _ppo_updated(isv):
    return isv[S.RL_OBS_PPO_SAMPLES] > 0


def _ppo_informed(isv):
    return isv[S.RL_OBS_PPO_INFORMED] > 0


def _adv_var_ratio(isv):
    a, r = isv[S.RL_ADV_VAR_EMA], isv[S.RL_RETURN_VAR_EMA]
    if _observed(a) and _observed(r) and a > 0 and r > 0 and _ppo_updated(isv):
        return min(f32(a / r), f32(1))
    return f32(0)


def rl_ppo_informed(isv, flags):
    n = isv[S.RL_OBS_PPO_SAMPLES]
    if flags & AN.FLAG_ANCHORS and S.decode_k(isv) == 1:
        n = f32(0)
    isv[S.RL_OBS_PPO_INFORMED] = n


def _lr_law(lr_prev, sig, isv, live=True):
    if sig < 0 or lr_prev == 0 or not _finite(lr_prev):
        return f32(S.LR_BOOTSTRAP)
    if not live:
        return f32(lr_prev)
    ema = isv[sig]
    if not _observed(ema) or ema < 0:
        return f32(lr_prev)
    raw = isv[sig + S.GRAD_NORM_OBS_OFFSET]
    gn_target = isv[sig + S.GN_TARGET_OFFSET]
    if not (gn_target > 0 and _finite(gn_target)):
        gn_target = f32(LR.TARGET_GRAD_NORM)
    target = f32(f32(lr_prev * gn_target) / max(ema, f32(LR.LR_EPS)))
    s = f32(ema * ema)
    d = f32(raw - ema) if _finite(raw) else ema
    w = max(f32(LR.LR_WIENER_FLOOR), f32(s / (s + d * d)))
    return _clamp(w * target + (f32(1) - w) * lr_prev, S.LR_MIN, S.LR_MAX)


def rl_lr_controller(isv, q_signal_slot, pi_signal_slot, v_signal_slot, bce_signal_slot, aux_signal_slot, enc_signal_slot):
    sigs = (q_signal_slot, pi_signal_slot, v_signal_slot, bce_signal_slot, aux_signal_slot, enc_signal_slot)
    for slot, sig in zip(S.LR_SLOTS, sigs):
        isv[slot] = _lr_law(isv[slot], sig, isv, slot not in LR.PPO_LR_SLOTS or _ppo_updated(isv))


def rl_signal_ema(isv, table, beta, n_rows):
    bad = 0.0
    snapshot = isv.copy()  # rows read the ISV as it was at launch (sources and destinations are disjoint)
    for r in range(n_rows):
        gate = table[r, COL_GATE]
        if gate < 0 or snapshot[gate] > 0:
            obs = snapshot[table[r, COL_SRC]]
            if not _finite(obs):
                bad += 1
            else:
                dst = table[r, COL_DST]
                isv[dst] = _ema(isv[dst], obs, beta[r])
    if bad > 0:
        isv[S.RL_NAN_SIGNALS] += f32(bad)


def rl_ppo_clip_controller(isv):
    eps, kl, t = isv[S.RL_PPO_CLIP_EPS], isv[S.RL_KL_EMA], isv[S.RL_KL_TARGET]
    hi, lo = f32(PPO.KL_TARGET * PPO.KL_BAND), f32(PPO.KL_TARGET / PPO.KL_BAND)
    if t > 0:
        hi, lo = f32(t * f32(PPO.KL_BAND)), f32(t / f32(PPO.KL_BAND))
    if isv[S.RL_CLIP_EPS_ANCHOR] > 0:
        eps = isv[S.RL_CLIP_EPS_ANCHOR]
    elif eps == 0:
        eps = f32(PPO.CLIP_EPS_BOOTSTRAP)
    elif _observed(kl) and _ppo_informed(isv):
        if kl > hi:
            eps = f32(eps / f32(PPO.CLIP_EPS_STEP))
        elif kl < lo:
            eps = f32(eps * f32(PPO.CLIP_EPS_STEP))
    isv[S.RL_PPO_CLIP_EPS] = _clamp(eps, PPO.CLIP_EPS_MIN, PPO.CLIP_EPS_MAX)


def rl_ratio_clamp_controller(isv):
    c, tail = isv[S.RL_PPO_RATIO_CLAMP], isv[S.RL_RATIO_TAIL_EMA]
    if c == 0:
        c = f32(PPO.RATIO_CLAMP_BOOTSTRAP)
    elif _observed(tail) and tail > 0 and _ppo_informed(isv):
        c = f32(c + f32(PPO.RATIO_CLAMP_GAIN) * (f32(PPO.RATIO_TAIL_MULT) * tail - c))
    isv[S.RL_PPO_RATIO_CLAMP] = _clamp(c, PPO.RATIO_CLAMP_MIN, PPO.RATIO_CLAMP_MAX)


def rl_entropy_coef_controller(isv):
    coef, h, target = isv[S.RL_ENTROPY_COEF], isv[S.RL_ENTROPY_EMA], isv[S.RL_ENTROPY_TARGET]
    if not target > 0:
        target = f32(PPO.ENTROPY_TARGET)
    if coef == 0:
        coef = f32(PPO.ENTROPY_COEF_BOOTSTRAP)
    elif _observed(h) and h > 0 and _ppo_updated(isv):
        gap = f32((target - h) / target)
        coef = f32(coef * f32(math.exp(f32(PPO.ENTROPY_GAIN) * gap)))
    isv[S.RL_ENTROPY_COEF] = _clamp(coef, PPO.ENTROPY_COEF_MIN, PPO.ENTROPY_COEF_MAX)


def rl_target_tau_controller(isv):
    tau, k = isv[S.RL_TARGET_TAU], isv[S.RL_TD_KURTOSIS_EMA]
    if tau == 0:
        tau = f32(TAU.TAU_BOOTSTRAP)
    elif _observed(k) and k > 0:
        aim = f32(f32(TAU.TAU_GAUSSIAN) * min(f32(1), f32(f32(TAU.GAUSSIAN_KURTOSIS) / k)))
        tau = f32(tau + f32(TAU.TAU_GAIN) * (aim - tau))
    isv[S.RL_TARGET_TAU] = _clamp(tau, TAU.TAU_MIN, TAU.TAU_GAUSSIAN)


def rl_per_controller(isv):
    if isv[S.RL_GAMMA] == 0:
        isv[S.RL_GAMMA] = f32(S.GAMMA_BOOTSTRAP)
    f, alpha, beta = isv[S.RL_PER_ESS_FRAC], isv[S.RL_PER_ALPHA], isv[S.RL_PER_BETA]
    live = _observed(f) and f > 0
    if alpha == 0:
        alpha = f32(PER.PER_ALPHA_BOOTSTRAP)
    elif live:
        if f < f32(PER.PER_ESS_TARGET / PER.PER_ESS_BAND):
            alpha = f32(alpha - f32(PER.PER_ALPHA_STEP))
        elif f > f32(PER.PER_ESS_TARGET * PER.PER_ESS_BAND):
            alpha = f32(alpha + f32(PER.PER_ALPHA_STEP))
    if beta == 0:
        beta = f32(PER.PER_BETA_BOOTSTRAP)
    elif live:
        beta = f32(f32(PER.PER_BETA_MIN) + f32(1.0 - PER.PER_BETA_MIN) * (f32(1) - min(f, f32(1))))
    isv[S.RL_PER_ALPHA] = _clamp(alpha, PER.PER_ALPHA_MIN, PER.PER_ALPHA_MAX)
    isv[S.RL_PER_BETA] = _clamp(beta, PER.PER_BETA_MIN, PER.PER_BETA_MAX)


def rl_k_loop_controller(isv):
    mult, fl = isv[S.RL_K_LOOP_MULT], isv[S.RL_K_RATIO_FLOOR]
    hi, lo = f32(KL.K_RATIO_HI), f32(KL.K_RATIO_LO)
    if 0 < fl <= 1:
        hi, lo = f32(fl + f32(hi * f32(1 - fl))), f32(fl + f32(lo * f32(1 - fl)))
        v = isv[S.RL_K_RATIO_VAR]
        if v > 0:
            hi = max(hi, f32(isv[S.RL_K_RATIO_MEAN] + f32(f32(KL.K_NOISE_Z) * np.sqrt(v))))
    ratio = _adv_var_ratio(isv)
    if mult == 0:
        mult = f32(S.K_FIXED_POINT)
    elif ratio > 0:
        if ratio > hi:
            mult = f32(mult + f32(KL.K_STEP))
        elif ratio < lo:
            mult = f32(mult - f32(KL.K_STEP))
    isv[S.RL_K_LOOP_MULT] = _clamp(mult, S.K_FIXED_POINT, S.K_MAX * S.K_FIXED_POINT)


def rl_k_gate(isv, k, gate):
    gate[0] = 1 if k < S.decode_k(isv) else 0


def rl_anchor_controller(isv, flags):
    if not isv[S.RL_REWARD_GAIN] > 0:
        isv[S.RL_REWARD_GAIN] = f32(1)
    if not isv[S.RL_SUPPORT_V_MAX] > 0:
        isv[S.RL_SUPPORT_V_MAX], isv[S.RL_SUPPORT_V_MIN] = f32(S.V_MAX_BOOTSTRAP), f32(S.V_MIN_BOOTSTRAP)
    if not flags & AN.FLAG_ANCHORS:
        return
    h = isv[S.RL_ENTROPY_EMA]
    if _observed(h) and h > 0:
        isv[S.RL_KL_TARGET] = f32(f32(AN.KL_PER_NAT) * h)
    rho_pi = f32(AN.REL_UPDATE_TARGET)
    if flags & AN.FLAG_PACE:
        kl_star, rho_pi = isv[S.RL_KL_TARGET], isv[S.RL_PI_REL_TARGET]
        kl = f32(isv[S.RL_OBS_KL] - isv[S.RL_OBS_KL_FIRST])
        if not (rho_pi > 0 and _finite(rho_pi)):
            rho_pi = f32(AN.REL_UPDATE_TARGET)
        elif _ppo_informed(isv) and _observed(kl) and kl > 0 and kl_star > 0:
            rho_pi = f32(rho_pi * np.exp(f32(f32(AN.PACE_GAIN) * np.log(f32(kl_star / kl)))))
        rho_pi = _clamp(rho_pi, AN.PI_REL_MIN, AN.PI_REL_MAX)
        isv[S.RL_PI_REL_TARGET] = rho_pi
        if kl_star > 0:
            isv[S.RL_CLIP_EPS_ANCHOR] = f32(f32(AN.CLIP_RMS_MULT) * np.sqrt(f32(2) * kl_star))
    for h, ema_slot in enumerate(S.GRAD_NORM_EMA_SLOTS):
        ema, rho = isv[ema_slot], isv[ema_slot + AN.REL_FROM_EMA]
        target = rho_pi if h == AN.PI_HEAD else f32(AN.REL_UPDATE_TARGET)
        if _observed(ema) and ema > 0 and _observed(rho) and rho > 0:
            isv[ema_slot + S.GN_TARGET_OFFSET] = f32(f32(ema * target) / rho)
    tau = isv[S.RL_TARGET_TAU]
    if not (tau > 0 and _finite(tau)):
        tau = f32(TAU.TAU_BOOTSTRAP)
    n1 = f32(AN.N_ACTIONS - 1)
    p = min(f32(tau), f32(0.5 / (AN.N_ACTIONS - 1)))
    q = f32(1 - n1 * p)
    isv[S.RL_ENTROPY_TARGET] = f32(-q * f32(math.log(q)) - f32(n1 * p) * f32(math.log(p)))
    ratio = _adv_var_ratio(isv)
    if ratio > 0:
        if flags & AN.FLAG_K_NOISE:
            m, a = isv[S.RL_K_RATIO_MEAN], f32(AN.K_FLOOR_LEAK)
            if m > 0:
                d = f32(ratio - m)
                isv[S.RL_K_RATIO_MEAN] = f32(m + f32(a * d))
                isv[S.RL_K_RATIO_VAR] = f32(f32(1.0 - AN.K_FLOOR_LEAK) * f32(isv[S.RL_K_RATIO_VAR] + f32(f32(a * d) * d)))
            else:
                isv[S.RL_K_RATIO_MEAN] = ratio
        fl = isv[S.RL_K_RATIO_FLOOR]
        if fl > 0:
            ratio = min(ratio, f32(fl + f32(f32(AN.K_FLOOR_LEAK) * f32(ratio - fl))))
        isv[S.RL_K_RATIO_FLOOR] = ratio


def rl_reward_norm(reward, n, scale, done, ret_run, flags, isv, out, out_stored):
    """out_stored = reward x scale (r), the running statistics of r, r^2 and R^2 (R_b <- gamma R_b + r_b,
    0 after done, in place), the gain (FLAG_NORM), the support (FLAG_SUPPORT); out = r x gain."""
    x = np.asarray(reward[:n], np.float32) * f32(scale)
    out_stored[:n] = x
    ok = np.isfinite(x)
    gamma = f32(isv[S.RL_GAMMA])
    with np.errstate(invalid="ignore"):  # a non-finite r: its R is held below
        ret = (gamma * np.asarray(ret_run[:n], np.float32) + x).astype(np.float32)
        kept = ret * (f32(1) - np.asarray(done[:n], np.float32))
    seen = int(ok.sum())
    if seen < n:
        isv[S.RL_NAN_SIGNALS] += f32(n - seen)
    ret_run[:n] = np.where(ok, kept, ret_run[:n])
    if seen > 0:
        x64, ret64 = x[ok].astype(np.float64), ret[ok].astype(np.float64)
        c = isv[S.RL_REWARD_NORM_COUNT]
        w = f32(f32(1) / min(f32(c + f32(1)), f32(RN.REWARD_NORM_HORIZON)))
        for slot, obs in ((S.RL_REWARD_MEAN_EMA, x64.sum() / seen), (S.RL_REWARD_SQ_EMA, (x64 * x64).sum() / seen),
                          (S.RL_RETURN_SQ_EMA, (ret64 * ret64).sum() / seen)):
            isv[slot] = f32(f32(f32(1) - w) * isv[slot] + w * f32(obs))
        isv[S.RL_REWARD_NORM_COUNT] = min(f32(c + f32(1)), f32(RN.REWARD_NORM_HORIZON))
    ms = isv[S.RL_RETURN_SQ_EMA]
    live = ms > 0 and _finite(ms)
    g = isv[S.RL_REWARD_GAIN]
    if not (g > 0 and _finite(g)):
        g = f32(1)
    if not flags & RN.FLAG_NORM:
        g = f32(1)
    elif live:
        g = f32(f32(1) / f32(np.sqrt(ms)))
    isv[S.RL_REWARD_GAIN] = g
    v_max = isv[S.RL_SUPPORT_V_MAX]
    if not (v_max > 0 and _finite(v_max)):
        v_max = f32(S.V_MAX_BOOTSTRAP)
        isv[S.RL_SUPPORT_V_MIN] = f32(S.V_MIN_BOOTSTRAP)
    elif flags & RN.FLAG_SUPPORT and live:
        tau = isv[S.RL_TARGET_TAU]
        if not tau > 0:
            tau = f32(TAU.TAU_BOOTSTRAP)
        aim = f32(f32(f32(RN.SUPPORT_RMS_MULT) * f32(np.sqrt(ms))) * g)
        v_max = _clamp(v_max + f32(tau * f32(aim - v_max)), RN.SUPPORT_V_MAX_LO, RN.SUPPORT_V_MAX_HI)
        isv[S.RL_SUPPORT_V_MIN] = -v_max
    isv[S.RL_SUPPORT_V_MAX] = v_max
    out[:n] = x * g if g != 1 else x
