"""--adaptive-anchors: rl_anchor_controller and the controllers that read its anchors, from pre-seeded
ISV inputs: kernel and NumPy reference against the rule its docstring states; the anchors off (slots 0)
leave every controller on its fixed constant; the LR law's fixed point is the relative-update target."""
import math

import numpy as np
import pytest
from numba import cuda

from alpharl import isv as S
from alpharl.cuda_kernels.controllers import anchors as AN
from alpharl.cuda_kernels.controllers import k_loop as KL
from alpharl.cuda_kernels.controllers import lr as LR
from alpharl.cuda_kernels.controllers import ppo as PPO
from alpharl.cuda_kernels.controllers import target_tau as TAU
from alpharl.reference import controllers as R
from controllers.controller_units import run_scalar, seeded_isv

K = S.K_FIXED_POINT
HEADS = S.GRAD_NORM_EMA_SLOTS


def _rel(ema):
    return ema + S.GRAD_NORM_OBS_OFFSET + S.REL_UPDATE_OBS_OFFSET


def _run_anchors(seed, flags=AN.FLAG_ANCHORS, ppo_update=True):
    host = seeded_isv(seed, ppo_update)
    d = cuda.to_device(host)
    AN.rl_anchor_controller[1, 1](d, np.int32(flags))
    ref = host.copy()
    R.rl_anchor_controller(ref, flags)
    out = d.copy_to_host()
    np.testing.assert_allclose(out, ref, rtol=1e-6, atol=0)
    return out


def _seeded(rng):
    """Every anchor input observed: grad-norm EMAs and relative updates, entropy, KL, tau, K = 2,
    the reward statistics and the return variance."""
    seed = {e: rng.uniform(0.05, 2.0) for e in HEADS} | {_rel(e): rng.uniform(1e-4, 1e-2) for e in HEADS}
    seed |= {S.RL_ENTROPY_EMA: rng.uniform(0.1, 2.0), S.RL_KL_EMA: rng.uniform(1e-4, 0.05),
             S.RL_TARGET_TAU: rng.uniform(5e-4, 0.01), S.RL_K_LOOP_MULT: 2 * K, S.RL_REWARD_GAIN: 1.0,
             S.RL_ADV_VAR_EMA: rng.uniform(0.1, 0.9), S.RL_RETURN_VAR_EMA: 1.0}
    return seed


def test_anchor_rules(rng):
    seed = _seeded(rng)
    out = _run_anchors(seed)
    for e in HEADS:
        assert out[e + S.GN_TARGET_OFFSET] == pytest.approx(seed[e] * AN.REL_UPDATE_TARGET / seed[_rel(e)], rel=1e-5)
    assert out[S.RL_KL_TARGET] == pytest.approx(AN.KL_PER_NAT * seed[S.RL_ENTROPY_EMA], rel=1e-5)
    assert AN.KL_PER_NAT * PPO.ENTROPY_TARGET == pytest.approx(PPO.KL_TARGET)
    assert out[S.RL_ENTROPY_TARGET] == pytest.approx(AN.entropy_with_floor(seed[S.RL_TARGET_TAU]), rel=1e-4)
    assert out[S.RL_K_RATIO_FLOOR] == pytest.approx(seed[S.RL_ADV_VAR_EMA], rel=1e-6)  # first ratio as is


def test_entropy_target_from_tau():
    """tau = 0.005: each of 8 non-greedy actions at p = 0.005 -> 0.251 nats; more tau, more entropy."""
    assert AN.entropy_with_floor(0.005) == pytest.approx(0.2511, abs=1e-4)
    out = [_run_anchors({S.RL_TARGET_TAU: t})[S.RL_ENTROPY_TARGET] for t in (TAU.TAU_MIN, 0.005, TAU.TAU_GAUSSIAN)]
    assert out[0] < out[1] < out[2] < PPO.ENTROPY_TARGET
    # tau still at sentinel: its bootstrap
    assert _run_anchors({})[S.RL_ENTROPY_TARGET] == pytest.approx(AN.entropy_with_floor(TAU.TAU_BOOTSTRAP), rel=1e-4)


