"""Several files behind one simulator: the streams' gather/scatter kernels against their NumPy twins,
the round-robin layout, the composite against separate per-file simulators, the device composite
against the reference one step by step, and its checkpoint."""
import numpy as np
import pytest
from numba import cuda

from alpharl.cuda_kernels.lobsim import streams as K
from alpharl.dataset import DatasetError, check_obs_dims
from alpharl.reference.lobsim import ReferenceLobSim
from alpharl.reference.lobsim import streams as R
from alpharl.reference.lobsim.streams import ReferenceMultiLobSim, make_reference_lobsim
from alpharl.sim import layout as L
from alpharl.sim.params import SimParams
from alpharl.sim.streams import BACKTEST_STREAM, MultiLobSim, StreamLayout, make_lobsim
from lobsim_helpers import compare_states, device_actions, real_market
from support import AMZN1, AMZN5, GOOG1, GOOG5, INT_POISON, assert_all_written, nonzero_uniform, poisoned

PARAMS = SimParams(events_per_step=3, episode_steps=6, fills_log_capacity=8, latency_events=1)


def _markets(*names, rows=600):
    return tuple(real_market(n, start=0, rows=rows) for n in names)


def _actions(rng, b):
    weights = np.array([3, 1, 1, 2, 2, 2, 2, 1, 1], float)
    return rng.choice(9, size=b, p=weights / weights.sum()).astype(np.int32)


# ------------------------------------------------------------------ the kernels
@pytest.mark.parametrize("b,s", [(7, 3), (5, 1), (4, 4)])
def test_gather_and_scatter_match_their_twins(rng, b, s):
    lay = StreamLayout(b, s)
    d = 9
    actions = rng.integers(1, 9, size=b).astype(np.int32)
    got = poisoned(b, np.int32)
    K.lobsim_streams_gather[K.gather_grid(b), K.STREAMS_BLOCK](cuda.to_device(actions), cuda.to_device(lay.perm), got)
    want = np.full(b, INT_POISON, np.int32)
    R.lobsim_streams_gather(actions, lay.perm, want)
    np.testing.assert_array_equal(assert_all_written(got), want)
    obs_sm = nonzero_uniform(rng, (b, d))
    out_sm = nonzero_uniform(rng, L.N_OUT * b)
    obs, out = poisoned((b, d)), poisoned((L.N_OUT, b))
    K.lobsim_streams_scatter[K.scatter_grid(b, d, L.N_OUT), K.STREAMS_BLOCK](
        cuda.to_device(obs_sm), cuda.to_device(out_sm), cuda.to_device(lay.table), obs, out)
    obs_r, out_r = np.full((b, d), np.nan, np.float32), np.full((L.N_OUT, b), np.nan, np.float32)
    R.lobsim_streams_scatter(obs_sm, out_sm, lay.table, obs_r, out_r)
    np.testing.assert_array_equal(assert_all_written(obs), obs_r)
    np.testing.assert_array_equal(assert_all_written(out), out_r)
    # the meaning: backtest b is stream b mod S's backtest b // S, read from that stream's views
    views = [lay.slot_views(np.zeros(b), obs_sm, out_sm, k) for k in range(s)]
    for bt in range(b):
        k, j = bt % s, bt // s
        np.testing.assert_array_equal(obs_r[bt], views[k][1][j])
        np.testing.assert_array_equal(out_r[:, bt], views[k][2][:, j])
        assert want[lay.table[K.ST_ROW, bt]] == actions[bt]


def test_layout_is_round_robin():
    lay = StreamLayout(7, 3)
    assert lay.counts == [3, 2, 2] and lay.offsets == [0, 3, 5]
    assert lay.stream_of.tolist() == [0, 1, 2, 0, 1, 2, 0]
    assert [m.tolist() for m in lay.members] == [[0, 3, 6], [1, 4], [2, 5]]
    parts = [np.array([10, 13, 16]), np.array([11, 14]), np.array([12, 15])]
    assert lay.interleave(parts).tolist() == list(range(10, 17))
    with pytest.raises(ValueError):
        StreamLayout(2, 3)


# ------------------------------------------------------------------ the composite
def test_composite_is_the_files_simulators_side_by_side(rng):
    """Backtest b of the composite = backtest b // S of a simulator of file b mod S alone (drawing
    the run's PRNG lanes of the backtests it holds)."""
    markets = _markets(AMZN5, GOOG5, AMZN5, rows=500)
    b, seed = 7, int(rng.integers(1, 2**31))
    multi = ReferenceMultiLobSim(markets, PARAMS, b, seed)
    lay = multi.layout
    alone = [ReferenceLobSim(m, PARAMS, n, seed, lanes=lanes) for m, n, lanes in zip(markets, lay.counts, lay.members)]
    multi.reset()
    for sim in alone:
        sim.reset()
    for t in range(10):
        a = _actions(rng, b)
        multi.step(a)
        for k, sim in enumerate(alone):
            sim.step(a[lay.members[k]])
        np.testing.assert_array_equal(multi.obs, lay.interleave([s.obs for s in alone]), err_msg=f"step {t}")
        np.testing.assert_array_equal(multi.out.T, lay.interleave([s.out.T for s in alone]))
        np.testing.assert_array_equal(multi.field("cursor"), lay.interleave([s.field("cursor") for s in alone]))
    # one stream alone is the plain simulator with the first lanes: the same as an ordinary LobSim
    assert isinstance(make_reference_lobsim(markets[:1], PARAMS, 3, seed), ReferenceLobSim)
    a = ReferenceLobSim(markets[0], PARAMS, 3, seed)
    c = ReferenceLobSim(markets[0], PARAMS, 3, seed, lanes=np.arange(3))
    a.reset()
    c.reset()
    np.testing.assert_array_equal(a.rng, c.rng)


