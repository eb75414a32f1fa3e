"""rl_reward_norm: the running reward/return statistics, the reward normaliser and the adaptive C51
support, kernel vs NumPy reference on random inputs (every output element written) and against the
rules of its docstring (first observation as is, plain average then EMA, dead-signal guard, non-finite
rewards refused, the support moved at rate tau toward 5 return RMS, clamps, sentinel bootstraps)."""
import numpy as np
import pytest
from numba import cuda
from support import assert_all_written, nonzero_uniform, poisoned

from alpharl import isv as S
from alpharl.cuda_kernels.controllers import reward_norm as RN
from alpharl.reference import controllers as R

NORM, SUPPORT = RN.FLAG_NORM, RN.FLAG_SUPPORT
STAT_SLOTS = (S.RL_REWARD_MEAN_EMA, S.RL_REWARD_SQ_EMA, S.RL_RETURN_SQ_EMA, S.RL_REWARD_NORM_COUNT,
              S.RL_REWARD_GAIN, S.RL_SUPPORT_V_MIN, S.RL_SUPPORT_V_MAX, S.RL_NAN_SIGNALS)


def _inputs(rng, n):
    return dict(reward=nonzero_uniform(rng, n, -50.0, 50.0), done=(rng.uniform(size=n) < 0.3).astype(np.float32),
                ret_run=nonzero_uniform(rng, n, -1.0, 1.0))


def _run(inp, isv, flags, scale=0.01, alias=False, finite=True):
    """One kernel launch and its reference on copies: (kernel (isv, ret_run, out, stored), reference (...))."""
    n = len(inp["reward"])
    d_isv, d_ret = cuda.to_device(isv), cuda.to_device(inp["ret_run"])
    out = poisoned(n)
    stored = out if alias else poisoned(n)
    RN.rl_reward_norm[1, RN.REWARD_NORM_BLOCK](cuda.to_device(inp["reward"]), np.int32(n), np.float32(scale),
                                               cuda.to_device(inp["done"]), d_ret, np.int32(flags), d_isv, out, stored)
    r_isv, r_ret = isv.copy(), inp["ret_run"].copy()
    r_out, r_stored = np.zeros(n, np.float32), np.zeros(n, np.float32)
    R.rl_reward_norm(inp["reward"], n, scale, inp["done"], r_ret, flags, r_isv, r_out, r_stored)
    written = assert_all_written if finite else (lambda a: a.copy_to_host())
    got = (d_isv.copy_to_host(), d_ret.copy_to_host(), written(out), out.copy_to_host() if alias else written(stored))
    return got, (r_isv, r_ret, r_out, r_stored)


def _isv(**slots):
    v = S.bootstrap_vector()
    v[S.RL_GAMMA] = 0.97
    v[S.RL_TARGET_TAU] = 0.004
    for name, x in slots.items():
        v[S.BY_NAME[name].index] = x
    return v


