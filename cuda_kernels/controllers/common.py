"""Device helpers shared by the controllers."""
import math

from numba import cuda


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
