"""The mirror-equivariant actor (--mirror-policy): its two kernels vs NumPy, the whole learning update with
the mirror rows vs the reference update, the reference's gradient vs float64 finite differences of its loss
(the PPO gradient through both passes), acting, and exact equivariance z(M s) = P z(s)."""
import numpy as np
import pytest
from numba import cuda
from support import (assert_all_written, assert_float32_update_matches, assert_grads_match_finite_differences,
                     assert_update_matches_reference, batch_to_device, nonzero_uniform, poisoned, random_env_batch,
                     random_nets, random_replay_batch)

from alpharl import isv as S
from alpharl.batches import GaeInputs
from alpharl.config import ConfigError, TrainConfig
from alpharl.cuda_kernels.nets import mirror as KM
from alpharl.cuda_kernels.nets.advantage import ENV_GAE
from alpharl.learner import Learner
from alpharl.mirror import MIRROR_ACTION, mirror_obs
from alpharl.nets import MODULES, Nets
from alpharl.reference import learner as RL
from alpharl.sim import layout as L
from alpharl.sizes import N_ACTIONS

LEVELS = 2
OBS_DIM = L.obs_dim(LEVELS)
B, M, HIDDEN, T_LEN = 3, 2, 8, 3


def _gate(on: int = 1):
    return cuda.to_device(np.array([on], np.int32))


def _perm():
    return cuda.to_device(np.asarray(MIRROR_ACTION, np.int32))


def _env(rng, n, n_next):
    return random_env_batch(rng, n, n_next, OBS_DIM)


def _rep(rng):
    return random_replay_batch(rng, M, OBS_DIM)


def _device(batch):
    return batch_to_device(batch)


def _nets(rng):
    return random_nets(rng, OBS_DIM, HIDDEN)


# ------------------------------------------------------------------ the two kernels
def test_mirror_logits_average_each_row_with_its_mirror(rng):
    n = 5
    f = nonzero_uniform(rng, (2 * n, N_ACTIONS), -3, 3)
    d = cuda.to_device(f.ravel())
    KM.rl_mirror_logits[1, KM.MIRROR_BLOCK](_gate(), d, np.int32(n), _perm())
    got = d.copy_to_host().reshape(2 * n, N_ACTIONS)
    np.testing.assert_allclose(got[:n], 0.5 * (f[:n] + f[n:][:, MIRROR_ACTION]), rtol=1e-6)
    np.testing.assert_array_equal(got[n:], f[n:])   # the mirror rows are only read


def test_mirror_grads_split_over_the_two_passes(rng):
    n = 4
    g = nonzero_uniform(rng, (n, N_ACTIONS), -1, 1)
    d_pi = np.full((2 * n, N_ACTIONS), np.nan, np.float32)
    d_pi[:n] = g
    heads = [np.concatenate([nonzero_uniform(rng, n), np.full(n, np.nan, np.float32)]) for _ in range(3)]
    dd = cuda.to_device(d_pi.ravel())
    dh = [cuda.to_device(x) for x in heads]
    KM.rl_mirror_grads[1, KM.MIRROR_BLOCK](_gate(), dd, *dh, np.int32(n), _perm())
    got = assert_all_written(dd).reshape(2 * n, N_ACTIONS)
    np.testing.assert_array_equal(got[:n], 0.5 * g)
    want = np.empty_like(g)
    want[:, MIRROR_ACTION] = 0.5 * g          # d f(M s)[P[a]] = dz[a] / 2
    np.testing.assert_array_equal(got[n:], want)
    for x, d in zip(heads, dh):
        h = assert_all_written(d)
        np.testing.assert_array_equal(h[:n], x[:n])
        np.testing.assert_array_equal(h[n:], 0.0)


def test_mirror_kernels_write_nothing_on_a_closed_gate(rng):
    n = 3
    f = nonzero_uniform(rng, 2 * n * N_ACTIONS)
    d = cuda.to_device(f)
    KM.rl_mirror_logits[1, KM.MIRROR_BLOCK](_gate(0), d, np.int32(n), _perm())
    np.testing.assert_array_equal(d.copy_to_host(), f)
    z = poisoned(2 * n)
    KM.rl_mirror_grads[1, KM.MIRROR_BLOCK](_gate(0), d, z, z, z, np.int32(n), _perm())
    np.testing.assert_array_equal(d.copy_to_host(), f)
    assert np.isnan(z.copy_to_host()).all()


# ------------------------------------------------------------------ the learning update
def _poison(learner):
    for name in ("losses", "entropy", "kl", "ratio", "advantage", "ret", "v_used", "v_used_next", "v_out", "v_dq",
                 "pi_logits", "d_pi", "dv", "dbce", "daux"):
        buf = getattr(learner, name)
        buf.copy_to_device(np.full(buf.shape, np.nan, buf.dtype))


