"""G3 controllers_emit: pre-seeded ISV inputs -> expected outputs, for every controller.

Each case seeds the signal slots, runs the kernel AND its NumPy reference, and
checks both against the value the rule documented in the kernel's docstring
gives: both hysteresis band edges, dead-signal holds, each clamp, cold start.
"""
import math

import numpy as np
import pytest
from numba import cuda

from alpharl import isv as S
from alpharl.cuda_kernels.controllers import k_loop as KL
from alpharl.cuda_kernels.controllers import lr as LR
from alpharl.cuda_kernels.controllers import per as PER
from alpharl.cuda_kernels.controllers import ppo as PPO
from alpharl.cuda_kernels.controllers import target_tau as TAU
from alpharl.cuda_kernels.controllers import v_blend as VB
from alpharl.reference import controllers as R
from controllers.controller_units import run_scalar, seeded_isv

f32 = np.float32


# ------------------------------------------------------------------ PPO clip
T = PPO.KL_TARGET
CLIP_CASES = [
    ("cold start", {}, PPO.CLIP_EPS_BOOTSTRAP),
    ("dead signal holds", {S.RL_PPO_CLIP_EPS: 0.17}, 0.17),
    ("NaN signal holds", {S.RL_PPO_CLIP_EPS: 0.17, S.RL_KL_EMA: np.nan}, 0.17),
    ("just above upper edge shrinks", {S.RL_PPO_CLIP_EPS: 0.2, S.RL_KL_EMA: T * PPO.KL_BAND * 1.01}, 0.2 / PPO.CLIP_EPS_STEP),
    ("at upper edge holds", {S.RL_PPO_CLIP_EPS: 0.2, S.RL_KL_EMA: T * PPO.KL_BAND * 0.99}, 0.2),
    ("just below lower edge grows", {S.RL_PPO_CLIP_EPS: 0.2, S.RL_KL_EMA: T / PPO.KL_BAND * 0.99}, 0.2 * PPO.CLIP_EPS_STEP),
    ("at lower edge holds", {S.RL_PPO_CLIP_EPS: 0.2, S.RL_KL_EMA: T / PPO.KL_BAND * 1.01}, 0.2),
    ("clamp low", {S.RL_PPO_CLIP_EPS: 0.051, S.RL_KL_EMA: 1.0}, PPO.CLIP_EPS_MIN),
    ("clamp high", {S.RL_PPO_CLIP_EPS: 0.299, S.RL_KL_EMA: 1e-6}, PPO.CLIP_EPS_MAX),
]


@pytest.mark.parametrize("name,seed,want", CLIP_CASES, ids=[c[0] for c in CLIP_CASES])
def test_ppo_clip(name, seed, want):
    assert run_scalar(PPO.rl_ppo_clip_controller, seed)[S.RL_PPO_CLIP_EPS] == pytest.approx(want, rel=1e-6)


# ------------------------------------------------------------- ratio clamp
RC_CASES = [
    ("cold start", {}, PPO.RATIO_CLAMP_BOOTSTRAP),
    ("dead signal holds", {S.RL_PPO_RATIO_CLAMP: 4.0}, 4.0),
    ("moves toward 2x tail", {S.RL_PPO_RATIO_CLAMP: 4.0, S.RL_RATIO_TAIL_EMA: 1.5}, 4.0 + 0.1 * (3.0 - 4.0)),
    ("clamp low", {S.RL_PPO_RATIO_CLAMP: 1.5, S.RL_RATIO_TAIL_EMA: 0.1}, PPO.RATIO_CLAMP_MIN),
    ("clamp high", {S.RL_PPO_RATIO_CLAMP: 10.0, S.RL_RATIO_TAIL_EMA: 100.0}, PPO.RATIO_CLAMP_MAX),
]


@pytest.mark.parametrize("name,seed,want", RC_CASES, ids=[c[0] for c in RC_CASES])
def test_ratio_clamp(name, seed, want):
    assert run_scalar(PPO.rl_ratio_clamp_controller, seed)[S.RL_PPO_RATIO_CLAMP] == pytest.approx(want, rel=1e-6)


