"""The C51 target under the acting policy (--q-target policy): policy_mixture_logp vs NumPy, the mixture of
a one-hot policy is Double DQN's target, and the whole learning update with it vs the reference update
(with and without the mirror rows, which move the s' rows in the stacked batch)."""
import numpy as np
import pytest
from numba import cuda
from support import (assert_all_written, assert_float32_update_matches, assert_grads_match_finite_differences,
                     assert_update_matches_reference, batch_to_device, nonzero_uniform, poisoned, random_env_batch,
                     random_nets, random_replay_batch)

from alpharl import isv as S
from alpharl.config import ConfigError, TrainConfig
from alpharl.cuda_kernels.nets import losses as KL
from alpharl.cuda_kernels.nets.narrow import COL_PI, N_COLS
from alpharl.cuda_kernels.nets.warp import WARP_ROW_BLOCK
from alpharl.cuda_kernels.sampling.policy_mixture import policy_mixture_grid, policy_mixture_logp
from alpharl.learner import Learner
from alpharl.nets import Nets
from alpharl.reference import learner as RL
from alpharl.reference import nets as R
from alpharl.sim import layout as L
from alpharl.sizes import N_ACTIONS, N_ATOMS

NQ = N_ACTIONS * N_ATOMS
LEVELS = 2
OBS_DIM = L.obs_dim(LEVELS)
B, M, HIDDEN = 3, 4, 8


def _gate(on: int = 1):
    return cuda.to_device(np.array([on], np.int32))


def _inputs(rng, n, row0):
    """y [row0 + n + 1, N_COLS] whose rows row0 .. row0 + n - 1 hold the policy's logits (every other element
    NaN: the kernel must read only those), and the target streams at s'."""
    y = np.full((row0 + n + 1, N_COLS), np.nan, np.float32)
    pi = nonzero_uniform(rng, (n, N_ACTIONS), -3, 3)
    y[row0:row0 + n, COL_PI:COL_PI + N_ACTIONS] = pi
    return y, pi, nonzero_uniform(rng, (n, NQ), -2, 2), nonzero_uniform(rng, (n, N_ATOMS), -2, 2)


def _mixture(y, row0, t_adv, t_val, n, grid):
    out = poisoned(n * N_ATOMS)
    policy_mixture_logp[grid](_gate(), cuda.to_device(y.ravel()), np.int32(row0), cuda.to_device(t_adv.ravel()),
                              cuda.to_device(t_val.ravel()), np.int32(n), out)
    return assert_all_written(out).reshape(n, N_ATOMS)


@pytest.mark.parametrize("n, row0", [(5, 0), (9, 6)])
def test_policy_mixture_matches_reference_on_any_grid(rng, n, row0):
    y, pi, t_adv, t_val = _inputs(rng, n, row0)
    want = R.policy_mixture(pi.astype(np.float64), t_adv.astype(np.float64), t_val.astype(np.float64))
    np.testing.assert_allclose(want.sum(axis=1), 1.0, rtol=1e-12)
    for grid in (policy_mixture_grid(n), (2, WARP_ROW_BLOCK), (1, WARP_ROW_BLOCK)):
        got = _mixture(y, row0, t_adv, t_val, n, grid)
        np.testing.assert_allclose(np.exp(got), want, rtol=1e-5, atol=1e-7, err_msg=str(grid))
    # the mixture is not any one action's distribution (a real mix of the target's nine)
    per_action = np.exp(R.log_softmax(R.dueling_logits(t_adv.astype(np.float64), t_val.astype(np.float64))))
    assert np.abs(want[:, None, :] - per_action).max(axis=2).min() > 1e-3


