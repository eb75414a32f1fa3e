"""One whole learning update on a tiny batch vs the NumPy reference update:
gradients of every module vs float64 finite differences of the reference loss,
parameters after Adam, ISV losses / grad norms, every per-sample output; on
ragged batches (B != M) gradients and outputs vs the reference; gate = 0 leaves
everything untouched."""
import numpy as np
import pytest
from numba import cuda
from support import (assert_all_written, assert_float32_update_matches, assert_grads_match_finite_differences,
                     assert_update_matches_reference, batch_to_device, nonzero_uniform, random_nets)

from alpharl import isv as S
from alpharl.batches import EnvBatch, GaeInputs, ReplayBatch
from alpharl.cuda_kernels.nets.advantage import ENV_COLLECT, ENV_GAE
from alpharl.learner import Learner
from alpharl.nets import MODULES, Nets
from alpharl.reference import learner as RL
from alpharl.sizes import N_ACTIONS

B, M, OBS_DIM, HIDDEN = 3, 2, 5, 8


def _batches(rng):
    env = EnvBatch(obs=nonzero_uniform(rng, (B, OBS_DIM), -2, 2), action=rng.integers(0, N_ACTIONS, B).astype(np.int32),
                   logp_old=np.log(rng.uniform(0.05, 0.3, B)).astype(np.float32), reward=nonzero_uniform(rng, B, -2, 2),
                   done=np.array([0, 1, 0], np.float32), obs_next=nonzero_uniform(rng, (B, OBS_DIM), -2, 2),
                   label_up=np.array([1, 0, 1], np.float32), label_ret=nonzero_uniform(rng, B, -0.1, 0.1))
    rep = ReplayBatch(obs=nonzero_uniform(rng, (M, OBS_DIM), -2, 2),
                      action=rng.integers(0, N_ACTIONS, M).astype(np.int32),
                      reward=nonzero_uniform(rng, M, -3, 3), done=np.array([0, 1], np.float32),
                      obs_next=nonzero_uniform(rng, (M, OBS_DIM), -2, 2),
                      is_weight=rng.uniform(0.2, 1.0, M).astype(np.float32))
    return env, rep


def _device(env, rep):
    return batch_to_device(env), batch_to_device(rep)


def _nets(rng):
    return random_nets(rng, OBS_DIM, HIDDEN)


def _poison_outputs(learner):
    for name in ("losses", "td", "a_star", "entropy", "kl", "ratio", "advantage", "ret", "v_used", "v_used_next",
                 "v_out", "v_dq"):
        buf = getattr(learner, name)
        host = np.empty(buf.shape, buf.dtype)
        host.fill(np.nan if buf.dtype == np.float32 else -123456789)
        buf.copy_to_device(host)


#: The learner's two paths: the launch sequence and the one cooperative launch (rl_update_fused).
PATHS = pytest.mark.parametrize("fused", ["off", "on"])


@pytest.mark.slow
@PATHS
def test_whole_update_matches_reference_and_finite_differences(rng, fused):
    nets = _nets(rng)
    lay = nets.layout
    env, rep = _batches(rng)
    isv = S.bootstrap_vector()
    isv[S.RL_ENTROPY_COEF] = 0.05
    state0 = nets.state_dict()
    learner = Learner(nets, B, M, fused=fused)
    _poison_outputs(learner)
    isv_d = cuda.to_device(isv)
    out = learner.update(*_device(env, rep), isv_d, cuda.to_device(np.ones(1, np.int32)))
    ref = RL.update(state0, isv, env, rep, lay)

    # Gradients: kernels vs the float64 reference backward vs finite differences of the reference loss.
    grads = nets.grads.copy_to_host().astype(np.float64)
    p0 = state0["params"].astype(np.float64)
    target = state0["target"].astype(np.float64)
    fw = RL.forward(p0, target, lay, env, rep)
    fixed = RL.targets(fw, env, rep, isv.copy())
    assert_grads_match_finite_differences(lambda q: RL.total_loss(q, target, lay, env, rep, fixed, isv), p0, lay,
                                          ref.grads, grads)

    # One Adam step of every module, the ISV it writes, every per-sample output.
    assert_update_matches_reference(nets, isv, isv_d, out, ref)
    np.testing.assert_allclose(nets.adam_m.copy_to_host(), ref.state["adam_m"], rtol=1e-3, atol=1e-8)
    np.testing.assert_array_equal(nets.adam_state.copy_to_host(), ref.state["adam_state"])


