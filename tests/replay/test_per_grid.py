"""The replay's grid path (m > grid_above: rl_per_scan_tiles, rl_per_draw, rl_per_weights;
rl_per_clear_priority, rl_per_max_priority) against the one-block path and the NumPy references.

The paths switch at ``grid_above`` (default PER_GRID_ABOVE); the tests move it to just below m, so
a minibatch of a few blocks' rows (cheap under the simulator) takes the grid path, and compare every
output bit for bit with the same replay on one block."""
import numpy as np
import pytest
from numba import cuda
from replay.replay_helpers import assert_same_state, per_isv
from support import assert_all_written, nonzero_uniform, poisoned

from alpharl import isv as S
from alpharl import target
from alpharl.cuda_kernels.replay import per as K
from alpharl.reference.replay import PrioritizedReplayReference
from alpharl.replay import PrioritizedReplay

D = 3
#: Rows of the minibatch: two blocks of the grid path, the second partial (the guarded rows).
M = K.PER_BLOCK + 72
#: Tolerance of the kernels' IS weights and ESS against NumPy: none under the simulator (math.pow
#: is the host's pow), the last bit of libdevice's pow on a GPU (alpharl.reference.replay).
#: The kernels' p^alpha is math.pow per element, the reference's np.power over an array: under the
#: simulator both are the CPU's float64 pow, yet libm's and NumPy's vectorised pow may differ in the
#: last bit (so a float64 sum or min by a few ulps, a float32 weight by one ulp); the GPU's pow by more.
POW_RTOL = 4 * np.finfo(np.float64).eps if target.on_simulator() else 1e-6
W_RTOL = np.finfo(np.float32).eps if target.on_simulator() else 1e-6


def _replays(rng, capacity, size, priority):
    """One replay per path (one block, grid, NumPy reference on the grid path), all in the same state."""
    seed = int(rng.integers(2**63))
    block = PrioritizedReplay(capacity, D, M, seed, grid_above=M)
    grid = PrioritizedReplay(capacity, D, M, seed, grid_above=M - 1)
    ref = PrioritizedReplayReference(capacity, D, M, seed, grid_above=M - 1)
    state = block.state_dict()
    state["obs_s"], state["obs_s2"] = nonzero_uniform(rng, (2, capacity, D))
    state["action"] = rng.integers(0, 9, capacity).astype(np.int32)
    state["reward"] = nonzero_uniform(rng, capacity)
    state["done"] = (rng.random(capacity) < 0.2).astype(np.float32)
    state["priority"] = priority
    state["pmax"] = np.array([priority.max(initial=K.INITIAL_MAX_PRIORITY)], np.float32)
    state["meta"] = np.array([size % capacity, size], np.int32)
    for r in (block, grid, ref):
        r.load_state_dict(state)
    for r in (block, grid):  # every draw output poisoned: each must be written
        r.mb_idx, r.mb_weight = poisoned(M, np.int32), poisoned(M, np.float32)
        r.tile_cdf, r.scratch = poisoned(r.tile_cdf.shape, np.float64), poisoned(K.SCRATCH_LEN, np.float64)
    return block, grid, ref


