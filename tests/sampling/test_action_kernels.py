"""rl_pi_action_kernel (the actor) and rl_action_kernel (Thompson sampling from Q)."""
import math

import numpy as np
import pytest
from numba import cuda
from support import assert_all_written, nonzero_uniform, poisoned

from alpharl import isv as S
from alpharl.cuda_kernels.sampling.action import ACTION_BLOCK, action_grid, rl_action_kernel, rl_pi_action_kernel
from alpharl.prng import seed_states
from alpharl.reference import sampling as ref
from alpharl.sizes import N_ACTIONS, N_ATOMS


def _pi_launch(logits, states):
    """One kernel launch; returns (actions, logp, new states) on the host."""
    b = logits.shape[0]
    d_states = cuda.to_device(states)
    actions, logp = poisoned(b, np.int32), poisoned(b, np.float32)
    rl_pi_action_kernel[action_grid(b), ACTION_BLOCK](cuda.to_device(logits), d_states, actions, logp)
    return assert_all_written(actions), assert_all_written(logp), d_states.copy_to_host()


def _chi_square_sf_8dof(x):
    """P(chi^2_8 >= x), exact for an even number of degrees of freedom: e^-h sum_{i<4} h^i / i!, h = x/2."""
    h = x / 2.0
    return math.exp(-h) * sum(h**i / math.factorial(i) for i in range(4))


def _chi_square(counts, probs):
    expected = probs * counts.sum()
    return float(((counts - expected) ** 2 / expected).sum())


def _softmax64(logits):
    z = np.exp(logits.astype(np.float64) - logits.max(axis=-1, keepdims=True))
    return z / z.sum(axis=-1, keepdims=True)


def test_pi_action_matches_reference(rng):
    b = ACTION_BLOCK + 44  # a second, partly filled block exercises the bounds guard
    logits = nonzero_uniform(rng, (b, N_ACTIONS), -3.0, 3.0)
    states = seed_states(int(rng.integers(2**63)), b)
    actions, logp, new_states = _pi_launch(logits, states)

    ref_states, ref_actions, ref_logp = states.copy(), np.empty(b, np.int32), np.empty(b, np.float32)
    ref.rl_pi_action_kernel(logits, ref_states, ref_actions, ref_logp)
    np.testing.assert_array_equal(new_states, ref_states)
    np.testing.assert_array_equal(actions, ref_actions)
    np.testing.assert_allclose(logp, ref_logp, rtol=0, atol=2e-6)
    # log pi(a|s) is the log-softmax at the sampled action
    exact = np.log(_softmax64(logits)[np.arange(b), actions])
    np.testing.assert_allclose(logp, exact, rtol=0, atol=2e-6)
    assert ((0 <= actions) & (actions < N_ACTIONS)).all()


def test_pi_action_deterministic_given_seed_and_logits(rng):
    b = 64
    logits = nonzero_uniform(rng, (b, N_ACTIONS), -2.0, 2.0)
    seed = int(rng.integers(2**63))
    first = _pi_launch(logits, seed_states(seed, b))
    again = _pi_launch(logits, seed_states(seed, b))
    for x, y in zip(first, again):
        np.testing.assert_array_equal(x, y)
    other = _pi_launch(logits, seed_states(seed + 1, b))
    assert (other[2] != first[2]).all()


def test_pi_action_frequencies_match_softmax(rng):
    """Chi-square goodness of fit of 2 x 1024 kernel draws (all backtests share one logit row)."""
    row = nonzero_uniform(rng, N_ACTIONS, -1.5, 1.5)
    b, launches = 1024, 2
    logits = np.tile(row, (b, 1))
    states = seed_states(20240611, b)
    counts = np.zeros(N_ACTIONS)
    for _ in range(launches):
        actions, _, states = _pi_launch(logits, states)
        counts += np.bincount(actions, minlength=N_ACTIONS)
    probs = _softmax64(row)
    assert _chi_square_sf_8dof(_chi_square(counts, probs)) > 1e-4, (counts, probs * counts.sum())