def _informed(seed, flags):
    host = seeded_isv(seed)
    d = cuda.to_device(host)
    AN.rl_ppo_informed[1, 1](d, np.int32(flags))
    ref = host.copy()
    R.rl_ppo_informed(ref, flags)
    out = d.copy_to_host()
    np.testing.assert_array_equal(out, ref)
    return out


@pytest.mark.parametrize("k", [1, 2, 4])
@pytest.mark.parametrize("flags", [0, AN.FLAG_ANCHORS])
@pytest.mark.parametrize("samples", [0.0, 48.0])
def test_ppo_informed_counts_the_samples_whose_ratio_can_move(k, flags, samples):
    """K = 1 with the anchors: the batch is used once, every ratio 1 -> 0; otherwise the PPO samples."""
    out = _informed({S.RL_K_LOOP_MULT: k * K, S.RL_OBS_PPO_SAMPLES: samples, S.RL_OBS_PPO_INFORMED: 7.0}, flags)
    want = 0.0 if (flags and k == 1) else samples
    assert out[S.RL_OBS_PPO_INFORMED] == want
    assert out[S.RL_OBS_PPO_SAMPLES] == samples


def test_k_one_steps_neither_fold_the_kl_nor_step_the_clip(rng):
    """With the anchors a K = 1 step keeps the KL and ratio-tail EMAs (its KL of 0 and ratio of 1 say nothing
    about the clip) and the clip and ratio bound; the entropy still folds and KL* follows it. Without the
    anchors the same step folds and steps as before."""
    from alpharl.controllers import Controllers
    from controllers.controller_units import launch_signal_emas
    seed = _seeded(rng) | {S.RL_K_LOOP_MULT: K, S.RL_OBS_KL: 0.0, S.RL_KL_EMA: 0.004, S.RL_OBS_RATIO_MAX: 1.0,
                           S.RL_OBS_ENTROPY: 0.7, S.RL_PPO_CLIP_EPS: 0.17, S.RL_PPO_RATIO_CLAMP: 4.0,
                           S.RL_RATIO_TAIL_EMA: 1.4}
    for anchors in (True, False):
        host = seeded_isv(seed)
        d = cuda.to_device(host)
        launch_signal_emas(Controllers(anchors=anchors), d)
        got = d.copy_to_host()
        assert got[S.RL_ENTROPY_EMA] != host[S.RL_ENTROPY_EMA]
        held = got[[S.RL_KL_EMA, S.RL_RATIO_TAIL_EMA]] == host[[S.RL_KL_EMA, S.RL_RATIO_TAIL_EMA]]
        assert held.all() if anchors else not held.any()
        out = _run_anchors(dict(enumerate(got)), flags=AN.FLAG_ANCHORS if anchors else 0)
        if anchors:
            assert out[S.RL_KL_TARGET] == pytest.approx(AN.KL_PER_NAT * got[S.RL_ENTROPY_EMA], rel=1e-5)
        clip = run_scalar(PPO.rl_ppo_clip_controller, dict(enumerate(out)))
        bound = run_scalar(PPO.rl_ratio_clamp_controller, dict(enumerate(out)))
        assert (clip[S.RL_PPO_CLIP_EPS] == np.float32(0.17)) == anchors
        assert (bound[S.RL_PPO_RATIO_CLAMP] == np.float32(4.0)) == anchors


