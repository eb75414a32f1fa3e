"""rl_l2_norm and rl_batch_moments against their NumPy references on random inputs."""
import numpy as np
import pytest
from numba import cuda

from alpharl import isv as S
from alpharl.cuda_kernels.reductions import REDUCE_BLOCK, rl_batch_moments, rl_l2_norm
from alpharl.reference import reductions as R
from support import nonzero_uniform


@pytest.mark.parametrize("n", [1, 257, 1152])
def test_rl_l2_norm(rng, n):
    x = nonzero_uniform(rng, n, -3, 3)
    out = cuda.to_device(np.full(4, np.nan, np.float32))
    rl_l2_norm[1, REDUCE_BLOCK](cuda.to_device(x), np.int32(n), out, np.int32(2))
    got = out.copy_to_host()
    ref = np.full(4, np.nan, np.float32)
    R.rl_l2_norm(x, n, ref, 2)
    assert got[2] == pytest.approx(ref[2], rel=1e-5)
    assert got[2] == pytest.approx(np.linalg.norm(x.astype(np.float64)), rel=1e-5)
    assert np.isnan(got[[0, 1, 3]]).all()  # only the requested slot is written


def test_rl_l2_norm_propagates_nan(rng):
    x = nonzero_uniform(rng, 300)
    x[123] = np.nan
    out = cuda.to_device(np.zeros(1, np.float32))
    rl_l2_norm[1, REDUCE_BLOCK](cuda.to_device(x), np.int32(300), out, np.int32(0))
    assert np.isnan(out.copy_to_host()[0])


SLOTS = (S.RL_OBS_TRADES, S.RL_OBS_REWARD_PER_TRADE, S.RL_OBS_ADV_VAR, S.RL_OBS_TD_KURTOSIS, S.RL_OBS_RATIO_MAX, S.RL_OBS_LOSS_RATE)


def _moments(x, w, slots=SLOTS):
    n = len(x)
    d = cuda.to_device(S.sentinel_vector())
    rl_batch_moments[1, REDUCE_BLOCK](cuda.to_device(x), cuda.to_device(w), np.int32(n), d, *[np.int32(s) for s in slots])
    ref = S.sentinel_vector()
    R.rl_batch_moments(x, w, n, ref, *slots)
    return d.copy_to_host(), ref


def test_rl_batch_moments_weighted(rng):
    n = 700
    x = nonzero_uniform(rng, n, -4, 4) ** 3  # heavy-ish tails
    w = (rng.random(n) < 0.3).astype(np.float32)
    got, ref = _moments(x, w)
    np.testing.assert_allclose(got, ref, rtol=1e-5)
    m = w > 0
    xm = x[m].astype(np.float64)
    assert got[S.RL_OBS_TRADES] == m.sum()
    assert got[S.RL_OBS_REWARD_PER_TRADE] == pytest.approx(xm.mean(), rel=1e-5)
    assert got[S.RL_OBS_ADV_VAR] == pytest.approx(xm.var(), rel=1e-5)
    assert got[S.RL_OBS_TD_KURTOSIS] == pytest.approx(((xm - xm.mean()) ** 4).mean() / xm.var() ** 2, rel=1e-4)
    assert got[S.RL_OBS_RATIO_MAX] == pytest.approx(xm.max())
    assert got[S.RL_OBS_LOSS_RATE] == pytest.approx((xm < 0).mean())


def test_rl_batch_moments_no_observation_writes_only_count(rng):
    x = nonzero_uniform(rng, 50)
    got, ref = _moments(x, np.zeros(50, np.float32))
    np.testing.assert_array_equal(got, ref)
    assert got[S.RL_OBS_TRADES] == 0 and (np.delete(got, S.RL_OBS_TRADES) == 0).all()


def test_rl_batch_moments_unwritten_slots(rng):
    x = nonzero_uniform(rng, 64)
    got, _ = _moments(x, np.ones(64, np.float32), slots=(-1, S.RL_OBS_ENTROPY, -1, -1, -1, -1))
    assert got[S.RL_OBS_ENTROPY] == pytest.approx(x.astype(np.float64).mean(), rel=1e-5)
    assert np.count_nonzero(got) == 1
