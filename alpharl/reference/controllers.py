"""NumPy references of the controllers (cuda_kernels/controllers).

Each function takes the host ISV (float32 array) and updates it in place with
the same rule, in float32, as its kernel. Constants come from the kernel
modules: one definition each.
"""
import math

import numpy as np

from alpharl import isv as S
from alpharl.cuda_kernels.controllers import k_loop as KL
from alpharl.cuda_kernels.controllers import lr as LR
from alpharl.cuda_kernels.controllers import per as PER
from alpharl.cuda_kernels.controllers import ppo as PPO
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


def _lr_law(lr_prev, sig, isv):
    if sig < 0 or lr_prev == 0 or not _finite(lr_prev):
        return f32(S.LR_BOOTSTRAP)
    ema = isv[sig]
    if not _observed(ema) or ema < 0:
        return f32(lr_prev)
    raw = isv[sig + S.GRAD_NORM_OBS_OFFSET]
    target = f32(lr_prev * f32(LR.TARGET_GRAD_NORM) / max(ema, f32(LR.LR_EPS)))
    s = f32(ema * ema)
    d = f32(raw - ema) if _finite(raw) else ema
    w = max(f32(LR.LR_WIENER_FLOOR), f32(s / (s + d * d)))
    return _clamp(w * target + (f32(1) - w) * lr_prev, S.LR_MIN, S.LR_MAX)


def rl_lr_controller(isv, q_signal_slot, pi_signal_slot, v_signal_slot, bce_signal_slot, aux_signal_slot, enc_signal_slot):
    sigs = (q_signal_slot, pi_signal_slot, v_signal_slot, bce_signal_slot, aux_signal_slot, enc_signal_slot)
    for slot, sig in zip(S.LR_SLOTS, sigs):
        isv[slot] = _lr_law(isv[slot], sig, isv)


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
    eps, kl = isv[S.RL_PPO_CLIP_EPS], isv[S.RL_KL_EMA]
    if eps == 0:
        eps = f32(PPO.CLIP_EPS_BOOTSTRAP)
    elif _observed(kl):
        if kl > f32(PPO.KL_TARGET * PPO.KL_BAND):
            eps = f32(eps / f32(PPO.CLIP_EPS_STEP))
        elif kl < f32(PPO.KL_TARGET / PPO.KL_BAND):
            eps = f32(eps * f32(PPO.CLIP_EPS_STEP))
    isv[S.RL_PPO_CLIP_EPS] = _clamp(eps, PPO.CLIP_EPS_MIN, PPO.CLIP_EPS_MAX)


def rl_ratio_clamp_controller(isv):
    c, tail = isv[S.RL_PPO_RATIO_CLAMP], isv[S.RL_RATIO_TAIL_EMA]
    if c == 0:
        c = f32(PPO.RATIO_CLAMP_BOOTSTRAP)
    elif _observed(tail) and tail > 0:
        c = f32(c + f32(PPO.RATIO_CLAMP_GAIN) * (f32(PPO.RATIO_TAIL_MULT) * tail - c))
    isv[S.RL_PPO_RATIO_CLAMP] = _clamp(c, PPO.RATIO_CLAMP_MIN, PPO.RATIO_CLAMP_MAX)


def rl_entropy_coef_controller(isv):
    coef, h = isv[S.RL_ENTROPY_COEF], isv[S.RL_ENTROPY_EMA]
    if coef == 0:
        coef = f32(PPO.ENTROPY_COEF_BOOTSTRAP)
    elif _observed(h) and h > 0:
        gap = f32((f32(PPO.ENTROPY_TARGET) - h) / f32(PPO.ENTROPY_TARGET))
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
    mult, a, r = isv[S.RL_K_LOOP_MULT], isv[S.RL_ADV_VAR_EMA], isv[S.RL_RETURN_VAR_EMA]
    if mult == 0:
        mult = f32(S.K_FIXED_POINT)
    elif _observed(a) and _observed(r) and a > 0 and r > 0:
        ratio = f32(a / r)
        if ratio > f32(KL.K_RATIO_HI):
            mult = f32(mult + f32(KL.K_STEP))
        elif ratio < f32(KL.K_RATIO_LO):
            mult = f32(mult - f32(KL.K_STEP))
    isv[S.RL_K_LOOP_MULT] = _clamp(mult, S.K_FIXED_POINT, S.K_MAX * S.K_FIXED_POINT)


def rl_k_gate(isv, k, gate):
    gate[0] = 1 if k < S.decode_k(isv) else 0
