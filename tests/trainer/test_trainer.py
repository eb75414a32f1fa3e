"""IntegratedTrainer gates: integrated_trainer_smoke, integrated smoke, determinism,
checkpoint/resume, the NaN guard, and numpy-vs-kernels agreement of one step."""
import json
import math
import subprocess
import sys

import numpy as np
import pytest

from alpharl import isv as S
from alpharl import target
from alpharl.config import TrainConfig
from alpharl.lobster.sample import load_embedded
from alpharl.trainer import IntegratedTrainer

MARKET = load_embedded()


def _cfg(**kw):
    base = dict(b=4, backend="numpy", minibatch=16, replay_capacity=256, seed=3)
    return TrainConfig.plain(**(base | kw))


def _check_isv_in_range(isv):
    bad = [f"{s.name}={isv[s.index]} not in [{s.lo}, {s.hi}]" for s in S.SLOTS
           if not (s.lo <= isv[s.index] <= s.hi) or math.isnan(isv[s.index])]
    assert not bad, "\n".join(bad)


def _check_losses_finite(isv):
    for s in S.SLOTS:
        if s.group == "losses":
            assert np.isfinite(isv[s.index]) and isv[s.index] != 0, s.name


@pytest.mark.parametrize("b", [1, 16])
def test_integrated_trainer_smoke(b):
    """1 step: every loss finite, every ISV slot within its documented range."""
    tr = IntegratedTrainer(_cfg(b=b), MARKET)
    tr.step()
    isv = tr.read_isv()
    _check_losses_finite(isv)
    _check_isv_in_range(isv)
    assert 2.5 < isv[S.RL_LOSS_Q] < 3.6  # near-uniform C51 at init: ln 21 = 3.04


def test_integrated_smoke_b128_three_steps():
    tr = IntegratedTrainer(_cfg(b=128, minibatch=64, replay_capacity=1024), MARKET)
    tr.run(3)
    isv = tr.read_isv()
    _check_losses_finite(isv)
    _check_isv_in_range(isv)
    assert all(np.isfinite(v) for v in tr.state_dict()["nets.params"])


def _state_equal(a, b):
    assert a.keys() == b.keys()
    for k in a:
        np.testing.assert_array_equal(a[k], b[k], err_msg=k)


def test_same_seed_same_results():
    a = IntegratedTrainer(_cfg(), MARKET)
    b = IntegratedTrainer(_cfg(), MARKET)
    a.run(4)
    b.run(4)
    _state_equal(a.state_dict(), b.state_dict())
    c = IntegratedTrainer(_cfg(seed=4), MARKET)
    c.run(4)
    assert not np.array_equal(c.state_dict()["nets.params"], a.state_dict()["nets.params"])


def test_resume_in_a_new_process_is_bit_identical(tmp_path):
    """2N steps in one process == N steps, checkpoint, new process resumes, N more."""
    from alpharl.checkpoint import load_checkpoint
    from alpharl.run import train

    n = 3
    straight = tmp_path / "straight"
    split = tmp_path / "split"
    train(_cfg(steps=2 * n, run_dir=str(straight), diag_every=1))
    train(_cfg(steps=n, run_dir=str(split), diag_every=1))
    code = (f"from alpharl.config import TrainConfig; from alpharl.run import train; "
            f"train(TrainConfig(steps={2 * n}, backend='numpy'), resume={str(split)!r})")
    subprocess.run([sys.executable, "-c", code], check=True, timeout=600)
    a, meta_a = load_checkpoint(straight)
    b, meta_b = load_checkpoint(split)
    assert meta_a["step"] == meta_b["step"] == 2 * n
    _state_equal(a, b)
    from alpharl.diag import read_diagnostics

    rows = read_diagnostics(split)
    assert rows.column("step").to_pylist() == list(range(1, 2 * n + 1))
    assert json.loads((split / "summary.json").read_text())["started_at_step"] == n


