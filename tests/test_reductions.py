"""rl_l2_norm, rl_batch_moments and rl_batch_moments_multi against their NumPy references on
random inputs; the multi launch against single launches bit for bit."""
import numpy as np
import pytest
from numba import cuda

from alpharl import isv as S
from alpharl.cuda_kernels.reductions import (MOM_COLS, MOM_COUNT, MOM_N, MOMENTS_MULTI, REDUCE_BLOCK,
                                             MomentSlots, moments_table, pad_moments_inputs, rl_batch_moments,
                                             rl_batch_moments_multi, rl_l2_norm)
from alpharl.reference import reductions as R
from alpharl.signals import PPO_SIGNALS, SIGNAL_MOMENTS, signal_moments_table
from support import assert_all_written, nonzero_uniform, poisoned


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


# ------------------------------------------------------------------ rl_batch_moments_multi

#: Eight statistics writing disjoint slots (blocks run in any order: two writing one slot would race),
#: every slot kind used, and the step's closed-trade statistic with all three of its slots.
MULTI_SLOTS = (
    MomentSlots(mean=S.RL_OBS_ENTROPY),
    MomentSlots(mean=S.RL_OBS_KL, max=S.RL_OBS_RATIO_MAX),
    MomentSlots(var=S.RL_OBS_ADV_VAR),
    MomentSlots(var=S.RL_OBS_RETURN_VAR, kurt=S.RL_OBS_TD_KURTOSIS),
    MomentSlots(mean=S.RL_OBS_DONE_RATE),
    MomentSlots(count=S.RL_OBS_TRADES, mean=S.RL_OBS_REWARD_PER_TRADE, neg_frac=S.RL_OBS_LOSS_RATE),
    MomentSlots(mean=S.RL_OBS_Q_GRAD_NORM),
    MomentSlots(count=S.RL_OBS_PI_GRAD_NORM, mean=S.RL_OBS_V_GRAD_NORM),  # all weights 0: count only
)
NO_OBSERVATION = 7
TRADES = 5


def _multi_inputs(rng):
    """Eight inputs of different lengths (one a row of a 2-D array, as the simulator's outputs are)."""
    ns = [1, 37, 255, 256, 300, 513, 64, 90]
    rows = nonzero_uniform(rng, (3, ns[TRADES]), -3, 3)
    xs = [nonzero_uniform(rng, n, -4, 4) ** 3 for n in ns]  # heavy-ish tails
    xs[TRADES] = rows[1]
    ws = [np.ones(n, np.float32) for n in ns]
    ws[2] = rng.uniform(0.1, 2.0, ns[2]).astype(np.float32)  # fractional weights
    ws[TRADES] = (rng.random(ns[TRADES]) < 0.3).astype(np.float32)  # a closed-trade flag
    ws[NO_OBSERVATION][:] = 0.0
    dev_rows = cuda.to_device(rows)
    dxs = [dev_rows[1] if i == TRADES else cuda.to_device(x) for i, x in enumerate(xs)]
    return ns, xs, ws, dxs, [cuda.to_device(w) for w in ws]


def test_rl_batch_moments_multi_is_bit_identical_to_single_launches(rng):
    ns, xs, ws, dxs, dws = _multi_inputs(rng)
    table = moments_table(list(zip(ns, MULTI_SLOTS)))
    isv_multi = poisoned(S.RL_SLOTS_END)
    rl_batch_moments_multi[len(ns), REDUCE_BLOCK](pad_moments_inputs(dxs), pad_moments_inputs(dws),
                                                  cuda.to_device(table), isv_multi)
    isv_single = poisoned(S.RL_SLOTS_END)
    for x, w, row in zip(dxs, dws, table):
        rl_batch_moments[1, REDUCE_BLOCK](x, w, row[MOM_N], isv_single, *row[MOM_COUNT:])
    got = isv_multi.copy_to_host()
    np.testing.assert_array_equal(got, isv_single.copy_to_host())  # NaN poison left at the same places

    # every requested slot is written (the no-observation statistic only its count), nothing else
    written = sorted({s for i, slots in enumerate(MULTI_SLOTS) for s in slots
                      if s >= 0 and (i != NO_OBSERVATION or s == slots.count)})
    assert_all_written(got[written])
    assert np.isnan(np.delete(got, written)).all()
    assert got[MULTI_SLOTS[NO_OBSERVATION].count] == 0.0

    ref = np.full(S.RL_SLOTS_END, np.nan, np.float32)
    R.rl_batch_moments_multi(xs, ws, table, ref)
    np.testing.assert_allclose(got, ref, rtol=1e-5)
    m = ws[TRADES] > 0
    assert got[S.RL_OBS_TRADES] == m.sum()
    assert got[S.RL_OBS_LOSS_RATE] == pytest.approx((xs[TRADES][m] < 0).mean())
    assert got[S.RL_OBS_RATIO_MAX] == xs[1].max()