@pytest.mark.parametrize("size", [K.PER_TILE + 150, 37, 0], ids=["tiles", "one-tile", "empty"])
def test_grid_draw_equals_the_one_block_draw_and_the_reference(rng, size):
    """Same idx, IS weights, ESS, sampler states and gathered rows on both paths; several tiles, a
    one-tile buffer, an empty one (idx 0, weight 0, ESS 0)."""
    capacity = K.PER_TILE + 200
    priority = np.zeros(capacity, np.float32)
    priority[:size] = rng.uniform(0.01, 5.0, size)
    block, grid, ref = _replays(rng, capacity, size, priority)
    isv = per_isv(rng)
    d_isv = {r: cuda.to_device(isv) for r in (block, grid)}
    mb = {r: r.sample(d_isv[r], M) for r in (block, grid)}
    mbr = ref.sample(isv, M)

    idx = assert_all_written(mb[grid].idx)
    w = assert_all_written(mb[grid].is_weight)
    ess = d_isv[grid].copy_to_host()[S.RL_PER_ESS_FRAC]
    np.testing.assert_array_equal(idx, mb[block].idx.copy_to_host())
    np.testing.assert_array_equal(w, mb[block].is_weight.copy_to_host())
    assert ess == d_isv[block].copy_to_host()[S.RL_PER_ESS_FRAC]
    assert_same_state(grid, block)
    np.testing.assert_array_equal(idx, mbr.idx)
    np.testing.assert_array_equal(grid.sampler_state.copy_to_host(), ref.sampler_state)
    np.testing.assert_allclose(w, mbr.is_weight, rtol=W_RTOL, atol=0)
    np.testing.assert_allclose(ess, isv[S.RL_PER_ESS_FRAC], rtol=W_RTOL, atol=0)
    for name in ("obs", "action", "reward", "done", "obs_next"):
        np.testing.assert_array_equal(getattr(mb[grid], name).copy_to_host(), getattr(mbr, name), err_msg=name)
    if size == 0:
        assert (idx == 0).all() and (w == 0).all() and ess == 0
        return
    assert idx.min() >= 0 and idx.max() < size
    tiles = -(-size // K.PER_TILE)
    tile_cdf = assert_all_written(grid.tile_cdf.copy_to_host()[:tiles])
    np.testing.assert_array_equal(tile_cdf, block.tile_cdf.copy_to_host()[:tiles])
    scratch = assert_all_written(grid.scratch)
    np.testing.assert_allclose(scratch, ref.scratch, rtol=POW_RTOL, atol=0)
    mass = priority[:size].astype(np.float64) ** np.float64(isv[S.RL_PER_ALPHA])
    np.testing.assert_allclose(scratch[K.SCRATCH_TOTAL], mass.sum(), rtol=1e-12)
    np.testing.assert_allclose(scratch[K.SCRATCH_LEAST], mass[idx].min(), rtol=POW_RTOL, atol=0)


@pytest.mark.parametrize("pmax_moves", [True, False])
def test_grid_priority_update_equals_the_one_block_update_and_the_reference(rng, pmax_moves):
    """Max over duplicate indices, non-finite losses dropped, pmax raised (or not) by the batch max:
    the same priorities and pmax on both paths. The sampled slots start above every new priority, so
    a slot the clear missed would keep its old value."""
    capacity = 3 * M
    priority = rng.uniform(50.0, 100.0, capacity).astype(np.float32)
    block, grid, ref = _replays(rng, capacity, capacity, priority)
    idx = rng.integers(0, M // 2, M).astype(np.int32)  # ~M/2 distinct slots: most drawn more than once
    loss = nonzero_uniform(rng, M, -3.0, 3.0)
    loss[rng.choice(M, 4, replace=False)] = [np.nan, np.inf, -np.inf, np.nan]
    pmax = np.array([0.5 if pmax_moves else 1000.0], np.float32)
    for r in (block, grid, ref):
        state = r.state_dict()
        state["mb_idx"], state["pmax"] = idx, pmax
        r.load_state_dict(state)
    for r in (block, grid):
        r.update_priorities(cuda.to_device(loss), M)
    ref.update_priorities(loss, M)
    assert_same_state(grid, block)
    for name in ("priority", "pmax"):
        np.testing.assert_array_equal(grid.state_dict()[name], ref.state_dict()[name], err_msg=name)

    p = grid.state_dict()["priority"]
    new = np.abs(loss) + np.float32(K.PRIORITY_EPS)
    new[~np.isfinite(new)] = 0.0
    for slot in np.unique(idx):
        assert p[slot] == new[idx == slot].max(), slot
    untouched = np.setdiff1d(np.arange(capacity), idx)
    np.testing.assert_array_equal(p[untouched], priority[untouched])
    assert grid.state_dict()["pmax"][0] == max(pmax[0], new.max())


def test_gate_zero_writes_nothing_on_the_grid_path(rng):
    capacity = K.PER_TILE + 200
    block, grid, _ = _replays(rng, capacity, capacity, rng.uniform(0.01, 5.0, capacity).astype(np.float32))
    closed = cuda.to_device(np.zeros(1, np.int32))
    isv = per_isv(rng)
    d_isv = cuda.to_device(isv)
    before = grid.state_dict()
    grid.sample(d_isv, M, gate=closed)
    grid.update_priorities(cuda.to_device(nonzero_uniform(rng, M)), M, gate=closed)
    assert_same_state(grid, before)  # the poisoned mb_idx and mb_weight included
    assert np.isnan(grid.scratch.copy_to_host()).all() and np.isnan(grid.tile_cdf.copy_to_host()).all()
    np.testing.assert_array_equal(d_isv.copy_to_host(), isv)


@pytest.mark.parametrize("m, grid", [(K.PER_GRID_ABOVE, False), (K.PER_GRID_ABOVE + 1, True)])
def test_the_path_switches_above_per_grid_above(rng, m, grid):
    """At the default threshold: one block up to PER_GRID_ABOVE rows, the grid path above (the wiring,
    on the NumPy replay, which launches by kernel name)."""
    ref = PrioritizedReplayReference(4 * m, D, m, seed=int(rng.integers(2**63)))
    ref.insert(nonzero_uniform(rng, (m, D)), rng.integers(0, 9, m).astype(np.int32), nonzero_uniform(rng, m),
               np.zeros(m, np.float32), nonzero_uniform(rng, (m, D)))
    launched = []
    launch = ref._launch
    ref._launch = lambda k, *a, **kw: (launched.append(k.name), launch(k, *a, **kw))
    ref.sample(per_isv(rng), m)
    ref.update_priorities(nonzero_uniform(rng, m), m)
    grid_names = ["rl_per_build_cdf", "rl_per_scan_tiles", "rl_per_draw", "rl_per_weights", "rl_per_gather",
                  "rl_per_clear_priority", "rl_per_max_priority"]
    block_names = ["rl_per_build_cdf", "rl_per_sample", "rl_per_gather", "rl_per_update_priority"]
    assert launched == (grid_names if grid else block_names)
