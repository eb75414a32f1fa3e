"""tests/simblocks.py, the simulator's block scheduler the suite runs under, against numba's own:
barriers (syncthreads and its count / and / or forms), threads that leave early, several blocks,
and a thread's exception, raised from the launch and stopping the other threads; its device-function
calls (each module's swap held for the launch) against the stock per-call swap, the modules' own
``cuda`` back after every launch, a failed one too; its scalar casts against numba's."""
import threading

import numpy as np
import pytest
from numba import cuda

from alpharl import target

pytestmark = pytest.mark.skipif(not target.on_simulator(), reason="the CUDA simulator's scheduler")

if target.on_simulator():
    import simblocks
    from numba.cuda.simulator import kernel as sim_kernel

    from alpharl.cuda_kernels import reductions

N = 64


@cuda.jit
def _tree_sum(x, out, counts, early):
    """Each block sums its N values with a shared-memory tree (a barrier a level); the threads of
    ids >= early[0] leave before the last barriers; counts: syncthreads_count / and / or results."""
    sh = cuda.shared.array(N, np.float64)
    t = cuda.threadIdx.x
    b = cuda.blockIdx.x
    sh[t] = x[b * N + t]
    cuda.syncthreads()
    c = cuda.syncthreads_count(x[b * N + t] > 0)
    a = cuda.syncthreads_and(x[b * N + t] > -10)
    o = cuda.syncthreads_or(x[b * N + t] > 0.99)
    if t == 0:
        counts[b, 0] = c
        counts[b, 1] = a
        counts[b, 2] = o
    s = N // 2
    while s > 0:
        if t < s:
            sh[t] += sh[t + s]
        cuda.syncthreads()
        if s == 2 and t >= early[0]:
            return
        s //= 2
    if t == 0:
        out[b] = sh[0]


@cuda.jit
def _fail_on(x, bad, out):
    """Thread bad[0] writes past the end of out (an IndexError under the simulator); the others wait at a
    barrier."""
    t = cuda.threadIdx.x
    if t == bad[0]:
        out[out.shape[0] + t] = 1.0
    cuda.syncthreads()
    out[t] = x[t]


def _launch(manager, rng):
    installed = sim_kernel.BlockManager
    sim_kernel.BlockManager = manager
    try:
        x = rng.uniform(-1, 1, 3 * N)
        out, counts = np.full(3, np.nan), np.full((3, 3), -1, np.int64)
        _tree_sum[3, N](x, out, counts, np.array([int(rng.integers(2, N))]))
        return x, out, counts
    finally:
        sim_kernel.BlockManager = installed


def test_block_barriers_early_exits_and_several_blocks_as_numba_runs_them(rng):
    state = rng.bit_generator.state
    x, fast, fast_counts = _launch(simblocks.BlockManager, rng)
    rng.bit_generator.state = state
    x2, stock, stock_counts = _launch(simblocks.STOCK_BLOCK_MANAGER, rng)
    assert (x == x2).all()
    blocks = x.reshape(3, N)
    np.testing.assert_allclose(fast, blocks.sum(axis=1), rtol=1e-12)
    np.testing.assert_array_equal(fast, stock)
    want = np.stack([(blocks > 0).sum(1), (blocks > -10).all(1), (blocks > 0.99).any(1)], axis=1)
    np.testing.assert_array_equal(fast_counts, want)
    np.testing.assert_array_equal(stock_counts, want)


@pytest.mark.parametrize("stock", [False, True], ids=["simblocks", "stock"])
def test_a_threads_exception_is_raised_from_the_launch(stock, rng, monkeypatch):
    monkeypatch.setattr(sim_kernel, "BlockManager", simblocks.STOCK_BLOCK_MANAGER if stock else simblocks.BlockManager)
    bad = int(rng.integers(0, N))
    out = np.zeros(N)
    with pytest.raises(IndexError, match=rf"tid=\[{bad}, 0, 0\] ctaid=\[0, 0, 0\]"):
        _fail_on[1, N](rng.uniform(1, 2, N), np.array([bad]), out)
    # the next launch runs normally (no thread left blocked at a barrier)
    x = rng.uniform(1, 2, N)
    _fail_on[1, N](x, np.array([N]), out)
    np.testing.assert_array_equal(out, x)


