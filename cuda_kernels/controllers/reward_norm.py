"""Running reward/return statistics, the reward normaliser and the C51 support that follows the
return scale: ``rl_reward_norm`` (one launch at the start of a step's learning, in place of ``rl_scale``
when --reward-norm or --adaptive-support is on).

Per backtest b it keeps R_b, the discounted return of the episode so far (R_b <- gamma R_b + r_b,
reset to 0 after done), r = reward x reward_scale: the reward as the replay stores it. Its running
statistics (ISV): the means of r, r^2 and R^2 over the batch, folded over steps as a plain average
of the first REWARD_NORM_HORIZON steps (the count in RL_REWARD_NORM_COUNT: the first observation is
taken as is, and early steps are not under-weighted as an EMA started at 0 would) and then as an EMA
of that horizon.

Reward normaliser (FLAG_NORM): gain g = 1 / RMS(R) = 1 / sqrt(mean R^2) into RL_REWARD_GAIN; the
rewards that enter learning are r g (this step's env batch, written to ``out``; the replay keeps r and
the C51 loss multiplies by the gain of the step that reads it, so every stored reward is read at one
gain). The returns the critics learn then have RMS 1 whatever the market's dollar scale or
reward_scale (which cancels). No centring: a shifted reward would change the value of ending an
episode, and an episode ends at every round trip. Dead-signal guard: while no return has been seen
(mean R^2 = 0, e.g. before the first fill) the gain holds (bootstrap 1: learning sees r).

Support (FLAG_SUPPORT): V_MAX aims at SUPPORT_RMS_MULT return RMS in learning units (RMS(R) g;
with the normaliser on that is SUPPORT_RMS_MULT itself), V_MIN = -V_MAX, so the 21 atoms span
+-5 RMS at 0.5 RMS apart instead of +-10 whatever the returns' size. V_MAX moves toward its aim at
the rate tau of the target network (isv[RL_TARGET_TAU]): the atoms never move faster than the
network whose distribution the C51 targets come from. Clamp [SUPPORT_V_MAX_LO, SUPPORT_V_MAX_HI];
bootstrap +-10 (today's support); holds while the return RMS is unobserved.

Every consumer reads the support through ``heads.support_grid`` and the gain through
``heads.reward_gain``; this kernel runs before the step's learning, so one step sees one support
and one gain.
"""
import math

from numba import cuda, float32, float64

from alpharl.cuda_kernels.controllers.common import clampf, finite
from alpharl.cuda_kernels.controllers.target_tau import TAU_BOOTSTRAP
from alpharl.cuda_kernels.nets.heads import gained
from alpharl.cuda_kernels.reductions import tree_sum
from alpharl.cuda_kernels.registry import kernel
from alpharl.isv import (RL_GAMMA, RL_NAN_SIGNALS, RL_RETURN_SQ_EMA, RL_REWARD_GAIN, RL_REWARD_MEAN_EMA,
                         RL_REWARD_NORM_COUNT, RL_REWARD_SQ_EMA, RL_SUPPORT_V_MAX, RL_SUPPORT_V_MIN, RL_TARGET_TAU,
                         V_MAX_BOOTSTRAP, V_MIN_BOOTSTRAP)

#: Launch [1, REWARD_NORM_BLOCK] (a power of two: tree_sum).
REWARD_NORM_BLOCK = 256
#: Steps of the running statistics: a plain average up to here, then an EMA with beta = 1 - 1 / horizon.
REWARD_NORM_HORIZON = 1000.0
#: ``flags`` bits: normalise the rewards (--reward-norm); move the support (--adaptive-support).
FLAG_NORM = 1
FLAG_SUPPORT = 2
#: Half-width of the support in return RMS (learning units): a Gaussian return leaves +-5 RMS once in
#: 1.7 million; the heavy tails seen (TD kurtosis 6-30) put well under 1% there, projected onto the edge atoms.
SUPPORT_RMS_MULT = 5.0
#: Clamp of V_MAX: a numerical guard three decades below and two above the bootstrap.
SUPPORT_V_MAX_LO = V_MAX_BOOTSTRAP * 1.0e-3
SUPPORT_V_MAX_HI = V_MAX_BOOTSTRAP * 1.0e2


@cuda.jit(device=True)
def running_mean(old, obs, w):
    """(1 - w) old + w obs: w = 1 takes obs as is (the first observation)."""
    return (float32(1.0) - w) * old + w * obs


@kernel("void(float32[::1], int32, float32, float32[::1], float32[::1], int32, float32[::1], float32[::1], "
        "float32[::1])")
