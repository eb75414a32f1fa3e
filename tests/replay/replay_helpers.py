"""Helpers shared by the replay tests."""
import numpy as np

from alpharl import isv as S
from alpharl.replay import STATE_ARRAYS


def per_isv(rng):
    """A bootstrap ISV with random PER exponents and the ESS slot poisoned (each sampling pass must write it)."""
    isv = S.bootstrap_vector()
    isv[S.RL_PER_ALPHA] = rng.uniform(0.3, 1.0)
    isv[S.RL_PER_BETA] = rng.uniform(0.3, 1.0)
    isv[S.RL_PER_ESS_FRAC] = np.nan
    return isv


def assert_same_state(a, b):
    """Every state array of replay a equals replay b's (or the state dict b)."""
    sa, sb = a.state_dict(), b if isinstance(b, dict) else b.state_dict()
    for name in STATE_ARRAYS:
        np.testing.assert_array_equal(sa[name], sb[name], err_msg=name)
