"""Target-network soft-update rate from the TD-error kurtosis: ``rl_target_tau_controller``."""
from numba import float32

from alpharl.cuda_kernels.controllers.common import clampf, observed
from alpharl.cuda_kernels.registry import kernel
from alpharl.isv import RL_TARGET_TAU, RL_TD_KURTOSIS_EMA

TAU_BOOTSTRAP = 0.005
TAU_MIN = 5.0e-4
#: tau aimed at when TD errors are Gaussian-tailed (and the upper clamp).
TAU_GAUSSIAN = 0.01
#: Kurtosis of a Gaussian.
GAUSSIAN_KURTOSIS = 3.0
#: Fraction of the gap to the aim closed per step.
TAU_GAIN = 0.1


@kernel("void(float32[::1])", test_only=True)
def rl_target_tau_controller(isv):
    """tau from the TD-error kurtosis EMA k.

    Rule: aim = 0.01 x min(1, 3 / k): heavy-tailed TD errors (k > 3, a few
    transitions with outsized targets) slow the target net in proportion, so one
    outlier batch cannot drag it; tau moves 10% of the way to the aim per step.
    Clamp [5e-4, 0.01]. Bootstrap 0.005. Launch [1, 1].
    """
    tau = isv[RL_TARGET_TAU]
    k = isv[RL_TD_KURTOSIS_EMA]
    if tau == 0.0:
        tau = float32(TAU_BOOTSTRAP)
    elif observed(k) and k > 0.0:
        aim = float32(TAU_GAUSSIAN) * min(float32(1.0), float32(GAUSSIAN_KURTOSIS) / k)
        tau = tau + float32(TAU_GAIN) * (aim - tau)
    isv[RL_TARGET_TAU] = clampf(tau, float32(TAU_MIN), float32(TAU_GAUSSIAN))
