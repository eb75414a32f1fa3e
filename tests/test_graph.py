"""Side branches (alpharl.graph.Branches): eager order and, on a GPU, parallel branches of a captured graph."""
import numpy as np
import pytest
from numba import cuda

from alpharl import target
from alpharl.cuda_kernels.step_ops import STEP_OPS_BLOCK, rl_scale
from alpharl.graph import Branches

N = 300


def _chain_with_branches(stream, br, x, a, b, c):
    """main: a = 2x; [branch 0] b = 3a; main: c = 5a, c = 7c; join: the branch ran beside two launches."""
    grid = (N + STEP_OPS_BLOCK - 1) // STEP_OPS_BLOCK
    rl_scale[grid, STEP_OPS_BLOCK, stream](x, np.int32(N), np.float32(2.0), a)
    side = br.fork(0)
    rl_scale[grid, STEP_OPS_BLOCK, side](a, np.int32(N), np.float32(3.0), b)
    rl_scale[grid, STEP_OPS_BLOCK, stream](a, np.int32(N), np.float32(5.0), c)
    rl_scale[grid, STEP_OPS_BLOCK, stream](c, np.int32(N), np.float32(7.0), c)
    br.join(0)


def test_branches_order_the_work(rng):
    stream = cuda.stream()
    br = Branches(stream, 1)
    x = rng.uniform(0.5, 1.5, N).astype(np.float32)
    bufs = [cuda.device_array(N, np.float32) for _ in range(3)]
    _chain_with_branches(stream, br, cuda.to_device(x), *bufs)
    stream.synchronize()
    a, b, c = (v.copy_to_host() for v in bufs)
    np.testing.assert_array_equal(a, x * np.float32(2))
    np.testing.assert_array_equal(b, a * np.float32(3))
    np.testing.assert_array_equal(c, (a * np.float32(5)) * np.float32(7))


@pytest.mark.skipif(target.on_simulator(), reason="needs a real GPU: graphs are captured by the CUDA driver")
def test_captured_branches_are_parallel_and_replay_the_same(rng):
    from alpharl.graph import CapturedGraph

    stream = cuda.stream()
    br = Branches(stream, 1)
    x = cuda.to_device(rng.uniform(0.5, 1.5, N).astype(np.float32))
    bufs = [cuda.device_array(N, np.float32) for _ in range(3)]
    _chain_with_branches(stream, br, x, *bufs)  # compile before the capture
    stream.synchronize()
    want = [v.copy_to_host() for v in bufs]
    for v in bufs:
        v.copy_to_device(np.full(N, np.nan, np.float32))
    g = CapturedGraph(stream, lambda: _chain_with_branches(stream, br, x, *bufs))
    assert (g.n_nodes, g.critical_path()) == (4, 3)  # the branch's launch is beside the main chain's two
    g.replay()
    stream.synchronize()
    for v, w in zip(bufs, want):
        np.testing.assert_array_equal(v.copy_to_host(), w)
    g.close()
