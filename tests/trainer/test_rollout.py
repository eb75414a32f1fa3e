"""--rollout T > 1 in the trainer: the phases (collect steps leave pi and V alone, every T-th step updates
them on the rollout), same seed -> same bits, a checkpoint mid-rollout resumes bit-identically, and the sim
backend (the kernels) agrees with the numpy backend over a collect step and an update step."""
import subprocess
import sys

import numpy as np
import pytest

from alpharl import isv as S
from alpharl import target
from alpharl.config import ConfigError, TrainConfig
from alpharl.cuda_kernels.nets.advantage import ENV_COLLECT, ENV_GAE, ENV_ONE_STEP
from alpharl.lobster.sample import load_embedded
from alpharl.rollout import phase_of
from alpharl.trainer import IntegratedTrainer

MARKET = load_embedded()
T = 3


def _cfg(**kw):
    base = dict(b=4, backend="numpy", minibatch=16, replay_capacity=256, seed=3, rollout=T, gae_lambda=0.9)
    return TrainConfig.plain(**(base | kw))


def _state_equal(a, b):
    assert a.keys() == b.keys()
    for k in a:
        np.testing.assert_array_equal(a[k], b[k], err_msg=k)


def test_phase_schedule_and_config_checks():
    assert [phase_of(s, 1) for s in range(4)] == [ENV_ONE_STEP] * 4
    assert [phase_of(s, 3) for s in range(7)] == [ENV_COLLECT, ENV_COLLECT, ENV_GAE] * 2 + [ENV_COLLECT]
    for bad in (dict(rollout=0), dict(rollout=1025), dict(rollout=64, b=65536), dict(gae_lambda=1.5),
                dict(gae_lambda=-0.1), dict(gae_lambda=float("nan")), dict(rollout_rows=-1), dict(rollout_rows=T - 1)):
        with pytest.raises(ConfigError):
            _cfg(**bad).validate()
    assert 'rollout = 3' in _cfg().to_toml() and 'gae_lambda = 0.9' in _cfg().to_toml()
    assert 'rollout_rows = 12' in _cfg(rollout_rows=12).to_toml()


def test_rollout_rows_learns_from_a_subset_and_changes_nothing_when_all_fit():
    """B = 8, T = 3, R = 12: each update learns from the whole trajectories of 4 backtests (stride 2), so the
    PPO/V samples are 12; R = T B or the default (8192) learns from all of them, bit-identical to R = 0."""
    kw = dict(b=8)
    full, fits, default, part = (IntegratedTrainer(_cfg(**kw, **rows), MARKET) for rows in (
        dict(rollout_rows=0), dict(rollout_rows=T * 8), {}, dict(rollout_rows=12)))
    for tr in (full, fits, default, part):
        tr.run(2 * T)
    _state_equal(full.state_dict(), fits.state_dict())
    _state_equal(full.state_dict(), default.state_dict())
    assert part.ops.rollout.stride == 2 and part.ops.rollout.n_sub == 4
    assert full.read_isv()[S.RL_OBS_PPO_SAMPLES] == T * 8 and part.read_isv()[S.RL_OBS_PPO_SAMPLES] == T * 4
    a, b = full.state_dict(), part.state_dict()
    assert a.keys() == b.keys()  # the subset's buffer is scratch, not checkpointed
    for k in ("rollout.action", "rollout.reward", "prng"):  # the same market and actions until the update
        np.testing.assert_array_equal(a[k], b[k], err_msg=k)
    lay = part.ops.layout
    for m in ("pi", "v"):
        assert not np.array_equal(a["nets.params"][lay.module_slice[m]], b["nets.params"][lay.module_slice[m]])