def test_unobserved_inputs_hold_their_anchor(rng):
    """Relative update, entropy or advantage variance still unobserved: the anchor slot keeps its value
    (here a previous one)."""
    seed = {e + S.GN_TARGET_OFFSET: 0.3 for e in HEADS} | {S.RL_KL_TARGET: 0.02, S.RL_K_RATIO_FLOOR: 0.4,
                                                          S.RL_K_LOOP_MULT: 3 * K}
    seed |= {e: 0.5 for e in HEADS}  # EMAs observed, relative updates not
    seed[S.RL_RETURN_VAR_EMA] = 2.0  # no advantage variance yet
    out = _run_anchors(seed)
    assert all(out[e + S.GN_TARGET_OFFSET] == pytest.approx(0.3) for e in HEADS)
    assert out[S.RL_KL_TARGET] == pytest.approx(0.02)
    assert out[S.RL_K_RATIO_FLOOR] == pytest.approx(0.4)


@pytest.mark.parametrize("f,ratio,want", [(0.3, 0.2, 0.2),                                  # a better fit: taken
                                          (0.3, 0.8, 0.3 + AN.K_FLOOR_LEAK * 0.5),       # worse: forgets slowly
                                          (0.3, 5.0, 0.3 + AN.K_FLOOR_LEAK * 0.7),       # ratio capped at 1
                                          (0.0, 5.0, 1.0)])                              # first, capped
def test_k_floor_is_a_forgetting_minimum(rng, f, ratio, want):
    seed = _seeded(rng) | {S.RL_K_RATIO_FLOOR: f, S.RL_ADV_VAR_EMA: ratio, S.RL_RETURN_VAR_EMA: 1.0}
    assert _run_anchors(seed)[S.RL_K_RATIO_FLOOR] == pytest.approx(want, rel=1e-6)
    # a collect step of --rollout T > 1 (no PPO/V update): the floor forgets once per update, not per step
    assert _run_anchors(seed, ppo_update=False)[S.RL_K_RATIO_FLOOR] == np.float32(f)


def test_anchors_off_write_only_the_bootstraps(rng):
    seed = _seeded(rng)
    seed.pop(S.RL_REWARD_GAIN)
    out = _run_anchors(seed, flags=0)
    want = seeded_isv(seed)
    want[S.RL_REWARD_GAIN] = 1.0
    want[S.RL_SUPPORT_V_MIN], want[S.RL_SUPPORT_V_MAX] = S.V_MIN_BOOTSTRAP, S.V_MAX_BOOTSTRAP
    np.testing.assert_array_equal(out, want)


# ------------------------------------------------------ controllers reading their anchors
def test_lr_law_aims_at_the_gn_target_slot(rng):
    """The seed's law with T from the head's gn_target slot: lr' = w lr T / G + (1 - w) lr (w = 1 on a first
    observation); slot 0: T = TARGET_GRAD_NORM, as before."""
    lr0, g = 1e-3, 0.2
    seed = {s: lr0 for s in S.LR_SLOTS} | {e: g for e in HEADS} | {e + S.GRAD_NORM_OBS_OFFSET: g for e in HEADS}
    targets = {e + S.GN_TARGET_OFFSET: t for e, t in zip(HEADS, (0.05, 0.1, 0.2, 0.0, 0.3, 0.01))}
    host = seeded_isv(seed | targets)
    d = cuda.to_device(host)
    LR.rl_lr_controller[1, LR.LR_CTRL_BLOCK](d, *[np.int32(e) for e in HEADS])
    ref = host.copy()
    R.rl_lr_controller(ref, *HEADS)
    out = d.copy_to_host()
    np.testing.assert_allclose(out, ref, rtol=1e-6)
    for e, slot in zip(HEADS, S.LR_SLOTS):
        t = targets[e + S.GN_TARGET_OFFSET] or LR.TARGET_GRAD_NORM
        assert out[slot] == pytest.approx(min(max(lr0 * t / g, S.LR_MIN), S.LR_MAX), rel=1e-5)