@pytest.mark.slow
def test_mirror_update_matches_reference_and_finite_differences(rng):
    nets = _nets(rng)
    lay = nets.layout
    env, rep = _env(rng, B, B), _rep(rng)
    isv = S.bootstrap_vector()
    isv[S.RL_ENTROPY_COEF] = 0.05
    state0 = nets.state_dict()
    learner = Learner(nets, B, M, mirror=True)
    _poison(learner)
    isv_d = cuda.to_device(isv)
    out = learner.update(_device(env), _device(rep), isv_d, _gate())
    ref = RL.update(state0, isv, env, rep, lay, mirror=True)

    p0 = state0["params"].astype(np.float64)
    target = state0["target"].astype(np.float64)
    fw = RL.forward(p0, target, lay, env, rep, mirror=True)
    # the policy the PPO loss sees is the mirror average of the pi head at s and at M s
    f_s = RL.pi_logits(p0, lay, env.obs.astype(np.float64)).astype(np.float64)
    np.testing.assert_allclose(fw["pi_logits"], RL.pi_logits(p0, lay, env.obs, mirror=True), rtol=1e-5, atol=1e-6)
    assert np.abs(fw["pi_logits"] - f_s).max() > 1e-3   # the mirror pass changes it
    fixed = RL.targets(fw, env, rep, isv.copy())

    def loss(p):
        return RL.total_loss(p, target, lay, env, rep, fixed, isv, mirror=True)

    grads = nets.grads.copy_to_host().astype(np.float64)
    assert_grads_match_finite_differences(loss, p0, lay, ref.grads, grads)
    # without the mirror the policy's and the encoder's gradients differ (the second pass is not a no-op)
    plain = RL.update(state0, isv, env, rep, lay)
    for mod in ("pi", "enc"):
        sl = lay.module_slice[mod]
        assert np.abs(plain.grads[sl] - ref.grads[sl]).max() > 1e-3 * np.abs(ref.grads[sl]).max(), mod

    assert_update_matches_reference(nets, isv, isv_d, out, ref)
    # every row of the two passes' head gradients written (the mirror rows by rl_mirror_grads)
    for name in ("d_pi", "dv", "dbce", "daux"):
        assert_all_written(getattr(learner, name))


@pytest.mark.slow
@pytest.mark.parametrize("policy_target", [False, True], ids=["greedy-target", "policy-target"])
def test_mirror_update_on_a_rollout_matches_reference(rng, policy_target):
    """The GAE update step (T B env rows, their T B mirror rows, B t+1 rows) vs the reference; with the
    policy target the s' rows its mixture reads sit after the 2 T B env rows."""
    nets = _nets(rng)
    lay = nets.layout
    n = T_LEN * B
    env, rep = _env(rng, n, B), _rep(rng)
    v_used = nonzero_uniform(rng, n, -1, 1)
    isv = S.bootstrap_vector()
    state0 = nets.state_dict()
    learner = Learner(nets, n, M, max_next=B, mirror=True, policy_target=policy_target)
    env_d = _device(env)
    out = learner.update(env_d, _device(rep), cuda.to_device(isv), _gate(), mode=ENV_GAE,
                         gae=GaeInputs(env_d.reward, env_d.done, cuda.to_device(v_used), 0.9))
    bufs = {k: np.zeros(n) for k in ("advantage", "ret", "ppo_adv")}
    ref = RL.update(state0, isv, env, rep, lay, mode=ENV_GAE, gae=GaeInputs(env.reward, env.done, v_used.copy(), 0.9),
                    gae_buffers=bufs, mirror=True, policy_target=policy_target)
    grads = nets.grads.copy_to_host()
    for mod in MODULES:
        sl = lay.module_slice[mod]
        np.testing.assert_allclose(grads[sl], ref.grads[sl], rtol=1e-3, atol=2e-5 * np.abs(ref.grads[sl]).max(),
                                   err_msg=mod)
    for name in ("entropy", "kl", "ratio", "advantage", "ret", "v_used_next", "v_scalar_next", "pi_logits",
                 "q_priority", "td"):
        np.testing.assert_allclose(assert_all_written(getattr(out, name)), getattr(ref.out, name), rtol=1e-4,
                                   atol=1e-5, err_msg=name)


def test_reference_mirror_update_runs_in_float32_as_the_numpy_backend(rng):
    nets = _nets(rng)
    env, rep = _env(rng, B, B), _rep(rng)
    assert_float32_update_matches(nets, env, rep, mirror=True)


# ------------------------------------------------------------------ acting
def test_mirror_act_forward_is_the_reference_and_equivariant(rng):
    nets = _nets(rng)
    obs = nonzero_uniform(rng, (B, OBS_DIM), -2, 2)
    learner = Learner(nets, B, M, mirror=True)
    learner.pi_logits.copy_to_device(np.full(learner.pi_logits.shape, np.nan, np.float32))
    z = assert_all_written(learner.act_forward(cuda.to_device(obs), _gate())).copy()
    p = nets.params.copy_to_host()
    np.testing.assert_allclose(z, RL.pi_logits(p, nets.layout, obs, mirror=True), rtol=1e-4, atol=1e-6)
    z_m = learner.act_forward(cuda.to_device(mirror_obs(obs, LEVELS)), _gate()).copy_to_host()
    np.testing.assert_allclose(z_m, z[:, MIRROR_ACTION], rtol=1e-5, atol=1e-6)   # z(M s) = P z(s)
    f = RL.pi_logits(p, nets.layout, obs)
    f_m = RL.pi_logits(p, nets.layout, mirror_obs(obs, LEVELS))
    assert np.abs(f_m - f[:, MIRROR_ACTION]).max() > 1e-3   # the plain head is not equivariant


def test_mirror_runs_the_sequence_and_needs_a_market_observation():
    assert Learner(Nets(OBS_DIM, seed=1, hidden=HIDDEN), B, M, fused="on", mirror=True).fused == "off"
    with pytest.raises(ValueError, match="whole book levels"):
        Learner(Nets(OBS_DIM + 1, seed=1, hidden=HIDDEN), B, M, mirror=True)
    with pytest.raises(ConfigError, match="--mirror-policy"):
        TrainConfig(mirror_policy=True, features=True).validate()
