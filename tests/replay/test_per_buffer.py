"""PrioritizedReplay kernels against their NumPy references (alpharl.reference.replay)."""
import numpy as np
import pytest
from numba import cuda
from replay.replay_helpers import assert_same_state, per_isv
from support import INT_POISON, assert_all_written, nonzero_uniform, poisoned

from alpharl import isv as S
from alpharl.cuda_kernels.replay import per as K
from alpharl.reference.replay import PrioritizedReplayReference
from alpharl.replay import PrioritizedReplay

D = 3


def _transitions(rng, n):
    return (nonzero_uniform(rng, (n, D)), rng.integers(0, 9, n).astype(np.int32), nonzero_uniform(rng, n),
            (rng.random(n) < 0.2).astype(np.float32), nonzero_uniform(rng, (n, D)))


def _pair(rng, capacity, max_batch):
    seed = int(rng.integers(2**63))
    return PrioritizedReplay(capacity, D, max_batch, seed), PrioritizedReplayReference(capacity, D, max_batch, seed)


def _insert_both(dev, ref, batch):
    dev.insert(*(cuda.to_device(x) for x in batch))
    ref.insert(*batch)


def _load_both(dev, ref, **arrays):
    """Overwrite some state arrays of both replays through the checkpoint API."""
    for r in (dev, ref):
        state = r.state_dict()
        state.update(arrays)
        r.load_state_dict(state)


def test_insert_wraps_around_the_ring(rng):
    dev, ref = _pair(rng, capacity=10, max_batch=4)
    batches = [_transitions(rng, n) for n in (4, 4, 5)]
    for batch in batches:
        _insert_both(dev, ref, batch)
    assert dev.host_size() == (3, 10)  # 13 transitions into 10 slots: cursor wrapped to 3, buffer full
    assert_same_state(dev, ref)
    # the newest 10 transitions, in ring order: slots 0-2 hold the last 3 of the third batch
    newest = np.concatenate([b[0] for b in batches])[3:]
    np.testing.assert_array_equal(dev.state_dict()["obs_s"], np.roll(newest, 3, axis=0))
    np.testing.assert_array_equal(dev.state_dict()["priority"], np.full(10, K.INITIAL_MAX_PRIORITY, np.float32))


def test_insert_takes_the_running_max_priority(rng):
    dev, ref = _pair(rng, capacity=8, max_batch=4)
    _insert_both(dev, ref, _transitions(rng, 3))
    _load_both(dev, ref, pmax=np.array([7.5], np.float32))
    _insert_both(dev, ref, _transitions(rng, 2))
    p = dev.state_dict()["priority"]
    np.testing.assert_array_equal(p, [1, 1, 1, 7.5, 7.5, 0, 0, 0])
    assert_same_state(dev, ref)


@pytest.mark.parametrize("size", [K.PER_TILE + 150, 37])
def test_sample_matches_reference(rng, size):
    """Identical indices, weights, ESS and sampler states; several tiles and a one-tile buffer."""
    capacity, m = K.PER_TILE + 200, K.PER_BLOCK + 72  # m > PER_BLOCK: threads draw several rows
    dev, ref = _pair(rng, capacity, m)
    _insert_both(dev, ref, _transitions(rng, capacity))
    priority = np.zeros(capacity, np.float32)
    priority[:size] = rng.uniform(0.01, 5.0, size)
    _load_both(dev, ref, priority=priority, meta=np.array([size % capacity, size], np.int32))
    isv = per_isv(rng)
    d_isv = cuda.to_device(isv)
    dev.mb_idx, dev.mb_weight = poisoned(m, np.int32), poisoned(m, np.float32)
    mb = dev.sample(d_isv, m)
    mbr = ref.sample(isv, m)

    idx = assert_all_written(mb.idx)
    np.testing.assert_array_equal(idx, mbr.idx)
    assert idx.min() >= 0 and idx.max() < size
    np.testing.assert_allclose(assert_all_written(mb.is_weight), mbr.is_weight, rtol=1e-6)
    out_isv = d_isv.copy_to_host()
    np.testing.assert_allclose(out_isv[S.RL_PER_ESS_FRAC], isv[S.RL_PER_ESS_FRAC], rtol=1e-6)
    np.testing.assert_allclose(dev.cdf.copy_to_host()[:size], ref.cdf[:size], rtol=1e-13)
    np.testing.assert_array_equal(dev.sampler_state.copy_to_host(), ref.sampler_state)
    for name in ("obs", "action", "reward", "done", "obs_next"):
        np.testing.assert_array_equal(getattr(mb, name).copy_to_host(), getattr(mbr, name), err_msg=name)

    # the weights and the ESS from their definitions, independently of both implementations
    alpha, beta = np.float64(isv[S.RL_PER_ALPHA]), np.float64(isv[S.RL_PER_BETA])
    mass = priority[:size].astype(np.float64) ** alpha
    prob = mass / mass.sum()
    raw = (size * prob[idx]) ** -beta
    np.testing.assert_allclose(mb.is_weight.copy_to_host(), raw / raw.max(), rtol=1e-5)
    np.testing.assert_allclose(out_isv[S.RL_PER_ESS_FRAC], 1.0 / (size * (prob**2).sum()), rtol=1e-5)