# ------------------------------------------------------------- entropy coef
H = PPO.ENTROPY_TARGET
EC_CASES = [
    ("cold start", {}, PPO.ENTROPY_COEF_BOOTSTRAP),
    ("dead signal holds", {S.RL_ENTROPY_COEF: 0.02}, 0.02),
    ("low entropy raises", {S.RL_ENTROPY_COEF: 0.02, S.RL_ENTROPY_EMA: 0.5 * H}, 0.02 * math.exp(PPO.ENTROPY_GAIN * 0.5)),
    ("high entropy lowers", {S.RL_ENTROPY_COEF: 0.02, S.RL_ENTROPY_EMA: 1.5 * H}, 0.02 * math.exp(-PPO.ENTROPY_GAIN * 0.5)),
    ("on target holds", {S.RL_ENTROPY_COEF: 0.02, S.RL_ENTROPY_EMA: H}, 0.02),
    ("clamp high", {S.RL_ENTROPY_COEF: 0.0999, S.RL_ENTROPY_EMA: 1e-3}, PPO.ENTROPY_COEF_MAX),
    ("clamp low", {S.RL_ENTROPY_COEF: 1.0001e-4, S.RL_ENTROPY_EMA: 2.0}, PPO.ENTROPY_COEF_MIN),
]


@pytest.mark.parametrize("name,seed,want", EC_CASES, ids=[c[0] for c in EC_CASES])
def test_entropy_coef(name, seed, want):
    assert run_scalar(PPO.rl_entropy_coef_controller, seed)[S.RL_ENTROPY_COEF] == pytest.approx(want, rel=1e-5)


# ----------------------------------------------------------------- target tau
TAU_CASES = [
    ("cold start", {}, TAU.TAU_BOOTSTRAP),
    ("dead signal holds", {S.RL_TARGET_TAU: 0.003}, 0.003),
    ("gaussian tails aim at TAU_GAUSSIAN", {S.RL_TARGET_TAU: 0.005, S.RL_TD_KURTOSIS_EMA: 3.0}, 0.005 + 0.1 * (0.01 - 0.005)),
    ("heavy tails slow it", {S.RL_TARGET_TAU: 0.005, S.RL_TD_KURTOSIS_EMA: 30.0}, 0.005 + 0.1 * (0.001 - 0.005)),
    ("clamp low", {S.RL_TARGET_TAU: 5e-4, S.RL_TD_KURTOSIS_EMA: 1e6}, TAU.TAU_MIN),
    ("clamp high", {S.RL_TARGET_TAU: 0.02, S.RL_TD_KURTOSIS_EMA: 1.0}, TAU.TAU_GAUSSIAN),
]


@pytest.mark.parametrize("name,seed,want", TAU_CASES, ids=[c[0] for c in TAU_CASES])
def test_target_tau(name, seed, want):
    assert run_scalar(TAU.rl_target_tau_controller, seed)[S.RL_TARGET_TAU] == pytest.approx(want, rel=1e-5)


# --------------------------------------------------------------------- PER
E = PER.PER_ESS_TARGET
PER_CASES = [
    ("cold start", {}, (PER.PER_ALPHA_BOOTSTRAP, PER.PER_BETA_BOOTSTRAP, S.GAMMA_BOOTSTRAP)),
    ("dead signal holds", {S.RL_PER_ALPHA: 0.7, S.RL_PER_BETA: 0.5, S.RL_GAMMA: 0.95}, (0.7, 0.5, 0.95)),
    ("skewed lowers alpha, raises beta", {S.RL_PER_ALPHA: 0.7, S.RL_PER_BETA: 0.5, S.RL_GAMMA: 0.99, S.RL_PER_ESS_FRAC: E / PER.PER_ESS_BAND * 0.99},
     (0.69, 0.4 + 0.6 * (1 - E / PER.PER_ESS_BAND * 0.99), 0.99)),
    ("lower edge holds alpha", {S.RL_PER_ALPHA: 0.7, S.RL_PER_BETA: 0.5, S.RL_GAMMA: 0.99, S.RL_PER_ESS_FRAC: E / PER.PER_ESS_BAND * 1.01},
     (0.7, 0.4 + 0.6 * (1 - E / PER.PER_ESS_BAND * 1.01), 0.99)),
    ("uniform raises alpha", {S.RL_PER_ALPHA: 0.7, S.RL_PER_BETA: 0.5, S.RL_GAMMA: 0.99, S.RL_PER_ESS_FRAC: E * PER.PER_ESS_BAND * 1.01},
     (0.71, 0.4 + 0.6 * (1 - E * PER.PER_ESS_BAND * 1.01), 0.99)),
    ("upper edge holds alpha", {S.RL_PER_ALPHA: 0.7, S.RL_PER_BETA: 0.5, S.RL_GAMMA: 0.99, S.RL_PER_ESS_FRAC: E * PER.PER_ESS_BAND * 0.99},
     (0.7, 0.4 + 0.6 * (1 - E * PER.PER_ESS_BAND * 0.99), 0.99)),
    ("clamp alpha low", {S.RL_PER_ALPHA: 0.2, S.RL_PER_BETA: 0.5, S.RL_GAMMA: 0.99, S.RL_PER_ESS_FRAC: 0.01}, (0.2, 0.4 + 0.6 * 0.99, 0.99)),
    ("clamp alpha high", {S.RL_PER_ALPHA: 1.0, S.RL_PER_BETA: 0.5, S.RL_GAMMA: 0.99, S.RL_PER_ESS_FRAC: 1.0}, (1.0, 0.4, 0.99)),
]