def test_policy_mixture_stays_finite_where_a_probability_underflows(rng):
    """Logits far apart (p ~ e^-100 on some atoms, pi ~ e^-60 on some actions): log q from a max-shifted
    log-sum-exp, finite, where exp then log would give -inf."""
    n = 4
    y, pi, t_adv, t_val = _inputs(rng, n, 0)
    t_val[:, ::2] -= 100.0
    y[:n, COL_PI:COL_PI + 3] -= 60.0
    pi[:, :3] -= 60.0
    got = _mixture(y, 0, t_adv, t_val, n, policy_mixture_grid(n))
    want = np.log(R.policy_mixture(pi.astype(np.float64), t_adv.astype(np.float64), t_val.astype(np.float64)))
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-4)
    assert got.min() < -90


def test_policy_mixture_writes_nothing_on_a_closed_gate(rng):
    n = 3
    y, _, t_adv, t_val = _inputs(rng, n, 0)
    out = poisoned(n * N_ATOMS)
    policy_mixture_logp[policy_mixture_grid(n)](_gate(0), cuda.to_device(y.ravel()), np.int32(0),
                                                cuda.to_device(t_adv.ravel()), cuda.to_device(t_val.ravel()),
                                                np.int32(n), out)
    assert np.isnan(out.copy_to_host()).all()


def test_the_mixture_through_the_c51_loss_is_the_projected_mixture_and_one_hot_is_double_dqn(rng):
    """rl_c51_loss fed the mixture as a value stream (zero advantage stream, action 0) gives the reference's
    loss, TD and gradients of the policy target; with a policy one-hot on a* (a margin of 40 nats) the
    target is Double DQN's."""
    n = 6
    isv = S.bootstrap_vector()
    isv[S.RL_SUPPORT_V_MIN], isv[S.RL_SUPPORT_V_MAX] = -2.5, 2.5
    adv, val = nonzero_uniform(rng, (n, NQ), -2, 2), nonzero_uniform(rng, (n, N_ATOMS), -2, 2)
    actions = rng.integers(0, N_ACTIONS, n).astype(np.int32)
    reward, done = nonzero_uniform(rng, n, -1, 1), (np.arange(n) % 3 == 2).astype(np.float32)
    is_w = rng.uniform(0.2, 1.0, n).astype(np.float32)
    a_star = rng.integers(0, N_ACTIONS, n).astype(np.int32)
    y, pi, t_adv, t_val = _inputs(rng, n, 0)
    one_hot = pi.copy()
    one_hot[np.arange(n), a_star] += 40.0
    sup, gamma = R.support_of(isv), np.float64(isv[S.RL_GAMMA])
    f64 = lambda a: a.astype(np.float64)  # noqa: E731
    for logits in (pi, one_hot):
        y[:n, COL_PI:COL_PI + N_ACTIONS] = logits
        log_q = _mixture(y, 0, t_adv, t_val, n, policy_mixture_grid(n))
        d_adv, d_val, loss, td = poisoned(n * NQ), poisoned(n * N_ATOMS), poisoned(n), poisoned(n)
        KL.rl_c51_loss[KL.c51_grid(n)](
            _gate(), cuda.to_device(adv.ravel()), cuda.to_device(val.ravel()), cuda.to_device(actions),
            cuda.to_device(np.zeros(n * NQ, np.float32)), cuda.to_device(log_q.ravel()),
            cuda.to_device(np.zeros(n, np.int32)), cuda.to_device(reward), cuda.to_device(done),
            cuda.to_device(is_w), np.int32(n), cuda.to_device(isv), d_adv, d_val, loss, td)
        m, e_t = R.c51_target(f64(t_adv), f64(t_val), None, f64(reward), f64(done), gamma, sup, f64(logits))
        ce, _, want_dadv, want_dval, e_on = R.c51_loss(f64(adv), f64(val), actions, m, f64(is_w), sup)
        np.testing.assert_allclose(assert_all_written(loss), ce, rtol=1e-4, atol=1e-5)
        np.testing.assert_allclose(assert_all_written(td), f64(reward) + gamma * (1 - done) * e_t - e_on, rtol=1e-4,
                                   atol=1e-5)
        np.testing.assert_allclose(assert_all_written(d_adv), want_dadv.ravel(), rtol=1e-4, atol=1e-6)
        np.testing.assert_allclose(assert_all_written(d_val), want_dval.ravel(), rtol=1e-4, atol=1e-6)
    greedy, _ = R.c51_target(f64(t_adv), f64(t_val), a_star, f64(reward), f64(done), gamma, sup)
    np.testing.assert_allclose(m, greedy, rtol=1e-9, atol=1e-12)   # the last pass: the one-hot policy
    mixed, _ = R.c51_target(f64(t_adv), f64(t_val), None, f64(reward), f64(done), gamma, sup, f64(pi))
    assert np.abs(mixed - greedy).max() > 1e-2