@cuda.jit(device=True)
def _lane_value(x):
    """A device function of this module reading the launch's thread index through its ``cuda``."""
    return x[cuda.blockIdx.x * N + cuda.threadIdx.x]


@cuda.jit
def _sum_through_device_functions(x, out, bad):
    """Each block's sum through tree_sum (another module's device function, with barriers inside);
    thread bad[0] of block 1 writes past the end of out."""
    sh = cuda.shared.array(N, np.float64)
    t = cuda.threadIdx.x
    sh[t] = _lane_value(x)
    cuda.syncthreads()
    reductions.tree_sum(sh, t, N)
    if cuda.blockIdx.x == 1 and t == bad[0]:
        out[out.shape[0] + t] = 1.0
    if t == 0:
        out[cuda.blockIdx.x] = sh[0]


@pytest.mark.parametrize("stock", [False, True], ids=["simblocks", "stock"])
def test_device_function_calls_as_numba_runs_them(stock, rng, monkeypatch):
    monkeypatch.setattr(sim_kernel.FakeCUDAKernel, "__call__", simblocks.STOCK_CALL if stock else simblocks.launch)
    real = {"tests": globals()["cuda"], "reductions": reductions.cuda}
    x = rng.uniform(-1, 1, 3 * N)
    out = np.full(3, np.nan)
    _sum_through_device_functions[3, N](x, out, np.array([N]))
    np.testing.assert_allclose(out, x.reshape(3, N).sum(axis=1), rtol=1e-12)
    assert {"tests": globals()["cuda"], "reductions": reductions.cuda} == real
    bad = int(rng.integers(0, N))
    running = set(threading.enumerate())
    with pytest.raises(IndexError, match=rf"tid=\[{bad}, 0, 0\] ctaid=\[1, 0, 0\]"):
        _sum_through_device_functions[3, N](x, out, np.array([bad]))
    if stock:   # the stock call's swaps end as its aborted threads (never joined) unwind: wait for them here,
        # or they swap the modules' cuda back while the worker's next test runs
        for thread in set(threading.enumerate()) - running:
            thread.join(timeout=60)
            assert not thread.is_alive()
    assert {"tests": globals()["cuda"], "reductions": reductions.cuda} == real
    assert real["reductions"] is cuda  # numba's own module, not a launch's fake one


def test_casts_as_numba_makes_them(rng):
    from numba import types

    values = [3, -7, 2**40, 1.5, -0.0, float("nan"), True, np.int32(-5), np.uint64(2**63), np.float32(0.1),
              np.float64(rng.uniform(-1e9, 1e9)), np.int64(rng.integers(-2**31, 2**31))]

    def outcome(call, ty, v):
        try:
            return call(ty, v)
        except Exception as exc:  # numpy refuses some casts (-7 to uint64): the same refusal
            return type(exc)

    for ty in (types.uint64, types.int32, types.int64, types.float32, types.float64, types.boolean):
        for v in values:
            want, got = outcome(simblocks.STOCK_TYPE_CALL, ty, v), outcome(simblocks.cast, ty, v)
            assert type(got) is type(want), (ty, v)
            assert got is want if isinstance(want, type) else np.array_equal(got, want, equal_nan=True), (ty, v)
    # a type called on types is a signature, as in numba
    sig = types.void(types.int32[::1], types.float32)
    assert simblocks.cast(types.void, types.int32[::1], types.float32) == sig
    assert simblocks.STOCK_TYPE_CALL(types.void, types.int32[::1], types.float32) == sig