def test_rl_batch_moments_multi_fewer_statistics_than_the_tuple(rng):
    """Two statistics: the unused tuple entries are padding, never read; grid = 2."""
    x0, x1 = nonzero_uniform(rng, 40), nonzero_uniform(rng, 70)
    table = moments_table([(40, MomentSlots(mean=S.RL_OBS_ENTROPY)), (70, MomentSlots(var=S.RL_OBS_ADV_VAR))])
    xs = pad_moments_inputs([cuda.to_device(x0), cuda.to_device(x1)])
    ones = cuda.to_device(np.ones(70, np.float32))
    assert len(xs) == MOMENTS_MULTI
    isv = cuda.to_device(S.sentinel_vector())
    rl_batch_moments_multi[2, REDUCE_BLOCK](xs, pad_moments_inputs([ones, ones]), cuda.to_device(table), isv)
    got = isv.copy_to_host()
    ref = S.sentinel_vector()
    R.rl_batch_moments_multi([x0, x1], [np.ones(70, np.float32)] * 2, table, ref)
    np.testing.assert_allclose(got, ref, rtol=1e-5)
    assert np.count_nonzero(got) == 2


def test_moments_table_layout_and_limits():
    t = moments_table([(5, MomentSlots(mean=3, neg_frac=9)), (7, MomentSlots(count=1))])
    assert t.dtype == np.int32 and t.shape == (2, MOM_COLS) and t.flags.c_contiguous
    np.testing.assert_array_equal(t, [[5, -1, 3, -1, -1, -1, 9], [7, 1, -1, -1, -1, -1, -1]])
    with pytest.raises(ValueError):
        moments_table([(1, MomentSlots())] * (MOMENTS_MULTI + 1))
    with pytest.raises(ValueError):
        pad_moments_inputs([])


def test_trainer_signal_table():
    """The step's statistics fit one launch and no two write the same slot (blocks run in any order)."""
    t = signal_moments_table(b=16, m=64)
    assert len(SIGNAL_MOMENTS) <= MOMENTS_MULTI
    slots = t[:, MOM_COUNT:][t[:, MOM_COUNT:] >= 0].tolist()
    assert len(slots) == len(set(slots))
    assert set(slots) == {S.RL_OBS_ENTROPY, S.RL_OBS_KL, S.RL_OBS_RATIO_MAX, S.RL_OBS_ADV_VAR,
                          S.RL_OBS_RETURN_VAR, S.RL_OBS_TD_KURTOSIS, S.RL_OBS_DONE_RATE, S.RL_OBS_TRADES,
                          S.RL_OBS_REWARD_PER_TRADE, S.RL_OBS_LOSS_RATE, S.RL_OBS_PPO_SAMPLES}
    np.testing.assert_array_equal(t[:, MOM_N], [64 if r.minibatch else 16 for r in SIGNAL_MOMENTS])
    # --rollout T: the PPO/V rows over T B samples on the update step, none on a collect step
    for n_ppo in (0, 16 * 8):
        tp = signal_moments_table(b=16, m=64, n_ppo=n_ppo)
        np.testing.assert_array_equal(tp[:, MOM_N], [64 if r.minibatch else n_ppo if r.x in PPO_SIGNALS else 16
                                                     for r in SIGNAL_MOMENTS])
        np.testing.assert_array_equal(tp[:, MOM_COUNT:], t[:, MOM_COUNT:])
    assert {r.x for r in SIGNAL_MOMENTS if r.slots.count == S.RL_OBS_PPO_SAMPLES} == {"entropy"}