def test_lr_law_with_the_anchor_reaches_the_relative_update_target():
    """Closed loop of anchor + law on a head whose relative update is proportional to lr (Adam: rho = lr c):
    lr converges to rho* / c (inside the clamps) from above and below, whatever the grad norm."""
    for c, lr0, g in ((3.0, 3e-3, 0.15), (3.0, 2e-5, 1.7), (0.8, 1e-3, 0.01)):
        isv = S.bootstrap_vector()
        isv[S.RL_LR_Q] = lr0
        for _ in range(40):
            isv[S.RL_Q_GRAD_NORM_EMA] = g
            isv[S.RL_OBS_Q_GRAD_NORM] = g * 1.3  # a noisy observation: Wiener weight < 1
            isv[S.RL_OBS_Q_REL_UPDATE] = isv[S.RL_LR_Q] * c
            R.rl_anchor_controller(isv, AN.FLAG_ANCHORS)
            R.rl_lr_controller(isv, *HEADS)
        assert isv[S.RL_LR_Q] == pytest.approx(AN.REL_UPDATE_TARGET / c, rel=1e-3)
        assert S.LR_MIN < isv[S.RL_LR_Q] < S.LR_MAX


@pytest.mark.parametrize("t,kl,want", [(0.004, 0.004 * 1.5 * 1.01, 0.2 / PPO.CLIP_EPS_STEP),
                                       (0.004, 0.004 * 1.5 * 0.99, 0.2),
                                       (0.004, 0.004 / 1.5 * 0.99, 0.2 * PPO.CLIP_EPS_STEP),
                                       (0.0, 0.004 / 1.5 * 0.99, 0.2 * PPO.CLIP_EPS_STEP),   # 0: KL_TARGET 0.01
                                       (0.0, 0.011, 0.2)])
def test_clip_reads_the_kl_target(t, kl, want):
    out = run_scalar(PPO.rl_ppo_clip_controller, {S.RL_PPO_CLIP_EPS: 0.2, S.RL_KL_EMA: kl, S.RL_KL_TARGET: t})
    assert out[S.RL_PPO_CLIP_EPS] == pytest.approx(want, rel=1e-6)


@pytest.mark.parametrize("t", [0.0, 0.25])
def test_entropy_coef_reads_the_entropy_target(t):
    h = 0.5
    out = run_scalar(PPO.rl_entropy_coef_controller, {S.RL_ENTROPY_COEF: 0.02, S.RL_ENTROPY_EMA: h,
                                                       S.RL_ENTROPY_TARGET: t})
    target = t or PPO.ENTROPY_TARGET
    assert out[S.RL_ENTROPY_COEF] == pytest.approx(0.02 * math.exp(PPO.ENTROPY_GAIN * (target - h) / target), rel=1e-5)


@pytest.mark.parametrize("f,ratio,step", [(0.0, KL.K_RATIO_HI * 1.01, 1), (0.0, KL.K_RATIO_LO * 0.99, -1),
                                          (0.6, 0.6 + 0.5 * 0.4 * 1.01, 1), (0.6, 0.6 + 0.5 * 0.4 * 0.99, 0),
                                          (0.6, 0.6 + 0.1 * 0.4 * 0.99, -1), (0.6, 0.6 + 0.1 * 0.4 * 1.01, 0),
                                          (0.6, 0.55, -1), (0.0, 1.5, 1), (0.6, 1.2, 1),
                                          (1.0, 1.04, 0), (1.0, 0.99, -1), (0.998, 1.03, 1)])
def test_k_thresholds_sit_above_the_floor(f, ratio, step):
    """The ratio, capped at 1 as the floor is, against f + 0.5 (1 - f) and f + 0.1 (1 - f): above 1 it
    asks for more iterations while the floor is below 1, and holds where the floor is 1 (the band
    closed: the baseline has explained nothing lately)."""
    out = run_scalar(KL.rl_k_loop_controller, {S.RL_K_LOOP_MULT: 2 * K, S.RL_ADV_VAR_EMA: ratio,
                                                S.RL_RETURN_VAR_EMA: 1.0, S.RL_K_RATIO_FLOOR: f})
    assert out[S.RL_K_LOOP_MULT] == pytest.approx(2 * K + step * KL.K_STEP, rel=1e-6)