def test_collect_steps_leave_pi_and_v_alone_and_the_update_step_moves_them():
    tr = IntegratedTrainer(_cfg(), MARKET)
    lay = tr.ops.layout
    heads = [lay.module_slice[m] for m in ("pi", "v")]
    p0 = tr.state_dict()["nets.params"]
    tr.run(T - 1)  # collect steps only
    st = tr.state_dict()
    isv = tr.read_isv()
    for sl in heads:
        np.testing.assert_array_equal(st["nets.params"][sl], p0[sl])
    assert not np.array_equal(st["nets.params"][lay.module_slice["q"]], p0[lay.module_slice["q"]])
    assert isv[S.RL_OBS_PPO_SAMPLES] == 0 and isv[S.RL_LOSS_PI] == 0 and isv[S.RL_ENTROPY_EMA] == 0
    r = st["rollout.reward"].reshape(T, 4)
    assert (st["rollout.v_used"].reshape(T, 4)[:T - 1] != 0).all() and (st["rollout.v_used"][-4:] == 0).all()
    assert np.array_equal(r[T - 1], np.zeros(4))
    tr.step()  # the update step
    st = tr.state_dict()
    isv = tr.read_isv()
    for sl in heads:
        assert not np.array_equal(st["nets.params"][sl], p0[sl])
    assert isv[S.RL_OBS_PPO_SAMPLES] == T * 4
    assert isv[S.RL_LOSS_PI] != 0 and isv[S.RL_ENTROPY_EMA] > 0 and isv[S.RL_ADV_VAR_EMA] > 0
    assert (st["rollout.v_used"] != 0).all()  # the last slice written by rl_gae
    ema = isv[S.RL_ENTROPY_EMA]
    # what reads the PPO/V update's signals steps once per update: on a collect step it holds
    ppo_ruled = (S.RL_LR_PI, S.RL_LR_V, S.RL_PPO_CLIP_EPS, S.RL_PPO_RATIO_CLAMP, S.RL_ENTROPY_COEF, S.RL_K_LOOP_MULT)
    before = isv[list(ppo_ruled)].copy()
    tr.step()  # a collect step again: the PPO signals hold
    isv = tr.read_isv()
    assert isv[S.RL_OBS_PPO_SAMPLES] == 0 and isv[S.RL_ENTROPY_EMA] == ema
    np.testing.assert_array_equal(isv[list(ppo_ruled)], before)


def test_same_seed_same_bits_with_a_rollout():
    a = IntegratedTrainer(_cfg(), MARKET)
    b = IntegratedTrainer(_cfg(), MARKET)
    a.run(2 * T)
    b.run(2 * T)
    _state_equal(a.state_dict(), b.state_dict())
    c = IntegratedTrainer(_cfg(gae_lambda=0.5), MARKET)
    c.run(2 * T)
    assert not np.array_equal(c.state_dict()["nets.params"], a.state_dict()["nets.params"])


def test_resume_mid_rollout_in_a_new_process_is_bit_identical(tmp_path):
    """A checkpoint after T + 1 steps (one slice of the second rollout filled) resumes to the same bits."""
    from alpharl.checkpoint import load_checkpoint
    from alpharl.run import train

    n = T + 1
    straight, split = tmp_path / "straight", tmp_path / "split"
    train(_cfg(steps=2 * n, run_dir=str(straight), diag_every=2))
    train(_cfg(steps=n, run_dir=str(split), diag_every=2))
    code = (f"from alpharl.config import TrainConfig; from alpharl.run import train; "
            f"train(TrainConfig(steps={2 * n}, backend='numpy'), resume={str(split)!r})")
    subprocess.run([sys.executable, "-c", code], check=True, timeout=600)
    a, _ = load_checkpoint(straight)
    b, meta = load_checkpoint(split)
    assert meta["step"] == 2 * n and meta["config"]["rollout"] == T
    _state_equal(a, b)
    assert any(k.startswith("rollout.") for k in a)


def test_a_run_recorded_before_rollout_rows_resumes_with_all_rows(tmp_path):
    from alpharl.rundir import read_run_config
    from alpharl.run import train

    run = tmp_path / "run"
    train(_cfg(steps=T, run_dir=str(run)))
    assert read_run_config(run).rollout_rows == TrainConfig().rollout_rows == 8192
    path = run / "config.toml"
    path.write_text("".join(line for line in path.read_text().splitlines(keepends=True)
                            if not line.startswith("rollout_rows")))
    assert read_run_config(run).rollout_rows == 0