# ------------------------------------------------------------------ the learning update
def _env(rng, n):
    return random_env_batch(rng, n, n, OBS_DIM)


def _rep(rng):
    return random_replay_batch(rng, M, OBS_DIM)


@pytest.mark.slow
@pytest.mark.parametrize("mirror", [False, True], ids=["plain", "mirror"])
def test_policy_target_update_matches_reference_and_finite_differences(rng, mirror):
    nets = random_nets(rng, OBS_DIM, HIDDEN)
    lay = nets.layout
    env, rep = _env(rng, B), _rep(rng)
    isv = S.bootstrap_vector()
    isv[S.RL_ENTROPY_COEF] = 0.05
    state0 = nets.state_dict()
    learner = Learner(nets, B, M, mirror=mirror, policy_target=True)
    learner.t_mix.copy_to_device(np.full(learner.t_mix.shape, np.nan, np.float32))
    isv_d = cuda.to_device(isv)
    out = learner.update(batch_to_device(env), batch_to_device(rep), isv_d, _gate())
    ref = RL.update(state0, isv, env, rep, lay, mirror=mirror, policy_target=True)
    assert_all_written(learner.t_mix.copy_to_host()[:M * N_ATOMS])

    p0 = state0["params"].astype(np.float64)
    target = state0["target"].astype(np.float64)
    fw = RL.forward(p0, target, lay, env, rep, mirror=mirror, policy_target=True)
    np.testing.assert_allclose(fw["pi_sp"], RL.pi_logits(p0, lay, rep.obs_next), rtol=1e-5, atol=1e-6)
    fixed = RL.targets(fw, env, rep, isv.copy())

    def loss(p):
        return RL.total_loss(p, target, lay, env, rep, fixed, isv, mirror=mirror)

    grads = nets.grads.copy_to_host().astype(np.float64)
    assert_grads_match_finite_differences(loss, p0, lay, ref.grads, grads)
    assert_update_matches_reference(nets, isv, isv_d, out, ref)
    # the target changes Q's gradient and what reaches the encoder from it; PPO's own gradient does not move
    greedy = RL.update(state0, isv, env, rep, lay, mirror=mirror)
    for mod in ("q", "enc"):
        sl = lay.module_slice[mod]
        assert np.abs(greedy.grads[sl] - ref.grads[sl]).max() > 1e-3 * np.abs(ref.grads[sl]).max(), mod
    sl = lay.module_slice["pi"]
    np.testing.assert_allclose(greedy.grads[sl], ref.grads[sl], rtol=1e-12, atol=1e-15)


def test_reference_policy_target_update_runs_in_float32_as_the_numpy_backend(rng):
    nets = random_nets(rng, OBS_DIM, HIDDEN)
    env, rep = _env(rng, B), _rep(rng)
    assert_float32_update_matches(nets, env, rep, policy_target=True)


def test_policy_target_runs_the_sequence_and_is_checked():
    assert Learner(Nets(OBS_DIM, seed=1, hidden=HIDDEN), B, M, fused="on", policy_target=True).fused == "off"
    assert TrainConfig().q_target == "greedy"   # the SPEC's Double DQN unless asked
    TrainConfig(q_target="policy").validate()
    with pytest.raises(ConfigError, match="--q-target 'mean'"):
        TrainConfig(q_target="mean").validate()