# ------------------------------------------------------ --k-noise-band: the ratio's scatter and K's band
NOISE = AN.FLAG_ANCHORS | AN.FLAG_K_NOISE


@pytest.mark.parametrize("ratio", [0.93, 0.99, 5.0])
def test_k_noise_band_measures_the_ratios_mean_and_variance(rng, ratio):
    """m <- m + a d, s^2 <- (1 - a)(s^2 + a d^2), d = min(ratio, 1) - m, a = K_FLOOR_LEAK; the first ratio
    sets m; without the flag, or on a step without a PPO/V update, both hold."""
    m, v = rng.uniform(0.85, 0.97), rng.uniform(1e-5, 1e-3)
    seed = _seeded(rng) | {S.RL_ADV_VAR_EMA: ratio, S.RL_RETURN_VAR_EMA: 1.0, S.RL_K_RATIO_MEAN: m,
                           S.RL_K_RATIO_VAR: v, S.RL_K_RATIO_FLOOR: 0.8}
    out = _run_anchors(seed, NOISE)
    a, d = AN.K_FLOOR_LEAK, min(ratio, 1.0) - m
    assert out[S.RL_K_RATIO_MEAN] == pytest.approx(m + a * d, rel=1e-6)
    assert out[S.RL_K_RATIO_VAR] == pytest.approx((1 - a) * (v + a * d * d), rel=1e-5)
    assert out[S.RL_K_RATIO_FLOOR] == pytest.approx(0.8 + a * (min(ratio, 1.0) - 0.8), rel=1e-6)  # as without
    first = _run_anchors(seed | {S.RL_K_RATIO_MEAN: 0.0, S.RL_K_RATIO_VAR: 0.0}, NOISE)
    assert first[S.RL_K_RATIO_MEAN] == np.float32(min(ratio, 1.0)) and first[S.RL_K_RATIO_VAR] == 0.0
    for out in (_run_anchors(seed), _run_anchors(seed, NOISE, ppo_update=False)):
        assert out[S.RL_K_RATIO_MEAN] == np.float32(m) and out[S.RL_K_RATIO_VAR] == np.float32(v)


@pytest.mark.parametrize("ratio,mean,var,step", [
    (0.97, 0.95, 0.0, 1),            # no scatter measured: the band's upper edge f + 0.5 (1 - f) = 0.95
    (0.97, 0.95, 0.02 ** 2, 0),      # m + 2 s = 0.99 > 0.97: within the ratio's scatter, holds
    (0.995, 0.95, 0.02 ** 2, 1),     # beyond it: steps up
    (0.955, 0.95, 0.005 ** 2, 0),    # m + 2 s = 0.96: the band alone would step up
    (0.945, 0.92, 0.01 ** 2, 0),     # m + 2 s = 0.94 below the band's edge: the band's rule
    (0.96, 0.92, 0.01 ** 2, 1),
    (0.905, 0.95, 0.02 ** 2, -1)])   # the lower edge f + 0.1 (1 - f) as before
def test_k_noise_band_raises_only_the_upper_threshold(ratio, mean, var, step):
    out = run_scalar(KL.rl_k_loop_controller, {S.RL_K_LOOP_MULT: 2 * K, S.RL_ADV_VAR_EMA: ratio,
                                                S.RL_RETURN_VAR_EMA: 1.0, S.RL_K_RATIO_FLOOR: 0.9,
                                                S.RL_K_RATIO_MEAN: mean, S.RL_K_RATIO_VAR: var})
    assert out[S.RL_K_LOOP_MULT] == pytest.approx(2 * K + step * KL.K_STEP, rel=1e-6)


