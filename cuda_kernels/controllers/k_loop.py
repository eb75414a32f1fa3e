"""K-loop: learning iterations per env step, ``rl_k_loop_controller`` and the device-side gate ``rl_k_gate``."""
import math

from numba import cuda, float32, int32

from alpharl.cuda_kernels.controllers.common import adv_var_ratio, clampf
from alpharl.cuda_kernels.registry import kernel
from alpharl.isv import K_FIXED_POINT, K_MAX, RL_K_LOOP_MULT, RL_K_RATIO_FLOOR, RL_K_RATIO_MEAN, RL_K_RATIO_VAR

#: Advantage-variance ratio above which more updates per env step are worth it.
K_RATIO_HI = 0.5
#: ... and below which fewer are enough.
K_RATIO_LO = 0.1
#: Step of the multiplier: 5% of one K per controller call.
K_STEP = 0.05 * K_FIXED_POINT
#: --k-noise-band: the upper threshold's least height above the ratio's running mean, in the ratio's
#: standard deviations (controllers/anchors.py, which measures both).
K_NOISE_Z = 2.0


@kernel("void(float32[::1])", test_only=True)
def rl_k_loop_controller(isv):
    """K-loop multiplier isv[404] (K x 2048 fixed point) from the advantage variance ratio.

    ratio = min(EMA var(A) / EMA var(return), 1): the share of the return's variance the
    baseline leaves unexplained (1 - explained variance), at most all of it (a baseline that
    adds variance explains none, as one that is constant does). A poorly fitted
    baseline (ratio > 0.5) earns more learning iterations per env step
    (+0.05 K); a good one (ratio < 0.1) fewer (-0.05 K); else hold. Clamp
    [1, K_MAX] x 2048. Bootstrap 2048 (K = 1). Holds on a step without a PPO/V update (its
    variances are that update's). Launch [1, 1].
    Anchored (isv[RL_K_RATIO_FLOOR] = f > 0, --adaptive-anchors): the thresholds become
    f + 0.5 (1 - f) and f + 0.1 (1 - f), f the best ratio the baseline has reached lately
    (controllers/anchors.py). The floor is a ratio capped at 1 as well, so where the baseline has
    explained nothing lately (f = 1) the band closes at 1 and K holds: more iterations do not
    lower a ratio that no value of the state predicts.
    With --k-noise-band (isv[RL_K_RATIO_MEAN] = m, isv[RL_K_RATIO_VAR] = s^2 > 0: the ratio's running mean
    and variance) the upper threshold is at least m + K_NOISE_Z s: K steps up only where the fit is worse
    than half-way from its best to nothing *and* than its own usual level beyond the ratio's scatter. The
    floor, a minimum, sits at the scatter's dips, so where the scatter is not small against 1 - f the band
    alone has the ratio above its upper edge most of the time with no change of the fit, and K walks to
    K_MAX; where the scatter is small (m + K_NOISE_Z s below the band's edge) the band is unchanged.
    """
    mult = isv[RL_K_LOOP_MULT]
    f = isv[RL_K_RATIO_FLOOR]
    hi = float32(K_RATIO_HI)
    lo = float32(K_RATIO_LO)
    if f > float32(0.0) and f <= float32(1.0):
        hi = f + hi * (float32(1.0) - f)
        lo = f + lo * (float32(1.0) - f)
        v = isv[RL_K_RATIO_VAR]
        if v > float32(0.0):
            hi = max(hi, isv[RL_K_RATIO_MEAN] + float32(K_NOISE_Z) * math.sqrt(v))
    ratio = adv_var_ratio(isv)
    if mult == 0.0:
        mult = float32(K_FIXED_POINT)
    elif ratio > float32(0.0):
        if ratio > hi:
            mult = mult + float32(K_STEP)
        elif ratio < lo:
            mult = mult - float32(K_STEP)
    isv[RL_K_LOOP_MULT] = clampf(mult, float32(K_FIXED_POINT), float32(K_MAX * K_FIXED_POINT))


@cuda.jit(device=True)
def k_of(isv):
    """K = clamp(round(isv[404] / 2048), 1, K_MAX): the learning iterations of this step."""
    kk = int32(round(isv[RL_K_LOOP_MULT] / float32(K_FIXED_POINT)))
    return min(max(kk, int32(1)), int32(K_MAX))


@kernel("void(float32[::1], int32, int32[::1])")
def rl_k_gate(isv, k, gate):
    """gate[0] = 1 if iteration k < K else 0, K = clamp(round(isv[404] / 2048), 1, K_MAX).

    The trainer captures K_MAX learning iterations in the step's graph; each
    starts with this kernel and every learning kernel exits at once when its
    gate is 0. K is thus decided on the device with no host read. Launch [1, 1].
    """
    gate[0] = int32(1) if k < k_of(isv) else int32(0)
