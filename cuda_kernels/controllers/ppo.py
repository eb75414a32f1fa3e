"""PPO controllers: clip epsilon, dual-clip ratio bound, entropy coefficient.

Each is a single-thread kernel (launch [1, 1]): ISV in, ISV out. Each bootstraps
on sentinel 0, holds while its signal is unobserved (0) or non-finite or on a step
that did not update PPO (common.ppo_updated: a collect step of --rollout T > 1; the
clip and the ratio bound also on a step whose ratios are all 1, common.ppo_informed:
K = 1 with --adaptive-anchors), and clamps its output to the slot's documented range.
"""
import math

from numba import float32

from alpharl.cuda_kernels.controllers.common import clampf, observed, ppo_informed, ppo_updated
from alpharl.cuda_kernels.registry import kernel
from alpharl.isv import (
    N_ACTIONS_LN,
    RL_CLIP_EPS_ANCHOR,
    RL_ENTROPY_COEF,
    RL_ENTROPY_EMA,
    RL_ENTROPY_TARGET,
    RL_KL_EMA,
    RL_KL_TARGET,
    RL_PPO_CLIP_EPS,
    RL_PPO_RATIO_CLAMP,
    RL_RATIO_TAIL_EMA,
)

# --- clip epsilon
CLIP_EPS_BOOTSTRAP = 0.2
CLIP_EPS_MIN = 0.05
CLIP_EPS_MAX = 0.3
#: KL(pi_old || pi_new) per sample the clip aims for.
KL_TARGET = 0.01
#: Hysteresis band around the KL target.
KL_BAND = 1.5
#: Multiplicative step of epsilon.
CLIP_EPS_STEP = 1.05

# --- dual-clip ratio bound c
RATIO_CLAMP_BOOTSTRAP = 3.0
RATIO_CLAMP_MIN = 1.5
RATIO_CLAMP_MAX = 10.0
#: c aims at this multiple of the observed ratio tail (EMA of the batch max ratio).
RATIO_TAIL_MULT = 2.0
#: Fraction of the gap to the aim closed per step.
RATIO_CLAMP_GAIN = 0.1

# --- entropy coefficient
ENTROPY_COEF_BOOTSTRAP = 0.01
ENTROPY_COEF_MIN = 1.0e-4
ENTROPY_COEF_MAX = 0.1
#: Target entropy as a fraction of the uniform policy's ln 9.
ENTROPY_TARGET_FRAC = 0.5
ENTROPY_TARGET = ENTROPY_TARGET_FRAC * N_ACTIONS_LN
#: Log-gain: coef x exp(GAIN x (H* - H) / H*).
ENTROPY_GAIN = 0.05


@kernel("void(float32[::1])", test_only=True)
def rl_ppo_clip_controller(isv):
    """PPO clip epsilon from the KL EMA against KL_TARGET.

    Rule: KL above KL_TARGET x 1.5 (the policy moved too far per update) ->
    eps / 1.05; KL below KL_TARGET / 1.5 -> eps x 1.05; else hold. Clamp
    [0.05, 0.3]. Bootstrap 0.2. Launch [1, 1]. KL_TARGET is isv[RL_KL_TARGET]
    where positive (--adaptive-anchors, controllers/anchors.py), else the constant. Where
    isv[RL_CLIP_EPS_ANCHOR] is positive (--pace-policy: the policy's step is paced by the KL, so the
    clip guards against outliers at a multiple of the paced ratio spread) eps is that anchor, clamped.
    """
    eps = isv[RL_PPO_CLIP_EPS]
    kl = isv[RL_KL_EMA]
    t = isv[RL_KL_TARGET]
    hi = float32(KL_TARGET * KL_BAND)
    lo = float32(KL_TARGET / KL_BAND)
    if t > float32(0.0):
        hi = t * float32(KL_BAND)
        lo = t / float32(KL_BAND)
    if isv[RL_CLIP_EPS_ANCHOR] > float32(0.0):
        eps = isv[RL_CLIP_EPS_ANCHOR]
    elif eps == 0.0:
        eps = float32(CLIP_EPS_BOOTSTRAP)
    elif observed(kl) and ppo_informed(isv):
        if kl > hi:
            eps = eps / float32(CLIP_EPS_STEP)
        elif kl < lo:
            eps = eps * float32(CLIP_EPS_STEP)
    isv[RL_PPO_CLIP_EPS] = clampf(eps, float32(CLIP_EPS_MIN), float32(CLIP_EPS_MAX))


@kernel("void(float32[::1])", test_only=True)
def rl_ratio_clamp_controller(isv):
    """Dual-clip ratio bound c from the observed ratio tail.

    Rule: aim = 2 x EMA(batch max of pi_new/pi_old), so the bound trims only the
    far tail of the ratios seen; c moves 10% of the way to the aim per step.
    Clamp [1.5, 10] (1.5 > 1 + eps_max keeps c outside the ordinary clip band).
    Bootstrap 3 (Ye et al. 2020). Launch [1, 1].
    """
    c = isv[RL_PPO_RATIO_CLAMP]
    tail = isv[RL_RATIO_TAIL_EMA]
    if c == 0.0:
        c = float32(RATIO_CLAMP_BOOTSTRAP)
    elif observed(tail) and tail > 0.0 and ppo_informed(isv):
        aim = float32(RATIO_TAIL_MULT) * tail
        c = c + float32(RATIO_CLAMP_GAIN) * (aim - c)
    isv[RL_PPO_RATIO_CLAMP] = clampf(c, float32(RATIO_CLAMP_MIN), float32(RATIO_CLAMP_MAX))


@kernel("void(float32[::1])", test_only=True)
def rl_entropy_coef_controller(isv):
    """Entropy coefficient toward the target entropy H* = 0.5 ln 9.

    Rule: coef x exp(0.05 (H* - H) / H*) with H the entropy EMA: entropy below
    target (policy collapsing) raises the bonus, above it lowers the bonus,
    proportionally to the relative gap. Clamp [1e-4, 0.1]. Bootstrap 0.01.
    Launch [1, 1]. H* is isv[RL_ENTROPY_TARGET] where positive (--adaptive-anchors,
    controllers/anchors.py), else the constant.
    """
    coef = isv[RL_ENTROPY_COEF]
    h = isv[RL_ENTROPY_EMA]
    target = isv[RL_ENTROPY_TARGET]
    if not (target > float32(0.0)):
        target = float32(ENTROPY_TARGET)
    if coef == 0.0:
        coef = float32(ENTROPY_COEF_BOOTSTRAP)
    elif observed(h) and h > 0.0 and ppo_updated(isv):
        gap = (target - h) / target
        coef = coef * math.exp(float32(ENTROPY_GAIN) * gap)
    isv[RL_ENTROPY_COEF] = clampf(coef, float32(ENTROPY_COEF_MIN), float32(ENTROPY_COEF_MAX))