@PATHS
def test_gate_zero_leaves_everything_untouched(rng, fused):
    nets = _nets(rng)
    env, rep = _batches(rng)
    learner = Learner(nets, B, M, fused=fused)
    before = nets.state_dict()
    grads = nets.grads.copy_to_host()
    isv = S.bootstrap_vector()
    isv_d = cuda.to_device(isv)
    learner.update(*_device(env, rep), isv_d, cuda.to_device(np.zeros(1, np.int32)))
    after = nets.state_dict()
    for k in ("params", "adam_m", "adam_v", "target", "adam_state"):
        np.testing.assert_array_equal(after[k], before[k])
    np.testing.assert_array_equal(nets.grads.copy_to_host(), grads)
    np.testing.assert_array_equal(isv_d.copy_to_host(), isv)


def test_batch_sizes_are_checked(rng):
    nets = Nets(OBS_DIM, seed=1, hidden=HIDDEN)
    env, rep = _batches(rng)
    with pytest.raises(ValueError, match="outside"):
        Learner(nets, B - 1, M).update(*_device(env, rep), cuda.to_device(S.bootstrap_vector()),
                                       cuda.to_device(np.ones(1, np.int32)))


def test_reference_update_runs_in_float32_as_the_numpy_backend(rng):
    """The numpy backend runs the same reference in float32: it agrees with float64 to float32 tolerance."""
    nets = _nets(rng)
    env, rep = _batches(rng)
    assert_float32_update_matches(nets, env, rep)


def test_act_forward_gives_the_policy_logits(rng):
    nets = _nets(rng)
    obs = nonzero_uniform(rng, (B, OBS_DIM), -2, 2)
    learner = Learner(nets, B, M)
    learner.pi_logits.copy_to_device(np.full(B * N_ACTIONS, np.nan, np.float32))
    got = assert_all_written(learner.act_forward(cuda.to_device(obs), cuda.to_device(np.ones(1, np.int32))))
    p = nets.params.copy_to_host().astype(np.float64)
    _, h = RL.encode(p, nets.layout, obs.astype(np.float64))
    w, bias = RL._w(p, nets.layout, "pi.out")
    np.testing.assert_allclose(got, h @ w + bias, rtol=1e-4, atol=1e-6)


@pytest.mark.slow
@PATHS
@pytest.mark.parametrize("b, m", [(37, 5), (5, 37)])
def test_ragged_batches_match_reference(rng, b, m, fused):
    """B != M over several row tiles of the fused narrow forward and several chunks of the narrow dW:
    every gradient and per-sample output vs the float64 reference update."""
    nets = _nets(rng)
    env = EnvBatch(obs=nonzero_uniform(rng, (b, OBS_DIM), -2, 2), action=rng.integers(0, N_ACTIONS, b).astype(np.int32),
                   logp_old=np.log(rng.uniform(0.05, 0.3, b)).astype(np.float32), reward=nonzero_uniform(rng, b, -2, 2),
                   done=(rng.uniform(size=b) < 0.3).astype(np.float32),
                   obs_next=nonzero_uniform(rng, (b, OBS_DIM), -2, 2),
                   label_up=(rng.uniform(size=b) < 0.5).astype(np.float32),
                   label_ret=nonzero_uniform(rng, b, -0.1, 0.1))
    rep = ReplayBatch(obs=nonzero_uniform(rng, (m, OBS_DIM), -2, 2),
                      action=rng.integers(0, N_ACTIONS, m).astype(np.int32),
                      reward=nonzero_uniform(rng, m, -3, 3), done=(rng.uniform(size=m) < 0.3).astype(np.float32),
                      obs_next=nonzero_uniform(rng, (m, OBS_DIM), -2, 2),
                      is_weight=rng.uniform(0.2, 1.0, m).astype(np.float32))
    isv = S.bootstrap_vector()
    state0 = nets.state_dict()
    learner = Learner(nets, b, m, fused=fused)
    _poison_outputs(learner)
    out = learner.update(*_device(env, rep), cuda.to_device(isv), cuda.to_device(np.ones(1, np.int32)))
    ref = RL.update(state0, isv, env, rep, nets.layout)
    grads = nets.grads.copy_to_host()
    for mod in MODULES:
        sl = nets.layout.module_slice[mod]
        np.testing.assert_allclose(grads[sl], ref.grads[sl], rtol=1e-3, atol=1e-5 * np.abs(ref.grads[sl]).max(),
                                   err_msg=mod)
    for name in ("q_priority", "advantage", "ret", "v_used_next", "v_dq", "entropy", "ratio"):
        np.testing.assert_allclose(assert_all_written(getattr(out, name)), getattr(ref.out, name), rtol=1e-4,
                                   atol=1e-5, err_msg=name)


