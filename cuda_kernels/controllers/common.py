"""Device helpers shared by the controllers."""
import math

from numba import cuda, float32

from alpharl.isv import RL_ADV_VAR_EMA, RL_OBS_PPO_INFORMED, RL_OBS_PPO_SAMPLES, RL_RETURN_VAR_EMA


@cuda.jit(device=True)
def finite(x):
    return not (math.isnan(x) or math.isinf(x))


@cuda.jit(device=True)
def observed(x):
    """A signal counts as observed when it is finite and not the sentinel 0."""
    return finite(x) and x != 0.0


@cuda.jit(device=True)
def clampf(x, lo, hi):
    return min(max(x, lo), hi)


@cuda.jit(device=True)
def ema_update(ema, obs, beta):
    """EMA with first-observation bootstrap: an EMA still at sentinel 0 takes obs as is."""
    if ema == 0.0:
        return obs
    return beta * ema + (1.0 - beta) * obs


@cuda.jit(device=True)
def ppo_updated(isv):
    """Whether this step ran the PPO/V update (its sample count is positive). With --rollout T > 1 only
    one step in T does; the EMAs of what that update measures hold on the others, so a controller that
    reads them steps on the update steps alone, once per update (T = 1: every step, as before)."""
    return isv[RL_OBS_PPO_SAMPLES] > 0.0


@cuda.jit(device=True)
def ppo_informed(isv):
    """Whether this step's PPO ratios say anything about how far the policy moved
    (RL_OBS_PPO_INFORMED > 0, written by ``rl_ppo_informed`` before the signal EMAs): a controller of the
    trust region (clip, ratio bound) steps only then. Without --adaptive-anchors it equals ppo_updated."""
    return isv[RL_OBS_PPO_INFORMED] > 0.0


@cuda.jit(device=True)
def adv_var_ratio(isv):
    """K's signal, min(EMA var(A) / EMA var(return), 1): the share of the return's variance the value
    baseline leaves in the advantage, capped at 1 (a baseline that adds variance explains nothing, as
    one that predicts a constant). Read by the K controller and by its anchored floor, fresh only on a
    PPO/V update step with both EMAs observed and positive; 0 (no signal) otherwise."""
    a = isv[RL_ADV_VAR_EMA]
    r = isv[RL_RETURN_VAR_EMA]
    if observed(a) and observed(r) and a > float32(0.0) and r > float32(0.0) and ppo_updated(isv):
        return min(a / r, float32(1.0))
    return float32(0.0)