def _k_walk(seed, flags, means, sd):
    """The NumPy references of the anchors and the K controller over one PPO/V update per entry of ``means``,
    whose advantage-variance ratio is an AR(1) series (the variance EMAs' memory of ~100 updates) about that
    mean with standard deviation ``sd``, capped at 1. K after each update."""
    rng = np.random.default_rng(seed)
    isv = seeded_isv({S.RL_K_LOOP_MULT: K, S.RL_RETURN_VAR_EMA: 1.0})
    rho, x, ks = 0.99, 0.0, []
    for mean in means:
        x = rho * x + math.sqrt(1 - rho * rho) * rng.normal()
        isv[S.RL_ADV_VAR_EMA] = np.float32(min(mean + sd * x, 1.0))
        R.rl_anchor_controller(isv, flags)
        R.rl_k_loop_controller(isv)
        ks.append(S.decode_k(isv))
    return np.array(ks)


@pytest.mark.parametrize("mean,sd", [(0.95, 0.02), (0.97, 0.02), (0.9, 0.035)])
def test_k_noise_band_keeps_k_off_k_max_on_a_scattered_ratio(mean, sd):
    """A fit that never changes, its ratio scattered as on B = 16's GOOG L5 (0.93-0.99 with dips to 0.90:
    LEARNING.md). Over 3,000 updates (a 50k-step run at --rollout 16) after 1,000 to warm: the band alone has
    K at K_MAX in about half of them (the floor at the dips, the ratio above f + 0.5 (1 - f) most of the
    time); with the scatter measured K stays low and still moves."""
    means = np.full(4000, mean)
    band = np.concatenate([_k_walk(s, AN.FLAG_ANCHORS, means, sd)[1000:] for s in range(3)])
    noise = np.concatenate([_k_walk(s, NOISE, means, sd)[1000:] for s in range(3)])
    assert np.mean(band == S.K_MAX) > 0.3 and np.mean(noise == S.K_MAX) < 0.2, (band.mean(), noise.mean())
    assert noise.mean() < 2.0


def test_k_noise_band_still_answers_a_fit_that_falls_behind():
    """The ratio at 0.6 for 2,000 updates, then at 0.9 (the baseline lost its fit): K climbs with the band as
    without the scatter rule, since the ratio is far above both the band's edge and its own usual level."""
    means = np.r_[np.full(2000, 0.6), np.full(200, 0.9)]
    for flags in (AN.FLAG_ANCHORS, NOISE):
        ks = _k_walk(0, flags, means, 0.01)
        assert (ks[:2000] == 1).mean() > 0.9 and ks[-1] == S.K_MAX, flags


# ------------------------------------------------------ --pace-policy: the KL paces the policy's step
PACE = AN.FLAG_ANCHORS | AN.FLAG_PACE
PI = HEADS[AN.PI_HEAD]