# ------------------------------------------------------------ --rollout T: collect and GAE modes
T_LEN = 3


def _rollout(rng):
    """A rollout of T_LEN slices of B transitions (the update step's env rows), s_T, and its GAE inputs."""
    n = T_LEN * B
    env = EnvBatch(obs=nonzero_uniform(rng, (n, OBS_DIM), -2, 2), action=rng.integers(0, N_ACTIONS, n).astype(np.int32),
                   logp_old=np.log(rng.uniform(0.05, 0.3, n)).astype(np.float32),
                   reward=nonzero_uniform(rng, n, -2, 2), done=(rng.uniform(size=n) < 0.3).astype(np.float32),
                   obs_next=nonzero_uniform(rng, (B, OBS_DIM), -2, 2),
                   label_up=(rng.uniform(size=n) < 0.5).astype(np.float32), label_ret=nonzero_uniform(rng, n, -0.1, 0.1))
    return env, nonzero_uniform(rng, n, -1, 1)


@pytest.mark.slow
def test_gae_mode_update_matches_reference_and_finite_differences(rng):
    """The update step: rl_gae inside the first iteration (V_used of the last slice and s_T from its forward),
    PPO/V/BCE/AUX on the T B rollout rows; a second iteration reuses the advantages. Kernels vs the reference
    update, the reference's pi and V gradients vs finite differences of its loss."""
    nets = _nets(rng)
    lay = nets.layout
    env, v_used = _rollout(rng)
    _, rep = _batches(rng)
    isv = S.bootstrap_vector()
    isv[S.RL_ENTROPY_COEF] = 0.05
    state0 = nets.state_dict()
    learner = Learner(nets, T_LEN * B, M, max_next=B)
    _poison_outputs(learner)
    isv_d = cuda.to_device(isv)
    v_used_d = cuda.to_device(v_used)
    env_d, rep_d = _device(env, rep)
    gate = cuda.to_device(np.ones(1, np.int32))
    out = learner.update(env_d, rep_d, isv_d, gate, mode=ENV_GAE,
                         gae=GaeInputs(env_d.reward, env_d.done, v_used_d, 0.9))
    host_v = v_used.copy()
    bufs = {k: np.zeros(T_LEN * B) for k in ("advantage", "ret", "ppo_adv")}
    ref = RL.update(state0, isv, env, rep, lay, mode=ENV_GAE, gae=GaeInputs(env.reward, env.done, host_v, 0.9),
                    gae_buffers=bufs)
    np.testing.assert_allclose(assert_all_written(v_used_d), host_v, rtol=1e-4, atol=1e-6)
    for name in ("advantage", "ret", "ppo_adv"):
        np.testing.assert_allclose(assert_all_written(getattr(learner, name)[:T_LEN * B]), bufs[name], rtol=1e-4,
                                   atol=1e-5, err_msg=name)
    grads = nets.grads.copy_to_host()
    for mod in MODULES:
        sl = lay.module_slice[mod]
        np.testing.assert_allclose(grads[sl], ref.grads[sl], rtol=1e-3, atol=2e-5 * np.abs(ref.grads[sl]).max(),
                                   err_msg=mod)
    for name in ("q_priority", "entropy", "kl", "ratio", "advantage", "ret", "v_used", "v_used_next", "v_scalar_next"):
        np.testing.assert_allclose(assert_all_written(getattr(out, name)), getattr(ref.out, name), rtol=1e-4,
                                   atol=1e-5, err_msg=name)
    got_isv = isv_d.copy_to_host()
    for slot in [S.RL_LOSS_Q + k for k in range(5)] + [S.RL_OBS_Q_GRAD_NORM + k for k in range(len(MODULES))]:
        np.testing.assert_allclose(got_isv[slot], ref.isv[slot], rtol=1e-4, err_msg=S.BY_INDEX[slot].name)
    # the reference's gradient of pi and V vs finite differences of its loss at the fixed GAE targets
    p0 = state0["params"].astype(np.float64)
    target = state0["target"].astype(np.float64)
    fw = RL.forward(p0, target, lay, env, rep)
    fixed = RL.targets(fw, env, rep, isv.copy(), mode=ENV_GAE, gae_buffers=bufs)
    for mod in ("pi", "v"):
        sl = lay.module_slice[mod]
        fd = np.zeros(sl.stop - sl.start)
        for j, i in enumerate(range(sl.start, sl.stop)):
            pp, pm = p0.copy(), p0.copy()
            pp[i] += 1e-6
            pm[i] -= 1e-6
            fd[j] = (RL.total_loss(pp, target, lay, env, rep, fixed, isv) -
                     RL.total_loss(pm, target, lay, env, rep, fixed, isv)) / 2e-6
        np.testing.assert_allclose(ref.grads[sl], fd, rtol=1e-5, atol=1e-7 * np.abs(fd).max(), err_msg=mod)
    # a second iteration without gae reuses the advantages (not rewritten)
    adv_before = learner.ppo_adv.copy_to_host()
    learner.update(env_d, rep_d, isv_d, gate, mode=ENV_GAE)
    np.testing.assert_array_equal(learner.ppo_adv.copy_to_host(), adv_before)


