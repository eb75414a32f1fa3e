"""Prioritized-replay exponents alpha/beta, and the discount gamma held in the ISV: ``rl_per_controller``."""
from numba import float32

from alpharl.cuda_kernels.controllers.common import clampf, observed
from alpharl.cuda_kernels.registry import kernel
from alpharl.isv import GAMMA_BOOTSTRAP, RL_GAMMA, RL_PER_ALPHA, RL_PER_BETA, RL_PER_ESS_FRAC

PER_ALPHA_BOOTSTRAP = 0.6
PER_ALPHA_MIN = 0.2
PER_ALPHA_MAX = 1.0
PER_ALPHA_STEP = 0.01
#: Effective sample size (as a fraction of the buffer) the sampling aims for.
PER_ESS_TARGET = 0.5
PER_ESS_BAND = 1.5
PER_BETA_BOOTSTRAP = 0.4
PER_BETA_MIN = 0.4
PER_BETA_MAX = 1.0


@kernel("void(float32[::1])", test_only=True)
def rl_per_controller(isv):
    """PER alpha and beta from the effective-sample-size fraction f = (sum p)^2 / (N sum p^2).

    alpha: f below 0.5 / 1.5 (sampling concentrated on few transitions) ->
    alpha - 0.01; f above 0.5 x 1.5 (nearly uniform) -> alpha + 0.01; else hold.
    Clamp [0.2, 1]. Bootstrap 0.6.
    beta = 0.4 + 0.6 (1 - f): the more skewed the sampling, the more of its
    bias the importance weights correct (beta -> 1); uniform sampling needs
    none. Clamp [0.4, 1]. Bootstrap 0.4.
    gamma is held: bootstrapped to GAMMA_BOOTSTRAP on sentinel 0, never adapted.
    Launch [1, 1].
    """
    if isv[RL_GAMMA] == 0.0:
        isv[RL_GAMMA] = float32(GAMMA_BOOTSTRAP)
    f = isv[RL_PER_ESS_FRAC]
    alpha = isv[RL_PER_ALPHA]
    beta = isv[RL_PER_BETA]
    live = observed(f) and f > 0.0
    if alpha == 0.0:
        alpha = float32(PER_ALPHA_BOOTSTRAP)
    elif live:
        if f < float32(PER_ESS_TARGET / PER_ESS_BAND):
            alpha = alpha - float32(PER_ALPHA_STEP)
        elif f > float32(PER_ESS_TARGET * PER_ESS_BAND):
            alpha = alpha + float32(PER_ALPHA_STEP)
    if beta == 0.0:
        beta = float32(PER_BETA_BOOTSTRAP)
    elif live:
        beta = float32(PER_BETA_MIN) + float32(1.0 - PER_BETA_MIN) * (float32(1.0) - min(f, float32(1.0)))
    isv[RL_PER_ALPHA] = clampf(alpha, float32(PER_ALPHA_MIN), float32(PER_ALPHA_MAX))
    isv[RL_PER_BETA] = clampf(beta, float32(PER_BETA_MIN), float32(PER_BETA_MAX))