@pytest.mark.parametrize("what", ["reward", "obs"])
def test_nan_guard_keeps_weights_finite(what):
    """NaN injected into the rewards / observations: the affected heads skip their update
    (counted in the ISV), the weights stay finite."""
    tr = IntegratedTrainer(_cfg(b=4), MARKET)
    sim = tr.ops.sim
    real_step = sim.step

    def poisoned_step(actions):
        real_step(actions)
        if what == "reward":
            sim.out[0, 1] = np.nan  # reward of backtest 1
        else:
            sim.obs_buf[2, 0] = np.nan

    sim.step = poisoned_step
    tr.run(3)
    isv = tr.read_isv()
    state = tr.state_dict()
    for key in ("nets.params", "nets.adam_m", "nets.adam_v", "nets.target"):
        assert np.isfinite(state[key]).all(), key
    skips = sum(isv[slot] for slot in range(S.RL_NAN_SKIPS_Q, S.RL_NAN_SKIPS_ENC + 1))
    assert skips > 0
    _check_isv_in_range(np.where(np.isnan(isv), 0, isv))


#: The switches of the scale-free signals, all on.
SIGNALS_ON = dict(reward_norm=True, adaptive_support=True, adaptive_anchors=True)


@pytest.mark.slow
@pytest.mark.skipif(target.on_simulator() is False, reason="the sim backend needs the CUDA simulator")
# The grid path rides with the switches on: one simulated step each (~a minute) covers both.
@pytest.mark.parametrize("switches, grid", [({}, False), ({**SIGNALS_ON, "k_noise_band": True}, True),
                                            ({"mirror_policy": True, "q_target": "policy"}, False)],
                         ids=["fixed", "signals-replay-grid", "mirror-policy-target"])
def test_one_step_numpy_and_kernels_agree(switches, grid):
    """One step from the same state: the kernels (sim backend) and the NumPy references agree, with the
    reward normaliser, the adaptive support and the anchors off and on, and with the replay's draw and
    priority update on its grid path (the threshold moved below M, as a large M takes it); the mirror actor with
    the policy's C51 target (both backends take the two options)."""
    kw = dict(b=1, minibatch=2, replay_capacity=8, **switches)
    # A narrow encoder: the simulator runs one Python thread per GPU thread, and the kernels take the
    # width as an argument (their tiles cover any width; tests/nets checks them at several).
    ref = IntegratedTrainer(_cfg(**kw), MARKET, hidden=16)
    dev = IntegratedTrainer(_cfg(backend="sim", **kw), MARKET, hidden=16)
    if grid:
        for tr in (ref, dev):
            tr.ops.replay.grid_above = tr.M - 1
    lr_used = max(float(ref.read_isv()[s]) for s in S.LR_SLOTS)  # the step's Adam runs before its controllers
    ref.step()
    dev.step()
    isv_r, isv_d = ref.read_isv(), dev.read_isv()
    _check_losses_finite(isv_d)
    _check_isv_in_range(isv_d)
    # The relative update's Adam direction u = g / (|g| + eps) on a first step is as sensitive to float32
    # rounding of a gradient near eps as the parameters below; its norm (and the grad-norm target taken
    # from it) agrees to 2%.
    rel = [S.RL_OBS_Q_REL_UPDATE + k for k in range(len(S.LR_SLOTS))]
    rel += [e + S.GN_TARGET_OFFSET for e in S.GRAD_NORM_EMA_SLOTS]
    np.testing.assert_allclose(isv_d[rel], isv_r[rel], rtol=2e-2)
    strict = np.setdiff1d(np.arange(len(isv_r)), rel)
    np.testing.assert_allclose(isv_d[strict], isv_r[strict], rtol=2e-3, atol=1e-5)
    sr, sd = ref.state_dict(), dev.state_dict()
    np.testing.assert_array_equal(sd["replay.sampler_state"], sr["replay.sampler_state"])
    np.testing.assert_array_equal(sd["replay.mb_idx"], sr["replay.mb_idx"])
    for k in ("nets.target", "sim.state_i", "replay.priority", "replay.reward", "prng", "ret_run"):
        np.testing.assert_allclose(np.asarray(sd[k], np.float64), np.asarray(sr[k], np.float64), rtol=1e-3,
                                   atol=1e-5, err_msg=k)
    # Adam's first step is lr * g / (|g| + eps) ~ +-lr: where a gradient is ~0, float32 noise
    # between the kernels and the references can flip its sign. Those few parameters may differ
    # by up to 2 lr; everything else agrees to tolerance.
    p_d, p_r = sd["nets.params"].astype(np.float64), sr["nets.params"].astype(np.float64)
    close = np.isclose(p_d, p_r, rtol=1e-3, atol=1e-5)
    assert close.mean() > 0.99, f"{(~close).sum()} parameters differ"
    assert np.abs(p_d - p_r)[~close].max(initial=0) <= 2 * lr_used * 1.01