@pytest.mark.parametrize("kl_over_target", [0.2, 1.0, 3.0])
@pytest.mark.parametrize("drift", [0.0, 4.0])
def test_pace_moves_the_policy_step_by_the_kl_its_steps_add(rng, kl_over_target, drift):
    """rho*_pi <- rho*_pi (KL* / dKL)^PACE_GAIN with dKL = obs_kl - obs_kl_first, what the update's own steps
    added to the drift its first iteration saw (drift in units of KL*: not counted, however large); only the
    pi head's grad-norm target reads it; the clip anchor is CLIP_RMS_MULT sqrt(2 KL*)."""
    seed = _seeded(rng) | {S.RL_PI_REL_TARGET: 2e-3}
    kl_star = AN.KL_PER_NAT * seed[S.RL_ENTROPY_EMA]
    seed[S.RL_OBS_KL_FIRST] = drift * kl_star
    seed[S.RL_OBS_KL] = (drift + kl_over_target) * kl_star
    out = _run_anchors(seed, flags=PACE)
    assert out[S.RL_KL_TARGET] == pytest.approx(kl_star, rel=1e-5)
    assert out[S.RL_PI_REL_TARGET] == pytest.approx(2e-3 * kl_over_target ** -AN.PACE_GAIN, rel=1e-4)
    assert (out[S.RL_PI_REL_TARGET] > 2e-3) == (kl_over_target < 1)
    assert out[S.RL_CLIP_EPS_ANCHOR] == pytest.approx(AN.CLIP_RMS_MULT * math.sqrt(2 * kl_star), rel=1e-5)
    for e in HEADS:
        rho_star = out[S.RL_PI_REL_TARGET] if e == PI else AN.REL_UPDATE_TARGET
        assert out[e + S.GN_TARGET_OFFSET] == pytest.approx(seed[e] * rho_star / seed[_rel(e)], rel=1e-5)
    # without --pace-policy neither slot is written and pi aims at the shared rho*
    plain = _run_anchors(seed, flags=AN.FLAG_ANCHORS)
    assert plain[S.RL_PI_REL_TARGET] == np.float32(2e-3) and plain[S.RL_CLIP_EPS_ANCHOR] == 0
    assert plain[PI + S.GN_TARGET_OFFSET] == pytest.approx(seed[PI] * AN.REL_UPDATE_TARGET / seed[_rel(PI)], rel=1e-5)
    # --pace-policy without the anchors: only the bootstraps (as with the anchors off)
    alone = _run_anchors(seed, flags=AN.FLAG_PACE)
    assert alone[S.RL_PI_REL_TARGET] == np.float32(2e-3) and alone[S.RL_CLIP_EPS_ANCHOR] == 0


def test_pace_bootstraps_holds_and_clamps(rng):
    seed = _seeded(rng) | {S.RL_OBS_KL: 1e-4}
    # sentinel 0 (or not finite): the shared rho*, not stepped on its first step
    assert _run_anchors(seed, flags=PACE)[S.RL_PI_REL_TARGET] == np.float32(AN.REL_UPDATE_TARGET)
    assert _run_anchors(seed | {S.RL_PI_REL_TARGET: np.inf}, flags=PACE)[S.RL_PI_REL_TARGET] \
        == np.float32(AN.REL_UPDATE_TARGET)
    seed[S.RL_PI_REL_TARGET] = 2e-3
    # a collect step (no PPO/V update), a K = 1 step (RL_OBS_PPO_INFORMED = 0; its one iteration is the first:
    # dKL = 0), a KL not measured or not above the first iteration's: held
    assert _run_anchors(seed, flags=PACE, ppo_update=False)[S.RL_PI_REL_TARGET] == np.float32(2e-3)
    assert _run_anchors(seed | {S.RL_OBS_PPO_INFORMED: 0.0}, flags=PACE)[S.RL_PI_REL_TARGET] == np.float32(2e-3)
    for kl, first in ((0.0, 0.0), (np.nan, 0.0), (1e-4, 1e-4), (1e-4, 3e-4)):
        got = _run_anchors(seed | {S.RL_OBS_KL: kl, S.RL_OBS_KL_FIRST: first}, flags=PACE)[S.RL_PI_REL_TARGET]
        assert got == np.float32(2e-3)
    # the range: a tenth to ten times rho*
    assert _run_anchors(seed | {S.RL_PI_REL_TARGET: AN.PI_REL_MAX}, flags=PACE)[S.RL_PI_REL_TARGET] \
        == np.float32(AN.PI_REL_MAX)
    assert _run_anchors(seed | {S.RL_PI_REL_TARGET: AN.PI_REL_MIN, S.RL_OBS_KL: 1.0},
                        flags=PACE)[S.RL_PI_REL_TARGET] == np.float32(AN.PI_REL_MIN)


@pytest.mark.parametrize("eps,anchor,want", [(0.1, 0.25, 0.25), (0.2, 0.5, PPO.CLIP_EPS_MAX),
                                             (0.2, 0.01, PPO.CLIP_EPS_MIN), (0.0, 0.12, 0.12)])