@pytest.mark.parametrize("name,seed,want", PER_CASES, ids=[c[0] for c in PER_CASES])
def test_per(name, seed, want):
    out = run_scalar(PER.rl_per_controller, seed)
    got = (out[S.RL_PER_ALPHA], out[S.RL_PER_BETA], out[S.RL_GAMMA])
    np.testing.assert_allclose(got, want, rtol=1e-5)


# ------------------------------------------------------------------ K-loop
K = S.K_FIXED_POINT
KL_CASES = [
    ("cold start", {}, K),
    ("dead signal holds", {S.RL_K_LOOP_MULT: 2 * K, S.RL_ADV_VAR_EMA: 1.0}, 2 * K),
    ("poor baseline adds", {S.RL_K_LOOP_MULT: 2 * K, S.RL_ADV_VAR_EMA: KL.K_RATIO_HI * 1.01, S.RL_RETURN_VAR_EMA: 1.0}, 2 * K + KL.K_STEP),
    ("upper edge holds", {S.RL_K_LOOP_MULT: 2 * K, S.RL_ADV_VAR_EMA: KL.K_RATIO_HI * 0.99, S.RL_RETURN_VAR_EMA: 1.0}, 2 * K),
    ("good baseline removes", {S.RL_K_LOOP_MULT: 2 * K, S.RL_ADV_VAR_EMA: KL.K_RATIO_LO * 0.99, S.RL_RETURN_VAR_EMA: 1.0}, 2 * K - KL.K_STEP),
    ("lower edge holds", {S.RL_K_LOOP_MULT: 2 * K, S.RL_ADV_VAR_EMA: KL.K_RATIO_LO * 1.01, S.RL_RETURN_VAR_EMA: 1.0}, 2 * K),
    ("clamp low", {S.RL_K_LOOP_MULT: K, S.RL_ADV_VAR_EMA: 0.01, S.RL_RETURN_VAR_EMA: 1.0}, K),
    ("clamp high", {S.RL_K_LOOP_MULT: S.K_MAX * K, S.RL_ADV_VAR_EMA: 5.0, S.RL_RETURN_VAR_EMA: 1.0}, S.K_MAX * K),
]


@pytest.mark.parametrize("name,seed,want", KL_CASES, ids=[c[0] for c in KL_CASES])
def test_k_loop(name, seed, want):
    assert run_scalar(KL.rl_k_loop_controller, seed)[S.RL_K_LOOP_MULT] == pytest.approx(want, rel=1e-6)


@pytest.mark.parametrize("mult,k,want", [(K, 0, 1), (K, 1, 0), (2.6 * K, 2, 1), (2.6 * K, 3, 0), (0.2 * K, 0, 1), (99 * K, S.K_MAX - 1, 1), (99 * K, S.K_MAX, 0)])
def test_k_gate(mult, k, want):
    host = seeded_isv({S.RL_K_LOOP_MULT: mult})
    d = cuda.to_device(host)
    gate = cuda.to_device(np.array([-7], np.int32))
    KL.rl_k_gate[1, 1](d, np.int32(k), gate)
    ref = np.array([-7], np.int32)
    R.rl_k_gate(host, k, ref)
    assert gate.copy_to_host()[0] == ref[0] == want



