"""rl_step_controllers: the one launch of a step's signal EMAs, controllers and step counter
equals the separate kernels in sequence (bit for bit) and the NumPy references."""
import numpy as np
import pytest
from numba import cuda

from alpharl import isv as S
from alpharl.controllers import SIGNAL_TABLE, Controllers, reference_controllers, reference_signal_emas
from alpharl.cuda_kernels.controllers import ppo as PPO
from controllers.controller_units import launch_controllers, launch_signal_emas


def _preseeded_isv(rng):
    """Every signal's raw observation and EMA seeded (some EMAs unobserved), controller outputs
    away from their bootstrap values, so every stage of the step moves something."""
    v = S.bootstrap_vector()
    for src, dst, _, _ in SIGNAL_TABLE:
        v[src] = rng.uniform(0.05, 3.0)
        v[dst] = rng.uniform(0.05, 3.0) if rng.random() < 0.8 else 0.0
    v[S.RL_OBS_TRADES] = 1.0
    v[S.RL_OBS_PPO_SAMPLES] = 16.0  # a step that updates PPO and V: its gated signals fold
    for slot in S.LR_SLOTS:
        v[slot] *= rng.uniform(0.3, 0.9)
    # the anchors' inputs: relative updates, K > 1
    for ema in S.GRAD_NORM_EMA_SLOTS:
        v[ema + S.GRAD_NORM_OBS_OFFSET + S.REL_UPDATE_OBS_OFFSET] = rng.uniform(1e-4, 1e-2)
    v[S.RL_K_LOOP_MULT] = 2 * S.K_FIXED_POINT
    return v


@pytest.mark.parametrize("anchors, pace, k_noise", [(False, False, False), (True, False, False), (True, True, False),
                                                    (True, False, True)],
                         ids=["fixed", "anchors", "paced", "k_noise"])
def test_fused_step_equals_the_separate_kernels_and_the_references(rng, anchors, pace, k_noise):
    for _ in range(3):
        host = _preseeded_isv(rng)
        # the K band's scatter: a mean near the ratio and a variance that moves the upper threshold
        host[S.RL_K_RATIO_MEAN], host[S.RL_K_RATIO_VAR] = rng.uniform(0.3, 0.9), rng.uniform(1e-4, 0.05)
        ctl = Controllers(anchors=anchors, pace=pace, k_noise=k_noise)
        seq = cuda.to_device(host)
        launch_signal_emas(ctl, seq)
        launch_controllers(ctl, seq)
        fused = cuda.to_device(host)
        counter = cuda.to_device(np.array([41], np.int64))
        ctl.launch_step(fused, counter)
        got = fused.copy_to_host()
        assert np.array_equal(got, seq.copy_to_host())
        assert counter.copy_to_host()[0] == 42
        assert not np.array_equal(got, host)
        ref = host.copy()
        reference_signal_emas(ref)
        reference_controllers(ref, anchors=anchors, pace=pace, k_noise=k_noise)
        np.testing.assert_allclose(got, ref, rtol=1e-5, atol=1e-7)
        paced = [S.RL_PI_REL_TARGET, S.RL_CLIP_EPS_ANCHOR]
        assert (got[paced] != 0).all() if pace else (got[paced] == 0).all()
        if pace:
            assert got[S.RL_PPO_CLIP_EPS] == min(got[S.RL_CLIP_EPS_ANCHOR], np.float32(PPO.CLIP_EPS_MAX))
        anchor_slots = [S.RL_KL_TARGET, S.RL_ENTROPY_TARGET, S.RL_K_RATIO_FLOOR] + [
            e + S.GN_TARGET_OFFSET for e in S.GRAD_NORM_EMA_SLOTS]
        assert (got[anchor_slots] != 0).all() if anchors else (got[anchor_slots] == 0).all()
        moments = [S.RL_K_RATIO_MEAN, S.RL_K_RATIO_VAR]
        assert (got[moments] != host[moments]).all() if k_noise else (got[moments] == host[moments]).all()