def test_numpy_backend_launches_no_kernel(monkeypatch):
    """The numpy backend runs the references only: a kernel launch (slow under the simulator,
    impossible without one) would mean an operation lost its reference path."""
    from alpharl.cuda_kernels import registry

    def refuse(self, launch_config):
        raise AssertionError(f"numpy backend launched {self.name}")

    monkeypatch.setattr(registry.Kernel, "__getitem__", refuse)
    tr = IntegratedTrainer(_cfg(k_max=2), MARKET)
    tr.run(2)
    assert np.isfinite(tr.read_isv()[S.RL_LOSS_Q])


def _resumed(cfg, n: int, k: int | None = None) -> dict:
    """The state after n steps, a checkpoint into a new trainer, and n more (``k``: K from the start)."""
    b = IntegratedTrainer(cfg, MARKET)
    if k is not None:
        b.ops.isv[S.RL_K_LOOP_MULT] = k * S.K_FIXED_POINT
    b.run(n)
    c = IntegratedTrainer(cfg, MARKET)
    c.load_state_dict(b.state_dict())
    c.run(n)
    return c.state_dict()


def test_signals_switches_run_deterministic_and_resume_bit_identically():
    """--reward-norm --adaptive-support --adaptive-anchors: every ISV slot in range, the new statistics
    moving, same seed same bits, and N steps + checkpoint + N steps == 2N steps (the running returns are
    in the checkpoint)."""
    cfg = _cfg(k_max=2, **SIGNALS_ON)
    a = IntegratedTrainer(cfg, MARKET)
    a.run(6)
    isv = a.read_isv()
    _check_losses_finite(isv)
    _check_isv_in_range(isv)
    assert isv[S.RL_REWARD_NORM_COUNT] == 6 and isv[S.RL_REWARD_GAIN] != 1.0
    assert isv[S.RL_SUPPORT_V_MAX] != 10.0 and isv[S.RL_SUPPORT_V_MIN] == -isv[S.RL_SUPPORT_V_MAX]
    assert (isv[[S.RL_OBS_Q_REL_UPDATE + k for k in range(6)]] > 0).all()
    assert (isv[[e + S.GN_TARGET_OFFSET for e in S.GRAD_NORM_EMA_SLOTS]] > 0).all()
    _state_equal(a.state_dict(), _resumed(cfg, 3))


def test_paced_policy_step_moves_and_resumes_bit_identically():
    """--pace-policy with rollouts and K > 1: the pi head's relative-update target leaves the shared 1e-3 on
    the informed updates, the clip is its anchor, every slot in range; N + checkpoint + N == 2N."""
    from alpharl.cuda_kernels.controllers import anchors as AN
    from alpharl.cuda_kernels.controllers import ppo as PPO
    cfg = _cfg(k_max=2, rollout=2, pace_policy=True, **SIGNALS_ON)
    a = IntegratedTrainer(cfg, MARKET)
    a.ops.isv[S.RL_K_LOOP_MULT] = 2 * S.K_FIXED_POINT  # K = 2 from the start: every update is informed
    a.run(8)
    isv = a.read_isv()
    _check_isv_in_range(isv)
    assert isv[S.RL_PI_REL_TARGET] > 0 and isv[S.RL_PI_REL_TARGET] != np.float32(AN.REL_UPDATE_TARGET)
    assert isv[S.RL_CLIP_EPS_ANCHOR] > 0
    assert isv[S.RL_PPO_CLIP_EPS] == min(isv[S.RL_CLIP_EPS_ANCHOR], np.float32(PPO.CLIP_EPS_MAX))
    # the first iteration's KL is the drift since the rollout acted (the encoder moved under Q on the collect
    # step): positive, and the last iteration's (after this update's own policy step) differs from it
    assert isv[S.RL_OBS_KL_FIRST] > 0 and isv[S.RL_OBS_KL] != isv[S.RL_OBS_KL_FIRST]
    _state_equal(a.state_dict(), _resumed(cfg, 4, k=2))