def test_sample_with_fewer_filled_slots_than_draws(rng):
    dev, ref = _pair(rng, capacity=64, max_batch=96)
    _insert_both(dev, ref, _transitions(rng, 5))
    isv = per_isv(rng)
    mb = dev.sample(cuda.to_device(isv), 96)
    mbr = ref.sample(isv, 96)
    idx = mb.idx.copy_to_host()
    np.testing.assert_array_equal(idx, mbr.idx)
    assert set(idx) == set(range(5))  # with replacement, among the filled slots only
    np.testing.assert_array_equal(mb.is_weight.copy_to_host(), 1.0)  # equal priorities: uniform, weight 1


def test_sample_from_an_empty_buffer_is_defined(rng):
    dev, _ = _pair(rng, capacity=16, max_batch=8)
    isv = per_isv(rng)
    d_isv = cuda.to_device(isv)
    states = dev.sampler_state.copy_to_host()
    mb = dev.sample(d_isv, 8)
    np.testing.assert_array_equal(mb.idx.copy_to_host(), 0)
    np.testing.assert_array_equal(mb.is_weight.copy_to_host(), 0.0)  # no gradient from an empty buffer
    assert d_isv.copy_to_host()[S.RL_PER_ESS_FRAC] == 0.0             # "not observed" for the PER controller
    np.testing.assert_array_equal(dev.sampler_state.copy_to_host(), states)


def test_priority_update_takes_max_over_duplicates_and_guards_non_finite(rng):
    capacity, m = 32, 12
    dev, ref = _pair(rng, capacity, m)
    _insert_both(dev, ref, _transitions(rng, capacity))
    idx = np.array([3, 7, 3, 9, 11, 3, 7, 20, 21, 22, 23, 24], np.int32)
    loss = nonzero_uniform(rng, m, -2.0, 2.0)
    loss[8] = np.nan
    loss[9] = np.inf
    loss[10] = 9.0  # the batch max: pmax moves to 9 + eps
    _load_both(dev, ref, mb_idx=idx)
    dev.update_priorities(cuda.to_device(loss), m)
    ref.update_priorities(loss, m)
    assert_same_state(dev, ref)

    p = dev.state_dict()["priority"]
    eps = np.float32(K.PRIORITY_EPS)
    new = np.abs(loss) + eps
    assert p[3] == new[[0, 2, 5]].max() and p[7] == new[[1, 6]].max() and p[9] == new[3]
    assert p[21] == 0 and p[22] == 0  # non-finite loss -> the transition is dropped
    assert dev.state_dict()["pmax"][0] == np.float32(9.0) + eps
    untouched = np.setdiff1d(np.arange(capacity), idx)
    np.testing.assert_array_equal(p[untouched], K.INITIAL_MAX_PRIORITY)


def test_gate_zero_writes_nothing(rng):
    capacity, m = 40, 16
    dev, _ = _pair(rng, capacity, m)
    dev.insert(*(cuda.to_device(x) for x in _transitions(rng, capacity)))
    closed = cuda.to_device(np.zeros(1, np.int32))
    for name, dtype in (("mb_idx", np.int32), ("mb_weight", np.float32), ("mb_obs_s", np.float32),
                        ("mb_action", np.int32), ("mb_reward", np.float32), ("mb_done", np.float32),
                        ("mb_obs_s2", np.float32), ("cdf", np.float64), ("tile_sum", np.float64),
                        ("tile_sq", np.float64), ("tile_cdf", np.float64)):
        setattr(dev, name, poisoned(getattr(dev, name).shape, dtype))
    isv = per_isv(rng)
    d_isv = cuda.to_device(isv)
    before = dev.state_dict()
    dev.sample(d_isv, m, gate=closed)
    dev.update_priorities(cuda.to_device(nonzero_uniform(rng, m)), m, gate=closed)
    after = dev.state_dict()
    for name in ("priority", "pmax", "meta", "sampler_state"):
        np.testing.assert_array_equal(after[name], before[name], err_msg=name)
    for name in ("mb_idx", "mb_action"):
        assert (after[name] == INT_POISON).all(), name
    for name in ("mb_weight", "mb_obs_s", "mb_reward", "mb_done", "mb_obs_s2"):
        assert np.isnan(after[name]).all(), name
    for name in ("cdf", "tile_sum", "tile_sq", "tile_cdf"):
        assert np.isnan(getattr(dev, name).copy_to_host()).all(), name
    np.testing.assert_array_equal(d_isv.copy_to_host(), isv)


def test_state_dict_round_trip_continues_identically(rng):
    capacity, m = 48, 16
    dev, _ = _pair(rng, capacity, m)
    dev.insert(*(cuda.to_device(x) for x in _transitions(rng, 30)))
    isv = cuda.to_device(per_isv(rng))
    dev.sample(isv, m)
    dev.update_priorities(cuda.to_device(nonzero_uniform(rng, m)), m)
    saved = dev.state_dict()

    restored = PrioritizedReplay(capacity, D, m, seed=0)  # another seed: everything comes from the state
    restored.load_state_dict(saved)
    a, b = dev.sample(isv, m), restored.sample(isv, m)
    np.testing.assert_array_equal(a.idx.copy_to_host(), b.idx.copy_to_host())
    np.testing.assert_array_equal(a.obs.copy_to_host(), b.obs.copy_to_host())
    with pytest.raises(ValueError, match="capacity"):
        PrioritizedReplay(capacity + 1, D, m, seed=0).load_state_dict(saved)