def test_a_checkpoint_without_the_rollout_is_refused():
    tr = IntegratedTrainer(_cfg(rollout=1), MARKET)
    tr.step()
    d = tr.state_dict()
    assert not any(k.startswith("rollout.") for k in d)
    with pytest.raises(ValueError, match="rollout"):
        IntegratedTrainer(_cfg(), MARKET).load_state_dict(d)


@pytest.mark.slow
@pytest.mark.skipif(target.on_simulator() is False, reason="the sim backend needs the CUDA simulator")
@pytest.mark.parametrize("rows", [0, 2])
def test_collect_and_update_steps_numpy_and_kernels_agree(rows):
    """T = 2 from the same seed: a collect step and an update step, the kernels (sim backend) vs the NumPy
    references: the same actions, the rollout buffer and the ISV to float32 tolerance; rows = 2: the update
    learns from one of the two backtests (rl_rollout_gather)."""
    kw = dict(b=2, minibatch=2, replay_capacity=8, rollout=2, rollout_rows=rows)
    ref = IntegratedTrainer(_cfg(**kw), MARKET, hidden=16)
    dev = IntegratedTrainer(_cfg(backend="sim", **kw), MARKET, hidden=16)
    for _ in range(2):
        ref.step()
        dev.step()
    sr, sd = ref.state_dict(), dev.state_dict()
    for k in ("rollout.action", "rollout.done", "prng", "step_count"):
        np.testing.assert_array_equal(sd[k], sr[k], err_msg=k)
    for k in ("rollout.obs", "rollout.logp", "rollout.reward", "rollout.v_used"):
        np.testing.assert_allclose(sd[k], sr[k], rtol=2e-3, atol=1e-5, err_msg=k)
    isv_r, isv_d = ref.read_isv(), dev.read_isv()
    # Adam's first steps are ~ +-lr where a gradient is ~0 and float32 noise can flip its sign (as in
    # tests/trainer/test_trainer.py): a few parameters may differ by up to 2 lr per step, two steps here.
    p_d, p_r = sd["nets.params"].astype(np.float64), sr["nets.params"].astype(np.float64)
    close = np.isclose(p_d, p_r, rtol=2e-3, atol=1e-5)
    assert close.mean() > 0.98, f"{(~close).sum()} parameters differ"
    assert np.abs(p_d - p_r)[~close].max(initial=0) <= 4 * max(float(isv_r[s]) for s in S.LR_SLOTS) * 1.01
    assert isv_d[S.RL_OBS_PPO_SAMPLES] == isv_r[S.RL_OBS_PPO_SAMPLES] == (2 if rows else 4)
    np.testing.assert_allclose(isv_d, isv_r, rtol=2e-3, atol=1e-5)


def test_a_run_recorded_before_the_study_defaults_reads_as_the_plain_path(tmp_path):
    """A config.toml without the learning options or the reward / episode options predates them: the plain
    path, not today's defaults."""
    from alpharl.config import PLAIN_OPTIONS, STUDY_SIM_DEFAULTS
    from alpharl.rundir import read_run_config
    from alpharl.run import train
    from alpharl.sim.params import SimParams

    run = tmp_path / "run"
    train(TrainConfig(steps=2, b=4, backend="numpy", minibatch=16, replay_capacity=256, seed=3, run_dir=str(run)))
    now = read_run_config(run)
    assert (now.rollout, now.reward_norm, now.sim.episode_end) == (16, True, "horizon")
    path = run / "config.toml"
    old = set(PLAIN_OPTIONS) | set(STUDY_SIM_DEFAULTS)
    path.write_text("".join(line for line in path.read_text().splitlines(keepends=True)
                            if line.split(" = ")[0] not in old))
    then = read_run_config(run)
    assert {k: getattr(then, k) for k in PLAIN_OPTIONS} == PLAIN_OPTIONS
    assert {k: getattr(then.sim, k) for k in STUDY_SIM_DEFAULTS} == {k: getattr(SimParams(), k) for k in STUDY_SIM_DEFAULTS}
    assert then.sim.fee_mode == now.sim.fee_mode and then.rollout_rows == now.rollout_rows