def test_device_composite_matches_the_reference(rng):
    """MultiLobSim (the kernels: under the CUDA simulator here) equals ReferenceMultiLobSim, step by step."""
    markets = _markets(AMZN5, GOOG5, rows=400)
    b, seed = 5, int(rng.integers(1, 2**31))
    dev = make_lobsim(list(markets), PARAMS, b, seed)
    ref = make_reference_lobsim(markets, PARAMS, b, seed)
    assert isinstance(dev, MultiLobSim) and isinstance(ref, ReferenceMultiLobSim)
    dev.out = poisoned(dev.out.shape)
    dev.obs_d = poisoned(dev.obs_d.shape)
    dev.reset()
    ref.reset()
    compare_states(dev.state_dict(), ref.state_dict(), "reset")
    for t in range(8):
        a = _actions(rng, b)
        dev.out = poisoned(dev.out.shape)
        dev.obs_d = poisoned(dev.obs_d.shape)
        dev.step(device_actions(a))
        ref.step(a)
        np.testing.assert_allclose(assert_all_written(dev.obs), ref.obs, rtol=2e-6, atol=1e-6, err_msg=f"step {t}")
        np.testing.assert_allclose(assert_all_written(dev.out), ref.out, rtol=2e-6, atol=1e-6)
        compare_states(dev.state_dict(), ref.state_dict(), f"step {t}")
    for got, want in zip(dev.fills_snapshot(), ref.fills_snapshot()):
        np.testing.assert_allclose(got, want, rtol=2e-6, atol=1e-6)


def test_checkpoint_roundtrip_continues_identically(rng):
    markets = _markets(AMZN5, GOOG5, rows=400)
    acts = [_actions(rng, 5) for _ in range(10)]
    sim = ReferenceMultiLobSim(markets, PARAMS, 5, 11)
    sim.reset()
    for a in acts[:5]:
        sim.step(a)
    ckpt = {k: np.array(v) for k, v in sim.state_dict().items()}
    obs_at = sim.obs.copy()
    assert ckpt[BACKTEST_STREAM].tolist() == [0, 1, 0, 1, 0] and "s1.state_i" in ckpt
    for a in acts[5:]:
        sim.step(a)
    straight = sim.state_dict()
    fresh = ReferenceMultiLobSim(markets, PARAMS, 5, 999)
    fresh.load_state_dict(ckpt)
    np.testing.assert_array_equal(fresh.obs, obs_at)     # the run's observation, scattered on load
    for a in acts[5:]:
        fresh.step(a)
    for k, v in straight.items():
        np.testing.assert_array_equal(fresh.state_dict()[k], v, err_msg=k)
    other = ReferenceMultiLobSim(markets, PARAMS, 6, 11)
    with pytest.raises(ValueError, match="6 over 2"):
        other.load_state_dict(ckpt)


def test_device_checkpoint_roundtrip(rng):
    markets = _markets(AMZN5, GOOG5, rows=400)
    acts = [_actions(rng, 4) for _ in range(4)]
    sim = MultiLobSim(markets, PARAMS, 4, 5)
    sim.reset()
    for a in acts[:2]:
        sim.step(device_actions(a))
    ckpt = sim.state_dict()
    obs = sim.obs.copy_to_host()
    fresh = MultiLobSim(markets, PARAMS, 4, 77)
    fresh.load_state_dict(ckpt)
    np.testing.assert_array_equal(fresh.obs.copy_to_host(), obs)
    for a in acts[2:]:
        sim.step(device_actions(a))
        fresh.step(device_actions(a))
    compare_states(fresh.state_dict(), sim.state_dict(), "resumed")


def test_files_of_any_depth_share_one_observation(rng):
    """1- and 5-level files side by side: one obs_levels observation, device equal to the reference."""
    markets = _markets(AMZN1, GOOG5, rows=300)
    b, seed = 3, int(rng.integers(1, 2**31))
    dev = make_lobsim(list(markets), PARAMS, b, seed)
    ref = make_reference_lobsim(markets, PARAMS, b, seed)
    assert dev.obs_dim == ref.obs_dim == L.obs_dim(PARAMS.obs_levels)
    dev.reset()
    ref.reset()
    for t in range(4):
        a = _actions(rng, b)
        dev.step(device_actions(a))
        ref.step(a)
        np.testing.assert_allclose(dev.obs.copy_to_host(), ref.obs, rtol=2e-6, atol=1e-6, err_msg=f"step {t}")
        compare_states(dev.state_dict(), ref.state_dict(), f"step {t}")
    # the invariant the composite guards: one observation length for every stream
    with pytest.raises(DatasetError, match="obs_dim"):
        check_obs_dims(["a", "b"], [L.obs_dim(1), L.obs_dim(5)])