@pytest.mark.parametrize("flags", [0, NORM, SUPPORT, NORM | SUPPORT])
@pytest.mark.parametrize("n", [1, 37, 600])
def test_matches_reference_on_random_inputs(rng, flags, n):
    inp = _inputs(rng, n)
    isv = _isv(reward_mean_ema=-0.05, reward_sq_ema=0.2, return_sq_ema=0.6, reward_norm_count=12.0,
               reward_gain=1.3, support_v_min=-6.0, support_v_max=6.0)
    (k_isv, k_ret, k_out, k_st), (r_isv, r_ret, r_out, r_st) = _run(inp, isv, flags)
    np.testing.assert_allclose(k_isv, r_isv, rtol=2e-6, atol=0)
    np.testing.assert_allclose(k_ret, r_ret, rtol=1e-6, atol=1e-7)
    np.testing.assert_array_equal(k_st, r_st)
    np.testing.assert_allclose(k_out, r_out, rtol=1e-6)
    # the rules, on the reference: r = reward x scale; R = gamma R + r, 0 after done
    r = inp["reward"] * np.float32(0.01)
    ret = np.float32(0.97) * inp["ret_run"] + r
    np.testing.assert_allclose(r_ret, np.where(inp["done"] > 0, 0.0, ret), rtol=1e-6)
    w = 1.0 / 13.0
    np.testing.assert_allclose(r_isv[S.RL_RETURN_SQ_EMA], (1 - w) * 0.6 + w * np.mean(ret.astype(np.float64) ** 2),
                               rtol=1e-5)
    assert r_isv[S.RL_REWARD_NORM_COUNT] == 13.0
    g = 1.0 / np.sqrt(r_isv[S.RL_RETURN_SQ_EMA]) if flags & NORM else 1.0
    assert r_isv[S.RL_REWARD_GAIN] == pytest.approx(g, rel=1e-6)
    np.testing.assert_allclose(r_out, r * np.float32(g), rtol=1e-6)
    v_max = 6.0 + 0.004 * (5.0 * np.sqrt(r_isv[S.RL_RETURN_SQ_EMA]) * g - 6.0) if flags & SUPPORT else 6.0
    assert r_isv[S.RL_SUPPORT_V_MAX] == pytest.approx(v_max, rel=1e-6)
    assert r_isv[S.RL_SUPPORT_V_MIN] == -r_isv[S.RL_SUPPORT_V_MAX]


def test_out_may_be_the_stored_array(rng):
    """Without the normaliser the backends pass one array for both outputs: r, unchanged."""
    inp = _inputs(rng, 50)
    (_, _, k_out, _), _ = _run(inp, _isv(), SUPPORT, alias=True)
    np.testing.assert_array_equal(k_out, inp["reward"] * np.float32(0.01))


def test_first_observation_average_then_ema(rng):
    """A sentinel ISV takes the first batch as is; then the plain average of the steps so far until the
    horizon; past it an EMA with beta = 1 - 1 / horizon."""
    n = 16
    isv = S.sentinel_vector()
    ret = np.zeros(n, np.float32)
    means = []
    for step in range(4):
        rew = nonzero_uniform(rng, n, -5, 5)
        R.rl_reward_norm(rew, n, 1.0, np.zeros(n, np.float32), ret, NORM, isv, np.zeros(n, np.float32),
                         np.zeros(n, np.float32))
        means.append(rew.astype(np.float64).mean())
        assert isv[S.RL_REWARD_MEAN_EMA] == pytest.approx(np.mean(means), rel=1e-5, abs=1e-6)
        assert isv[S.RL_REWARD_NORM_COUNT] == step + 1
    isv[S.RL_REWARD_NORM_COUNT] = RN.REWARD_NORM_HORIZON
    before = isv[S.RL_REWARD_MEAN_EMA]
    rew = nonzero_uniform(rng, n, -5, 5)
    R.rl_reward_norm(rew, n, 1.0, np.zeros(n, np.float32), ret, NORM, isv, np.zeros(n, np.float32),
                     np.zeros(n, np.float32))
    w = 1.0 / RN.REWARD_NORM_HORIZON
    assert isv[S.RL_REWARD_MEAN_EMA] == pytest.approx((1 - w) * before + w * rew.mean(), rel=1e-5)
    assert isv[S.RL_REWARD_NORM_COUNT] == RN.REWARD_NORM_HORIZON


def test_dead_signal_and_sentinels(rng):
    """All rewards 0 from a sentinel ISV: no return seen, the gain and the support take their bootstrap
    and hold; the rewards pass unchanged."""
    n = 8
    inp = dict(reward=np.zeros(n, np.float32), done=np.zeros(n, np.float32), ret_run=np.zeros(n, np.float32))
    (k_isv, _, k_out, _), (r_isv, *_) = _run(inp, S.sentinel_vector(), NORM | SUPPORT)
    np.testing.assert_array_equal(k_isv, r_isv)
    assert k_isv[S.RL_REWARD_GAIN] == 1.0
    assert (k_isv[S.RL_SUPPORT_V_MIN], k_isv[S.RL_SUPPORT_V_MAX]) == (S.V_MIN_BOOTSTRAP, S.V_MAX_BOOTSTRAP)
    assert k_isv[S.RL_RETURN_SQ_EMA] == 0.0 and k_isv[S.RL_REWARD_NORM_COUNT] == 1.0
    np.testing.assert_array_equal(k_out, 0.0)