@pytest.mark.slow
@PATHS
def test_collect_mode_update_leaves_pi_and_v_alone(rng, fused):
    """A collect step: pi and V keep parameters, moments, step counter, loss and grad-norm slots; the encoder's
    gradient is that of Q, BCE and AUX alone; everything else as the reference's collect update."""
    nets = _nets(rng)
    lay = nets.layout
    env, rep = _batches(rng)
    isv = S.bootstrap_vector()
    isv[[S.RL_LOSS_PI, S.RL_LOSS_V, S.RL_OBS_PI_GRAD_NORM, S.RL_OBS_V_GRAD_NORM]] = [7.0, 8.0, 9.0, 10.0]
    state0 = nets.state_dict()
    learner = Learner(nets, B, M, fused=fused)
    isv_d = cuda.to_device(isv)
    out = learner.update(*_device(env, rep), isv_d, cuda.to_device(np.ones(1, np.int32)), mode=ENV_COLLECT)
    ref = RL.update(state0, isv, env, rep, lay, mode=ENV_COLLECT)
    after = nets.state_dict()
    grads = nets.grads.copy_to_host()
    for mod in ("pi", "v"):
        sl = lay.module_slice[mod]
        np.testing.assert_array_equal(after["params"][sl], state0["params"][sl])
        np.testing.assert_array_equal(after["adam_m"][sl], state0["adam_m"][sl])
        assert (grads[sl] == 0).all() and (ref.grads[sl] == 0).all(), mod
    np.testing.assert_array_equal(after["adam_state"], ref.state["adam_state"])
    for mod in MODULES:
        sl = lay.module_slice[mod]
        np.testing.assert_allclose(grads[sl], ref.grads[sl], rtol=1e-3, atol=1e-5 * max(np.abs(ref.grads[sl]).max(), 1),
                                   err_msg=mod)
    got_isv = isv_d.copy_to_host()
    for slot in (S.RL_LOSS_PI, S.RL_LOSS_V, S.RL_OBS_PI_GRAD_NORM, S.RL_OBS_V_GRAD_NORM):
        assert got_isv[slot] == isv[slot] == ref.isv[slot], S.BY_INDEX[slot].name
    for slot in (S.RL_LOSS_Q, S.RL_LOSS_BCE, S.RL_LOSS_AUX, S.RL_OBS_ENC_GRAD_NORM):
        np.testing.assert_allclose(got_isv[slot], ref.isv[slot], rtol=1e-4, err_msg=S.BY_INDEX[slot].name)
    np.testing.assert_allclose(assert_all_written(out.v_used), ref.out.v_used, rtol=1e-4, atol=1e-6)
    assert ref.out.entropy is None and ref.out.advantage is None


def test_modes_check_their_batches(rng):
    nets = Nets(OBS_DIM, seed=1, hidden=HIDDEN)
    env, rep = _batches(rng)
    roll, _ = _rollout(rng)
    learner = Learner(nets, T_LEN * B, M, max_next=B)
    args = (cuda.to_device(S.bootstrap_vector()), cuda.to_device(np.ones(1, np.int32)))
    with pytest.raises(ValueError, match="mode"):
        learner.update(*_device(env, rep), *args, mode=ENV_GAE)  # GAE needs T B env rows and B t+1 rows
    with pytest.raises(ValueError, match="mode"):
        learner.update(*_device(roll, rep), *args, mode=ENV_COLLECT)