@pytest.mark.parametrize("mult", [0.0, 0.2 * K, K, 1.5 * K, 2.5 * K, 2.6 * K, 3.5 * K, 3.49 * K, 7 * K, 99 * K])
def test_host_decode_k_agrees_with_the_device_gate(mult):
    """isv.decode_k (the host's one decoding of K) counts the iterations rl_k_gate opens, ties included."""
    host = seeded_isv({S.RL_K_LOOP_MULT: mult})
    d = cuda.to_device(host)
    gate = cuda.to_device(np.zeros(1, np.int32))
    opened = 0
    for k in range(S.K_MAX + 1):
        KL.rl_k_gate[1, 1](d, np.int32(k), gate)
        opened += int(gate.copy_to_host()[0])
    assert opened == S.decode_k(host)

# -------------------------------------------------------------- LR (seed)
HEAD_EMA = S.GRAD_NORM_EMA_SLOTS


def _run_lr(seed, sig_slots=HEAD_EMA, ppo_update=True):
    host = seeded_isv(seed, ppo_update)
    d = cuda.to_device(host)
    LR.rl_lr_controller[1, LR.LR_CTRL_BLOCK](d, *[np.int32(s) for s in sig_slots])
    ref = host.copy()
    R.rl_lr_controller(ref, *sig_slots)
    out = d.copy_to_host()
    np.testing.assert_allclose(out, ref, rtol=1e-6)
    return out


def test_lr_cold_start_and_no_signal_slot():
    out = _run_lr({}, sig_slots=(S.RL_Q_GRAD_NORM_EMA, -1, S.RL_V_GRAD_NORM_EMA, -1, -1, S.RL_ENC_GRAD_NORM_EMA))
    assert all(out[s] == pytest.approx(S.LR_BOOTSTRAP) for s in S.LR_SLOTS)
    # slot -1 forces the bootstrap even when the head had moved
    seed = {s: 3e-4 for s in S.LR_SLOTS} | {e: 2.0 for e in HEAD_EMA} | {e + S.GRAD_NORM_OBS_OFFSET: 2.0 for e in HEAD_EMA}
    out = _run_lr(seed, sig_slots=(S.RL_Q_GRAD_NORM_EMA, -1, -1, -1, -1, -1))
    assert out[S.RL_LR_Q] == pytest.approx(3e-4 / 2.0)
    assert all(out[s] == pytest.approx(S.LR_BOOTSTRAP) for s in S.LR_SLOTS[1:])


def test_lr_dead_signal_holds():
    out = _run_lr({s: 3e-4 for s in S.LR_SLOTS} | {S.RL_PI_GRAD_NORM_EMA: np.nan})
    assert all(out[s] == pytest.approx(3e-4) for s in S.LR_SLOTS)


def test_lr_first_observation_replaces_directly():
    # first observation: the EMA equals the raw value -> Wiener weight 1
    seed = {s: 1e-3 for s in S.LR_SLOTS} | {e: 4.0 for e in HEAD_EMA} | {e + S.GRAD_NORM_OBS_OFFSET: 4.0 for e in HEAD_EMA}
    out = _run_lr(seed)
    assert all(out[s] == pytest.approx(1e-3 / 4.0) for s in S.LR_SLOTS)


def test_lr_wiener_blend_and_floor():
    # raw deviates from EMA by d: w = max(0.4, e^2 / (e^2 + d^2))
    e, raw_small, raw_big = 2.0, 3.0, 50.0
    lr0 = 1e-3
    seed = {s: lr0 for s in S.LR_SLOTS} | {e_: e for e_ in HEAD_EMA}
    seed[S.RL_Q_GRAD_NORM_EMA + S.GRAD_NORM_OBS_OFFSET] = raw_small
    seed[S.RL_PI_GRAD_NORM_EMA + S.GRAD_NORM_OBS_OFFSET] = raw_big
    out = _run_lr(seed)
    target = lr0 / e
    w = e * e / (e * e + (raw_small - e) ** 2)
    assert out[S.RL_LR_Q] == pytest.approx(w * target + (1 - w) * lr0, rel=1e-5)
    assert out[S.RL_LR_PI] == pytest.approx(LR.LR_WIENER_FLOOR * target + (1 - LR.LR_WIENER_FLOOR) * lr0, rel=1e-5)