def test_non_finite_rewards_are_refused_and_counted(rng):
    inp = _inputs(rng, 20)
    inp["reward"][[3, 11]] = [np.nan, np.inf]
    isv = _isv(return_sq_ema=0.5, reward_norm_count=3.0)
    (k_isv, k_ret, k_out, k_st), (r_isv, r_ret, r_out, _) = _run(inp, isv, NORM | SUPPORT, finite=False)
    ok = np.ones(20, bool)
    ok[[3, 11]] = False
    assert np.isfinite(k_out[ok]).all() and np.isfinite(k_st[ok]).all()  # every other element written
    assert k_isv[S.RL_NAN_SIGNALS] == r_isv[S.RL_NAN_SIGNALS] == 2
    np.testing.assert_array_equal(k_ret[[3, 11]], inp["ret_run"][[3, 11]])  # R of those backtests held
    assert np.isfinite(k_isv[list(STAT_SLOTS)]).all()
    assert np.isnan(k_out[3]) and np.isinf(k_out[11])
    np.testing.assert_allclose(k_isv, r_isv, rtol=2e-6)


def test_support_clamps(rng):
    n = 32
    big = dict(reward=np.full(n, 1e6, np.float32), done=np.zeros(n, np.float32), ret_run=np.zeros(n, np.float32))
    isv = _isv(support_v_min=-RN.SUPPORT_V_MAX_HI * 0.999, support_v_max=RN.SUPPORT_V_MAX_HI * 0.999,
               target_tau=1.0)
    (k_isv, *_), _ = _run(big, isv, SUPPORT, scale=1.0)
    assert k_isv[S.RL_SUPPORT_V_MAX] == pytest.approx(RN.SUPPORT_V_MAX_HI)
    tiny = dict(reward=np.full(n, 1e-9, np.float32), done=np.ones(n, np.float32), ret_run=np.zeros(n, np.float32))
    isv = _isv(support_v_min=-1e-2, support_v_max=1e-2, target_tau=1.0)
    (k_isv, *_), _ = _run(tiny, isv, SUPPORT, scale=1.0)
    assert k_isv[S.RL_SUPPORT_V_MAX] == pytest.approx(RN.SUPPORT_V_MAX_LO)
    assert k_isv[S.RL_SUPPORT_V_MIN] == -k_isv[S.RL_SUPPORT_V_MAX]


def test_normalised_returns_have_unit_rms(rng):
    """Stationary rewards of any dollar scale: after the statistics settle, the running return of the
    normalised rewards has RMS ~ 1 and the support sits at ~5 (reward_scale cancels)."""
    n = 64
    for dollars, scale in ((1.0, 0.01), (300.0, 1.0)):
        isv, ret, ret_learn = _isv(target_tau=0.05), np.zeros(n, np.float32), np.zeros(n)
        sq = []
        for step in range(800):
            rew = (rng.normal(0.1, 1.0, n) * dollars).astype(np.float32)
            done = (rng.uniform(size=n) < 0.02).astype(np.float32)
            out = np.zeros(n, np.float32)
            R.rl_reward_norm(rew, n, scale, done, ret, NORM | SUPPORT, isv, out, np.zeros(n, np.float32))
            ret_learn = 0.97 * ret_learn + out
            if step > 400:
                sq.append(np.mean(ret_learn ** 2))
            ret_learn[done > 0] = 0
        assert np.sqrt(np.mean(sq)) == pytest.approx(1.0, rel=0.1)
        assert isv[S.RL_SUPPORT_V_MAX] == pytest.approx(RN.SUPPORT_RMS_MULT, rel=0.05)
