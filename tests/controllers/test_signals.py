"""rl_signal_ema: first-observation bootstrap, blend, gates, NaN refusal — kernel vs reference."""
import numpy as np
import pytest
from numba import cuda

from alpharl import isv as S
from alpharl.controllers import SIGNAL_TABLE, Controllers, reference_signal_emas, signal_table_host
from alpharl.cuda_kernels.controllers.signals import SIGNAL_EMA_BLOCK, rl_signal_ema
from alpharl.reference.controllers import rl_signal_ema as ref_ema
from controllers.controller_units import launch_signal_emas


def _random_isv(rng):
    v = S.sentinel_vector()
    for src, dst, gate, _ in SIGNAL_TABLE:
        v[src] = rng.uniform(0.1, 5.0)
        v[dst] = rng.uniform(0.1, 5.0) if rng.random() < 0.7 else 0.0  # some EMAs still unobserved
    v[S.RL_OBS_TRADES] = rng.integers(0, 2)
    return v


def test_signal_emas_match_reference(rng):
    host = _random_isv(rng)
    d = cuda.to_device(host)
    launch_signal_emas(Controllers(), d)
    ref = host.copy()
    reference_signal_emas(ref)
    np.testing.assert_allclose(d.copy_to_host(), ref, rtol=1e-6)
    # every row followed the documented rule
    for src, dst, gate, beta in SIGNAL_TABLE:
        if gate >= 0 and host[gate] <= 0:
            want = host[dst]
        elif host[dst] == 0:
            want = host[src]
        else:
            want = beta * host[dst] + (1 - beta) * host[src]
        assert ref[dst] == pytest.approx(want, rel=1e-6), S.BY_INDEX[dst].name


@pytest.mark.parametrize("ppo_samples", [0.0, 48.0])
def test_ppo_signals_fold_only_when_the_ppo_update_ran(rng, ppo_samples):
    """--rollout T > 1: on a collect step (RL_OBS_PPO_SAMPLES = 0) the EMAs of what the PPO/V update measures
    (entropy, KL, ratio tail, advantage and return variance, pi and V grad norms) hold; the others fold."""
    host = _random_isv(rng)
    for _, dst, _, _ in SIGNAL_TABLE:
        host[dst] = rng.uniform(0.1, 5.0)  # every EMA observed: a fold always changes it
    host[S.RL_OBS_TRADES] = 1.0
    host[S.RL_OBS_PPO_SAMPLES] = ppo_samples
    d = cuda.to_device(host)
    launch_signal_emas(Controllers(), d)
    got = d.copy_to_host()
    ref = host.copy()
    reference_signal_emas(ref)
    np.testing.assert_allclose(got, ref, rtol=1e-6)
    ppo_emas = {S.RL_ENTROPY_EMA, S.RL_KL_EMA, S.RL_RATIO_TAIL_EMA, S.RL_ADV_VAR_EMA, S.RL_RETURN_VAR_EMA,
                S.RL_PI_GRAD_NORM_EMA, S.RL_V_GRAD_NORM_EMA}
    ratio_emas = {S.RL_KL_EMA, S.RL_RATIO_TAIL_EMA}  # gated on RL_OBS_PPO_INFORMED, = the samples here
    assert {dst for _, dst, gate, _ in SIGNAL_TABLE if gate == S.RL_OBS_PPO_SAMPLES} == ppo_emas - ratio_emas
    assert {dst for _, dst, gate, _ in SIGNAL_TABLE if gate == S.RL_OBS_PPO_INFORMED} == ratio_emas
    for _, dst, _, _ in SIGNAL_TABLE:
        held = dst in ppo_emas and ppo_samples == 0
        assert (got[dst] == host[dst]) == held, S.BY_INDEX[dst].name


def test_signal_ema_refuses_non_finite(rng):
    table = np.array([[S.RL_OBS_KL, S.RL_KL_EMA, -1], [S.RL_OBS_ENTROPY, S.RL_ENTROPY_EMA, -1],
                      [S.RL_OBS_TD_KURTOSIS, S.RL_TD_KURTOSIS_EMA, -1]], np.int32)
    beta = np.full(3, 0.9, np.float32)
    host = S.sentinel_vector()
    host[S.RL_OBS_KL], host[S.RL_KL_EMA] = np.nan, 0.5
    host[S.RL_OBS_ENTROPY], host[S.RL_ENTROPY_EMA] = np.inf, 0.7
    host[S.RL_OBS_TD_KURTOSIS] = rng.uniform(2, 9)
    d = cuda.to_device(host)
    rl_signal_ema[1, SIGNAL_EMA_BLOCK](d, cuda.to_device(table), cuda.to_device(beta), np.int32(3))
    out = d.copy_to_host()
    ref = host.copy()
    ref_ema(ref, table, beta, 3)
    np.testing.assert_array_equal(out, ref)
    assert out[S.RL_KL_EMA] == pytest.approx(0.5) and out[S.RL_ENTROPY_EMA] == pytest.approx(0.7)
    assert out[S.RL_TD_KURTOSIS_EMA] == host[S.RL_OBS_TD_KURTOSIS]  # first observation taken as is
    assert out[S.RL_NAN_SIGNALS] == 2


def test_signal_table_is_well_formed():
    table, beta = signal_table_host()
    assert table.shape == (len(SIGNAL_TABLE), 3) and (beta > 0).all() and (beta < 1).all()
    for src, dst, gate in table:
        assert S.BY_INDEX[src].group == "obs" and S.BY_INDEX[dst].group in ("signals", "grad_norm")