def test_k_noise_band_measures_the_ratio_and_resumes_bit_identically():
    """--k-noise-band with rollouts: the ratio's running mean is written on the update steps (the first ratio
    as is, then moved at K_FLOOR_LEAK), its variance from the second update on; off, both stay 0;
    N + checkpoint + N == 2N."""
    cfg = _cfg(rollout=2, k_noise_band=True, **SIGNALS_ON)
    a = IntegratedTrainer(cfg, MARKET)
    a.run(8)
    isv = a.read_isv()
    _check_isv_in_range(isv)
    assert 0 < isv[S.RL_K_RATIO_MEAN] <= 1 and 0 < isv[S.RL_K_RATIO_VAR] < 1
    off = IntegratedTrainer(_cfg(rollout=2, **SIGNALS_ON), MARKET)
    off.run(8)
    assert off.read_isv()[S.RL_K_RATIO_MEAN] == 0 and off.read_isv()[S.RL_K_RATIO_VAR] == 0
    _state_equal(a.state_dict(), _resumed(cfg, 4))


def test_signals_off_leaves_their_slots_and_the_replay_as_before():
    """All three switches off: rl_scale as before (no running returns), the replay stores reward x
    reward_scale, the new slots hold their bootstrap values."""
    tr = IntegratedTrainer(_cfg(), MARKET)
    tr.run(3)
    isv, sd = tr.read_isv(), tr.state_dict()
    new = [s for s in S.SLOTS if S.RL_REWARD_MEAN_EMA <= s.index <= S.RL_K_RATIO_FLOOR]
    assert all(isv[s.index] == s.bootstrap for s in new), [s.name for s in new if isv[s.index] != s.bootstrap]
    assert not sd["ret_run"].any()
    assert tr.ops.reward_stored is tr.ops.reward


def test_a_checkpoint_without_running_returns_loads():
    """A checkpoint written before the running returns existed loads them as zeros."""
    a = IntegratedTrainer(_cfg(), MARKET)
    a.run(2)
    sd = a.state_dict()
    sd.pop("ret_run")
    b = IntegratedTrainer(_cfg(), MARKET)
    b.load_state_dict(sd)
    b.run(1)
    a.run(1)
    _state_equal(a.state_dict(), b.state_dict())


def test_the_defaults_are_the_studys_picks_and_learn(tmp_path):
    """TrainConfig() is the held-out study's pick (three signals, T = 16 GAE, horizon episodes, 0.3 sigma),
    also under a [sim] section that names none of those fields; plain() is the seeds' path and
    benchmarks/studies/default.toml; a default run's first rollout update moves every loss."""
    from alpharl.config import PLAIN_OPTIONS, STUDY_SIM_DEFAULTS
    from alpharl.sim.params import SimParams

    d = TrainConfig()
    assert (d.reward_norm, d.adaptive_support, d.adaptive_anchors, d.rollout) == (True, True, True, 16)
    assert {k: getattr(d.sim, k) for k in STUDY_SIM_DEFAULTS} == STUDY_SIM_DEFAULTS
    f = tmp_path / "c.toml"
    f.write_text('[sim]\nfee_mode = "per_value"\n')
    c = TrainConfig.from_toml(f)
    assert {k: getattr(c.sim, k) for k in STUDY_SIM_DEFAULTS} == STUDY_SIM_DEFAULTS and c.sim.fee_mode == "per_value"
    p = TrainConfig.plain()
    assert {k: getattr(p, k) for k in PLAIN_OPTIONS} == PLAIN_OPTIONS and p.sim == SimParams()
    from support import ROOT
    assert TrainConfig.from_toml(ROOT / "benchmarks/studies/default.toml") == TrainConfig.plain(checkpoint_every=0)
    tr = IntegratedTrainer(TrainConfig(b=4, backend="numpy", minibatch=16, replay_capacity=256, seed=3), MARKET)
    tr.run(d.rollout)   # the last of them runs the GAE update of PPO and V
    isv = tr.read_isv()
    _check_losses_finite(isv)
    _check_isv_in_range(isv)
    assert isv[S.RL_OBS_PPO_SAMPLES] == d.rollout * 4