def test_lr_clamps():
    seed = {S.RL_LR_Q: 2e-5, S.RL_LR_PI: 8e-3} | {S.RL_Q_GRAD_NORM_EMA: 1e4, S.RL_PI_GRAD_NORM_EMA: 1e-4}
    seed |= {S.RL_Q_GRAD_NORM_EMA + S.GRAD_NORM_OBS_OFFSET: 1e4, S.RL_PI_GRAD_NORM_EMA + S.GRAD_NORM_OBS_OFFSET: 1e-4}
    out = _run_lr(seed)
    assert out[S.RL_LR_Q] == pytest.approx(S.LR_MIN)
    assert out[S.RL_LR_PI] == pytest.approx(S.LR_MAX)


def test_lr_random_signals_match_reference(rng):
    seed = {s: rng.uniform(2e-5, 5e-3) for s in S.LR_SLOTS}
    seed |= {e: rng.uniform(0.1, 10) for e in HEAD_EMA} | {e + S.GRAD_NORM_OBS_OFFSET: rng.uniform(0.1, 10) for e in HEAD_EMA}
    _run_lr(seed)


# --------------------------------------------------------- V blend (seed)
VT = VB.V_TRACK_TARGET


def _run_vblend_ctrl(seed, vs=None, vd=None):
    host = seeded_isv(seed)
    d = cuda.to_device(host)
    n = 0 if vs is None else len(vs)
    vs = np.ones(1, np.float32) if vs is None else vs
    vd = np.ones(1, np.float32) if vd is None else vd
    gate = cuda.to_device(np.ones(1, np.int32))
    VB.rl_v_blend_alpha_controller[1, VB.V_BLEND_CTRL_BLOCK](cuda.to_device(vs), cuda.to_device(vd), np.int32(n), d, gate)
    ref = host.copy()
    R.rl_v_blend_alpha_controller(vs, vd, n, ref)
    out = d.copy_to_host()
    np.testing.assert_allclose(out, ref, rtol=1e-5)
    return out


def _track(ratio, mag=1.0):
    return {S.RL_V_TRACK_ERR_EMA: ratio * mag, S.RL_V_SCALAR_MAG_EMA: mag}


VB_CASES = [
    ("cold start bootstraps alpha to 1", {}, 1.0),
    ("just above 1.5 x TARGET raises", {S.RL_V_BLEND_ALPHA: 0.5} | _track(VT * 1.5 * 1.01), 0.51),
    ("just inside upper edge holds", {S.RL_V_BLEND_ALPHA: 0.5} | _track(VT * 1.5 * 0.99), 0.5),
    ("just below TARGET / 1.5 lowers", {S.RL_V_BLEND_ALPHA: 0.5} | _track(VT / 1.5 * 0.99), 0.49),
    ("just inside lower edge holds", {S.RL_V_BLEND_ALPHA: 0.5} | _track(VT / 1.5 * 1.01), 0.5),
    ("dead signal holds", {S.RL_V_BLEND_ALPHA: 0.5} | _track(10.0, mag=0.9e-4), 0.5),
    ("clamp at 1", {S.RL_V_BLEND_ALPHA: 1.0} | _track(10.0), 1.0),
    ("clamp at 0", {S.RL_V_BLEND_ALPHA: 0.005} | _track(0.0001), 0.0),
    ("alpha 0 reached by stepping is kept", {S.RL_V_BLEND_ALPHA: 0.0} | _track(0.0001), 0.0),
]


@pytest.mark.parametrize("name,seed,want", VB_CASES, ids=[c[0] for c in VB_CASES])
def test_v_blend_alpha_controller(name, seed, want):
    out = _run_vblend_ctrl(seed)
    assert out[S.RL_V_BLEND_ALPHA] == pytest.approx(want, abs=1e-6)


def test_v_blend_alpha_controller_reduces_random_batch(rng):
    """EMAs take the first observation as is, then blend; alpha follows the rule on them."""
    n = 1500
    vs = rng.uniform(-2, 2, n).astype(np.float32)
    vd = (vs + rng.normal(0, 0.1, n)).astype(np.float32)
    seed = {S.RL_V_BLEND_ALPHA: 0.3, S.RL_V_SCALAR_MAG_EMA: 0.8}  # err EMA unobserved
    out = _run_vblend_ctrl(seed, vs, vd)
    err, mag = np.abs(vd - vs).mean(), np.abs(vs).mean()
    assert out[S.RL_V_TRACK_ERR_EMA] == pytest.approx(err, rel=1e-4)
    assert out[S.RL_V_SCALAR_MAG_EMA] == pytest.approx(VB.V_EMA_BETA * 0.8 + (1 - VB.V_EMA_BETA) * mag, rel=1e-4)