def rl_reward_norm(reward, n, scale, done, ret_run, flags, isv, out, out_stored):
    """The step's rewards into learning units, with their running statistics (module docstring).

    reward[n]: the simulator's reward ($); done[n]: 0/1; ret_run[n]: R_b, updated in place.
    Writes out_stored[b] = reward[b] x scale (r: what the replay stores, as ``rl_scale`` would) and
    out[b] = r g (learning units; out may be out_stored); the statistics slots, the gain (FLAG_NORM),
    the support (FLAG_SUPPORT). A non-finite r is left out of every statistic and of R_b (counted in
    RL_NAN_SIGNALS); it still reaches ``out`` (the grad guard skips the update it poisons).
    Sentinel 0 in the gain or the support slots: their bootstrap (1, +-10). Launch [1, REWARD_NORM_BLOCK].
    """
    s_n = cuda.shared.array(REWARD_NORM_BLOCK, float64)
    s_r = cuda.shared.array(REWARD_NORM_BLOCK, float64)
    s_r2 = cuda.shared.array(REWARD_NORM_BLOCK, float64)
    s_ret2 = cuda.shared.array(REWARD_NORM_BLOCK, float64)
    s_gain = cuda.shared.array(1, float32)
    tid = cuda.threadIdx.x
    gamma = isv[RL_GAMMA]
    cnt = float64(0.0)
    a_r = float64(0.0)
    a_r2 = float64(0.0)
    a_ret2 = float64(0.0)
    for i in range(tid, n, REWARD_NORM_BLOCK):
        x = reward[i] * scale
        out_stored[i] = x
        if finite(x):
            ret = gamma * ret_run[i] + x
            cnt += 1.0
            a_r += float64(x)
            a_r2 += float64(x) * float64(x)
            a_ret2 += float64(ret) * float64(ret)
            ret_run[i] = ret * (float32(1.0) - done[i])
    s_n[tid] = cnt
    s_r[tid] = a_r
    s_r2[tid] = a_r2
    s_ret2[tid] = a_ret2
    cuda.syncthreads()
    tree_sum(s_n, tid, REWARD_NORM_BLOCK)
    tree_sum(s_r, tid, REWARD_NORM_BLOCK)
    tree_sum(s_r2, tid, REWARD_NORM_BLOCK)
    tree_sum(s_ret2, tid, REWARD_NORM_BLOCK)
    if tid == 0:
        seen = s_n[0]
        if seen < float64(n):
            isv[RL_NAN_SIGNALS] += float32(float64(n) - seen)
        if seen > 0.0:
            c = isv[RL_REWARD_NORM_COUNT]
            w = float32(1.0) / min(c + float32(1.0), float32(REWARD_NORM_HORIZON))
            isv[RL_REWARD_MEAN_EMA] = running_mean(isv[RL_REWARD_MEAN_EMA], float32(s_r[0] / seen), w)
            isv[RL_REWARD_SQ_EMA] = running_mean(isv[RL_REWARD_SQ_EMA], float32(s_r2[0] / seen), w)
            isv[RL_RETURN_SQ_EMA] = running_mean(isv[RL_RETURN_SQ_EMA], float32(s_ret2[0] / seen), w)
            isv[RL_REWARD_NORM_COUNT] = min(c + float32(1.0), float32(REWARD_NORM_HORIZON))
        ms = isv[RL_RETURN_SQ_EMA]
        live = ms > float32(0.0) and finite(ms)
        g = isv[RL_REWARD_GAIN]
        if not (g > float32(0.0)) or not finite(g):
            g = float32(1.0)
        if (flags & FLAG_NORM) == 0:
            g = float32(1.0)
        elif live:
            g = float32(1.0) / math.sqrt(ms)
        isv[RL_REWARD_GAIN] = g
        s_gain[0] = g
        v_max = isv[RL_SUPPORT_V_MAX]
        if not (v_max > float32(0.0)) or not finite(v_max):
            v_max = float32(V_MAX_BOOTSTRAP)
            isv[RL_SUPPORT_V_MIN] = float32(V_MIN_BOOTSTRAP)
        elif (flags & FLAG_SUPPORT) != 0 and live:
            tau = isv[RL_TARGET_TAU]
            if not (tau > float32(0.0)):
                tau = float32(TAU_BOOTSTRAP)
            aim = float32(SUPPORT_RMS_MULT) * math.sqrt(ms) * g
            v_max = clampf(v_max + tau * (aim - v_max), float32(SUPPORT_V_MAX_LO), float32(SUPPORT_V_MAX_HI))
            isv[RL_SUPPORT_V_MIN] = -v_max
        isv[RL_SUPPORT_V_MAX] = v_max
    cuda.syncthreads()
    g = s_gain[0]
    for i in range(tid, n, REWARD_NORM_BLOCK):
        out[i] = gained(out_stored[i], g)