@pytest.mark.slow
@PATHS
def test_update_on_an_adaptive_support_with_a_reward_gain_and_relative_updates(rng, fused):
    """The whole update reading a support and a reward gain set in the ISV (V_dq, a*, the C51 target and
    loss on that support, the replay's rewards times the gain) with the guard's relative updates on:
    gradients, per-sample outputs and the ISV slots vs the float64 reference update."""
    nets = _nets(rng)
    env, rep = _batches(rng)
    v_max = np.float32(rng.uniform(0.5, 3.0))
    isv = S.bootstrap_vector()
    isv[S.RL_SUPPORT_V_MIN], isv[S.RL_SUPPORT_V_MAX] = -v_max, v_max
    isv[S.RL_REWARD_GAIN] = rng.uniform(0.3, 3.0)
    for k in range(len(MODULES)):
        isv[S.RL_LR_Q + k] = rng.uniform(1e-4, 3e-3)
    state0 = nets.state_dict()
    learner = Learner(nets, B, M, rel_update=True, fused=fused)
    _poison_outputs(learner)
    isv_d = cuda.to_device(isv)
    out = learner.update(*_device(env, rep), isv_d, cuda.to_device(np.ones(1, np.int32)))
    ref = RL.update(state0, isv, env, rep, nets.layout, rel_update=True)
    grads = nets.grads.copy_to_host()
    for mod in MODULES:
        sl = nets.layout.module_slice[mod]
        np.testing.assert_allclose(grads[sl], ref.grads[sl], rtol=1e-3, atol=1e-5 * np.abs(ref.grads[sl]).max(),
                                   err_msg=mod)
    for name in ("q_priority", "td", "a_star", "advantage", "ret", "v_used_next", "v_dq", "v_dq_next"):
        np.testing.assert_allclose(assert_all_written(getattr(out, name)), getattr(ref.out, name), rtol=1e-4,
                                   atol=1e-5, err_msg=name)
    assert np.abs(ref.out.v_dq).max() <= v_max  # V_dq is an expectation over the support
    got_isv = isv_d.copy_to_host()
    rel = [S.RL_OBS_Q_REL_UPDATE + k for k in range(len(MODULES))]
    assert (ref.isv[rel] > 0).all()
    np.testing.assert_allclose(got_isv[rel], ref.isv[rel], rtol=1e-4)
    np.testing.assert_allclose(got_isv[S.RL_LOSS_Q], ref.isv[S.RL_LOSS_Q], rtol=1e-4)


def test_fused_path_choice(rng):
    """off: the launch sequence; on: rl_update_fused (one launch); an unknown choice is refused."""
    nets = _nets(rng)
    env, rep = _batches(rng)
    args = (*_device(env, rep), cuda.to_device(S.bootstrap_vector()), cuda.to_device(np.ones(1, np.int32)))
    for fused in ("off", "on"):
        learner = Learner(nets, B, M, fused=fused)
        learner.h1.copy_to_device(np.full(learner.h1.shape, np.nan, np.float32))
        learner.x0.copy_to_device(np.full(learner.x0.shape, np.nan, np.float32))
        learner.update(*args)
        # the sequence stacks the encoder's input rows into x0; the fused kernel reads the batches directly
        assert np.isnan(learner.x0.copy_to_host()).all() == (fused == "on")
        assert not np.isnan(learner.h1.copy_to_host()[:(2 * B + 2 * M) * HIDDEN]).any()
    with pytest.raises(ValueError, match="fused"):
        Learner(nets, B, M, fused="maybe")


def test_grid_barrier_probe_returns_after_its_barriers():
    """rl_grid_barriers (the barrier-cost probe of benchmarks/fused_phases.py) writes nothing; one cooperative
    grid passes n barriers and completes (the simulator's grids are one block)."""
    from alpharl.cuda_kernels.nets.fused import FUSED_BLOCK, fused_grid, rl_grid_barriers

    for n in (0, 3):
        rl_grid_barriers[fused_grid(), FUSED_BLOCK](np.int32(n))
    cuda.synchronize()