def test_v_blend_alpha_controller_refuses_nan_batch(rng):
    vs = rng.uniform(-2, 2, 40).astype(np.float32)
    vd = vs.copy()
    vd[7] = np.nan
    out = _run_vblend_ctrl({S.RL_V_BLEND_ALPHA: 0.5} | _track(0.2), vs, vd)
    assert out[S.RL_V_BLEND_ALPHA] == pytest.approx(0.5)
    assert out[S.RL_V_TRACK_ERR_EMA] == pytest.approx(0.2)
    assert out[S.RL_NAN_SIGNALS] == 1


def test_v_blend_alpha_controller_gate_zero_writes_nothing(rng):
    host = seeded_isv({S.RL_V_BLEND_ALPHA: 0.5} | _track(10.0))
    d = cuda.to_device(host)
    vs = cuda.to_device(rng.uniform(-1, 1, 8).astype(np.float32))
    VB.rl_v_blend_alpha_controller[1, VB.V_BLEND_CTRL_BLOCK](vs, vs, np.int32(8), d, cuda.to_device(np.zeros(1, np.int32)))
    np.testing.assert_array_equal(d.copy_to_host(), host)


def test_a_collect_step_holds_what_reads_the_ppo_update():
    """--rollout T > 1: on a step without the PPO/V update (RL_OBS_PPO_SAMPLES = 0) the clip, ratio bound,
    entropy coefficient, K, K's floor and the pi / V learning rates hold (their signals are that update's),
    while the Q-side rules step and every sentinel still bootstraps; with the update they all move."""
    moved = {S.RL_PPO_CLIP_EPS: 0.2, S.RL_KL_EMA: 0.5, S.RL_PPO_RATIO_CLAMP: 3.0, S.RL_RATIO_TAIL_EMA: 4.0,
             S.RL_ENTROPY_COEF: 0.01, S.RL_ENTROPY_EMA: 0.1, S.RL_K_LOOP_MULT: 2 * K, S.RL_ADV_VAR_EMA: 0.9,
             S.RL_RETURN_VAR_EMA: 1.0, S.RL_TARGET_TAU: 0.05, S.RL_TD_KURTOSIS_EMA: 9.0}
    writes = ((PPO.rl_ppo_clip_controller, S.RL_PPO_CLIP_EPS), (PPO.rl_ratio_clamp_controller, S.RL_PPO_RATIO_CLAMP),
              (PPO.rl_entropy_coef_controller, S.RL_ENTROPY_COEF), (KL.rl_k_loop_controller, S.RL_K_LOOP_MULT))
    for update in (False, True):
        for ctrl, slot in writes:
            out = run_scalar(ctrl, moved, ppo_update=update)
            assert (out[slot] != f32(moved[slot])) == update, (ctrl.name, update)
        # tau reads the Q side's TD kurtosis: it steps either way
        assert run_scalar(TAU.rl_target_tau_controller, moved, ppo_update=update)[S.RL_TARGET_TAU] != f32(0.05)
        # sentinels bootstrap on a collect step too
        out = run_scalar(PPO.rl_ppo_clip_controller, {}, ppo_update=update)
        assert out[S.RL_PPO_CLIP_EPS] == f32(PPO.CLIP_EPS_BOOTSTRAP)
        seed = {s: 1e-3 for s in S.LR_SLOTS} | {e: 4.0 for e in HEAD_EMA} | {e + S.GRAD_NORM_OBS_OFFSET: 4.0 for e in HEAD_EMA}
        out = _run_lr(seed, ppo_update=update)
        for slot in S.LR_SLOTS:
            held = slot in LR.PPO_LR_SLOTS and not update
            assert out[slot] == pytest.approx(1e-3 if held else 1e-3 / 4.0), (slot, update)
        out = _run_lr({}, ppo_update=update)
        assert all(out[s] == pytest.approx(S.LR_BOOTSTRAP) for s in S.LR_SLOTS)