def test_pi_action_reference_frequencies_match_softmax_at_scale(rng):
    """The reference (identical draws, see above) over 200k lanes: a sharp test of the CDF walk."""
    row = nonzero_uniform(rng, N_ACTIONS, -2.0, 2.0)
    b = 200_000
    states, actions, logp = seed_states(99, b), np.empty(b, np.int32), np.empty(b, np.float32)
    ref.rl_pi_action_kernel(np.tile(row, (b, 1)), states, actions, logp)
    counts = np.bincount(actions, minlength=N_ACTIONS)
    assert _chi_square_sf_8dof(_chi_square(counts, _softmax64(row))) > 1e-4


def test_pi_action_never_samples_an_underflowed_action(rng):
    b = 128
    logits = nonzero_uniform(rng, (b, N_ACTIONS), -1.0, 1.0)
    logits[:, N_ACTIONS - 1] = -1.0e30      # exp underflows to exactly 0: probability 0
    logits[: b // 2, 0] = 80.0              # a near-deterministic row: still finite log-probabilities
    actions, logp, _ = _pi_launch(logits, seed_states(int(rng.integers(2**63)), b))
    assert (actions != N_ACTIONS - 1).all()
    assert (actions[: b // 2] == 0).all()
    assert np.isfinite(logp).all() and (logp <= 0).all()


def _isv(v_max=None):
    """A bootstrap ISV whose C51 support is +-v_max (None: the bootstrap +-10)."""
    isv = S.bootstrap_vector()
    if v_max is not None:
        isv[S.RL_SUPPORT_V_MIN], isv[S.RL_SUPPORT_V_MAX] = -v_max, v_max
    return isv


def _thompson_launch(q_logits, states, isv=None):
    b = q_logits.shape[0]
    d_states = cuda.to_device(states)
    actions = poisoned(b, np.int32)
    isv = _isv() if isv is None else isv
    rl_action_kernel[action_grid(b), ACTION_BLOCK](cuda.to_device(q_logits), cuda.to_device(isv), d_states, actions)
    return assert_all_written(actions), d_states.copy_to_host()


@pytest.mark.parametrize("support", ["bootstrap", "random"])
def test_thompson_action_matches_reference(rng, support):
    """The sampled returns are read on the ISV's support (the bootstrap +-10 or one --adaptive-support set)."""
    b = 40
    q_logits = nonzero_uniform(rng, (b, N_ACTIONS, N_ATOMS), -3.0, 3.0)
    states = seed_states(int(rng.integers(2**63)), b)
    isv = _isv(None if support == "bootstrap" else np.float32(10.0 ** rng.uniform(-2, 2)))
    actions, new_states = _thompson_launch(q_logits, states, isv)
    ref_states, ref_actions = states.copy(), np.empty(b, np.int32)
    ref.rl_action_kernel(q_logits, isv, ref_states, ref_actions)
    np.testing.assert_array_equal(new_states, ref_states)
    np.testing.assert_array_equal(actions, ref_actions)


def test_thompson_action_ties_go_to_the_lowest_id_and_dominance_wins(rng):
    b = 8
    # every action's distribution is a point mass on the same atom: all sampled returns tie -> action 0
    q_logits = nonzero_uniform(rng, (b, N_ACTIONS, N_ATOMS), -1.0, 1.0)
    q_logits[:, :, N_ATOMS // 2] = 200.0
    actions, _ = _thompson_launch(q_logits, seed_states(int(rng.integers(2**63)), b))
    assert (actions == 0).all()
    # one action (a different one per backtest) puts its mass on the top atom: it is always picked
    best = rng.integers(0, N_ACTIONS, b)
    q_logits[np.arange(b), best, N_ATOMS - 1] = 400.0
    actions, _ = _thompson_launch(q_logits, seed_states(int(rng.integers(2**63)), b))
    np.testing.assert_array_equal(actions, best)