def test_clip_takes_its_anchor_where_positive(eps, anchor, want):
    """A positive clip anchor replaces the KL law (clamped to the clip's range), whatever the KL says."""
    seed = {S.RL_PPO_CLIP_EPS: eps, S.RL_KL_EMA: 0.5, S.RL_KL_TARGET: 0.01, S.RL_CLIP_EPS_ANCHOR: anchor}
    assert run_scalar(PPO.rl_ppo_clip_controller, seed)[S.RL_PPO_CLIP_EPS] == pytest.approx(want, rel=1e-6)
    held = run_scalar(PPO.rl_ppo_clip_controller, seed, ppo_update=False)[S.RL_PPO_CLIP_EPS]
    assert held == pytest.approx(want, rel=1e-6)  # the anchor moves with the entropy EMA, not with the update


@pytest.mark.parametrize("kl_at_rho_star", [0.2, 5.0])
def test_pace_brings_the_kl_to_its_anchor_and_the_clip_off_its_bounds(rng, kl_at_rho_star):
    """Closed loop of the anchors, the clip controller and a policy whose KL per update grows with the square of
    its relative step, with noise, on top of a drift the step does not control: KL = KL* (d + k (rho / rho*)^2
    e^(0.5 z)), k the KL a rho* step gives in units of the anchor KL* (0.2: the studies' situation), d = 2
    the first iteration's drift, the KL EMA at the signal EMAs' rate. The shared rho* without drift leaves
    eps on a bound (k = 0.2: the upper one, as measured; k = 5: the floor); paced, with the drift, rho*_pi
    settles where the median update adds KL* (rho / rho* ~ 1 / sqrt(k)), whatever the drift, and eps is the
    anchor, off both bounds."""
    def run(flags, drift, n=2000):
        isv = S.bootstrap_vector()
        isv[S.RL_OBS_PPO_SAMPLES] = isv[S.RL_OBS_PPO_INFORMED] = 256.0
        isv[S.RL_ENTROPY_EMA] = 1.0
        eps, rho, kls = [], [], []
        for _ in range(n):
            r = isv[S.RL_PI_REL_TARGET] if flags & AN.FLAG_PACE else AN.REL_UPDATE_TARGET
            kl_star = AN.KL_PER_NAT * isv[S.RL_ENTROPY_EMA]
            kl = np.float32(kl_at_rho_star * kl_star * (r / AN.REL_UPDATE_TARGET) ** 2 * np.exp(0.5 * rng.normal()))
            isv[S.RL_OBS_KL_FIRST] = drift * kl_star
            isv[S.RL_OBS_KL] = drift * kl_star + kl
            isv[S.RL_KL_EMA] = kl if isv[S.RL_KL_EMA] == 0 else 0.99 * isv[S.RL_KL_EMA] + 0.01 * kl
            R.rl_anchor_controller(isv, flags)
            R.rl_ppo_clip_controller(isv)
            eps.append(isv[S.RL_PPO_CLIP_EPS])
            rho.append(isv[S.RL_PI_REL_TARGET] if flags & AN.FLAG_PACE else r)
            kls.append(kl / kl_star)
        return np.array(eps[n // 2:]), np.array(rho[n // 2:]), np.array(kls[n // 2:])

    eps, _, _ = run(AN.FLAG_ANCHORS, drift=0.0)
    assert np.all(eps == np.float32(PPO.CLIP_EPS_MAX if kl_at_rho_star < 1 else PPO.CLIP_EPS_MIN))
    eps, rho, kls = run(PACE, drift=2.0)
    assert np.median(kls) == pytest.approx(1.0, rel=0.1)
    assert np.median(rho) / AN.REL_UPDATE_TARGET == pytest.approx(kl_at_rho_star ** -0.5, rel=0.1)
    assert np.all((rho > AN.PI_REL_MIN) & (rho < AN.PI_REL_MAX))
    assert np.all((eps > np.float32(PPO.CLIP_EPS_MIN)) & (eps < np.float32(PPO.CLIP_EPS_MAX)))
