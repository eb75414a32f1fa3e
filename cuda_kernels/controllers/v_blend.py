"""Adaptive V-baseline blend (seed phase-4.4): ``rl_v_blend_alpha_controller`` and ``rl_v_blend``
(whose per-sample maths, ``v_blend_value``, the learning update runs inside its fused env-row tail).

V_used[b] = alpha V_scalar[b] + (1 - alpha) V_dq[b], with alpha emitted from the
observed tracking ratio EMA|V_dq - V_scalar| / EMA|V_scalar|:
ratio > 1.5 TARGET -> alpha + 0.01 (max 1); ratio < TARGET / 1.5 -> alpha - 0.01
(min 0); else hold. Hold while EMA|V_scalar| < 1e-4 (no V signal to calibrate
against). alpha bootstraps to 1.0 on sentinel 0; the EMAs take their first
observation as is.
"""
from numba import cuda, float32

from alpharl import target
from alpharl.cuda_kernels.controllers.common import clampf, ema_update, finite
from alpharl.cuda_kernels.reductions import tree_sum
from alpharl.cuda_kernels.registry import kernel
from alpharl.isv import RL_NAN_SIGNALS, RL_V_BLEND_ALPHA, RL_V_SCALAR_MAG_EMA, RL_V_TRACK_ERR_EMA

#: Controller launch: grid (1,1,1), block (1024,1,1) (seed; 32 under the CUDA simulator, whose cost is its
#: thread count: alpharl.target.SIM_OVERRIDES).
V_BLEND_CTRL_BLOCK = target.gpu_or_sim("controllers.v_blend.V_BLEND_CTRL_BLOCK", gpu=1024, sim=32)
#: Blend launch: grid (ceil(B/256),1,1), block (256,1,1) (seed).
V_BLEND_BLOCK = 256
#: Tracking ratio the controller aims for: V_dq within 20% of |V_scalar|.
V_TRACK_TARGET = 0.2
#: Hysteresis band: act only outside [TARGET / BAND, TARGET x BAND] (seed: 1.5).
V_TRACK_BAND = 1.5
#: alpha step per controller call (seed: 0.01).
V_ALPHA_STEP = 0.01
#: Dead-signal floor on EMA|V_scalar| (seed: 1e-4).
V_DEAD_SIGNAL = 1.0e-4
#: Decay of both tracking EMAs.
V_EMA_BETA = 0.99
#: alpha's bootstrap (seed: start on V_scalar alone).
V_ALPHA_BOOTSTRAP = 1.0


@kernel("void(float32[::1], float32[::1], int32, float32[::1], int32[::1])")
def rl_v_blend_alpha_controller(v_scalar, v_dq, n, isv, gate):
    """Emit alpha into isv[RL_V_BLEND_ALPHA] from V_scalar[0:n] and V_dq[0:n] at h_t.

    Launch [1, V_BLEND_CTRL_BLOCK]. Parallel reduction of mean|V_dq - V_scalar|
    and mean|V_scalar|, EMAs into slots 586/587, then the hysteresis rule.
    Sentinel: alpha reads 0 while both EMAs are still unobserved -> alpha = 1.0
    (a 0 reached later by stepping down is a real alpha and is kept).
    A non-finite batch is refused (counted in RL_NAN_SIGNALS) and alpha held.
    gate[0] == 0: the block exits and writes nothing (K-loop predication).
    """
    if gate[0] == 0:
        return
    s_err = cuda.shared.array(V_BLEND_CTRL_BLOCK, float32)
    s_mag = cuda.shared.array(V_BLEND_CTRL_BLOCK, float32)
    tid = cuda.threadIdx.x
    a_err = float32(0.0)
    a_mag = float32(0.0)
    for i in range(tid, n, V_BLEND_CTRL_BLOCK):
        vs = v_scalar[i]
        a_err += abs(v_dq[i] - vs)
        a_mag += abs(vs)
    s_err[tid] = a_err
    s_mag[tid] = a_mag
    cuda.syncthreads()
    tree_sum(s_err, tid, V_BLEND_CTRL_BLOCK)
    tree_sum(s_mag, tid, V_BLEND_CTRL_BLOCK)
    if tid == 0:
        v_blend_alpha_emit(isv, s_err[0], s_mag[0], n)


@cuda.jit(device=True)
def v_blend_alpha_emit(isv, sum_err, sum_mag, n):
    """The controller's rule (one thread) from the batch sums sum |V_dq - V_scalar| and sum |V_scalar| over n
    rows: the EMAs, then alpha into isv[RL_V_BLEND_ALPHA] (rl_v_blend_alpha_controller's docstring)."""
    err_ema = isv[RL_V_TRACK_ERR_EMA]
    mag_ema = isv[RL_V_SCALAR_MAG_EMA]
    fresh = err_ema == 0.0 and mag_ema == 0.0
    if n > 0:
        obs_err = sum_err / float32(n)
        obs_mag = sum_mag / float32(n)
        if finite(obs_err) and finite(obs_mag):
            err_ema = ema_update(err_ema, obs_err, float32(V_EMA_BETA))
            mag_ema = ema_update(mag_ema, obs_mag, float32(V_EMA_BETA))
            isv[RL_V_TRACK_ERR_EMA] = err_ema
            isv[RL_V_SCALAR_MAG_EMA] = mag_ema
        else:
            isv[RL_NAN_SIGNALS] += float32(1.0)
    alpha = isv[RL_V_BLEND_ALPHA]
    if alpha == 0.0 and fresh:
        alpha = float32(V_ALPHA_BOOTSTRAP)
    elif mag_ema >= float32(V_DEAD_SIGNAL):
        ratio = err_ema / mag_ema
        if ratio > float32(V_TRACK_BAND * V_TRACK_TARGET):
            alpha = alpha + float32(V_ALPHA_STEP)
        elif ratio < float32(V_TRACK_TARGET / V_TRACK_BAND):
            alpha = alpha - float32(V_ALPHA_STEP)
    isv[RL_V_BLEND_ALPHA] = clampf(alpha, float32(0.0), float32(1.0))


@cuda.jit(device=True)
def v_blend_value(alpha, v_scalar, v_dq):
    """V_used = alpha V_scalar + (1 - alpha) V_dq for one sample (rl_v_blend and the learner's env-row tail)."""
    return alpha * v_scalar + (float32(1.0) - alpha) * v_dq


@kernel("void(float32[::1], float32[::1], int32, float32[::1], float32[::1], int32[::1])", test_only=True)
def rl_v_blend(v_scalar, v_dq, n, isv, out, gate):
    """out[b] = alpha V_scalar[b] + (1 - alpha) V_dq[b], alpha = isv[RL_V_BLEND_ALPHA].

    Launch [ceil(n / V_BLEND_BLOCK), V_BLEND_BLOCK]. gate[0] == 0: writes nothing.
    """
    if gate[0] == 0:
        return
    b = cuda.grid(1)
    if b < n:
        out[b] = v_blend_value(isv[RL_V_BLEND_ALPHA], v_scalar[b], v_dq[b])
