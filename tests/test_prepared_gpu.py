"""GPU-only: prepared launches (alpharl.cuda_kernels.prepared) give the bits numba's own launches give, for
single kernels and for a trainer's eager and captured steps, and they really are taken (hits counted)."""
import numpy as np
import pytest
from numba import cuda

from alpharl import isv as S
from alpharl.config import TrainConfig
from alpharl.cuda_kernels import prepared
from alpharl.cuda_kernels.nets.adam import rl_soft_update
from alpharl.cuda_kernels.reductions import REDUCE_BLOCK, rl_l2_norm
from alpharl.cuda_kernels.step_ops import STEP_OPS_BLOCK, rl_scale
from alpharl.lobster.sample import load_embedded
from alpharl.sizes import cdiv
from alpharl.trainer import IntegratedTrainer

pytestmark = pytest.mark.gpu


def _both_ways(monkeypatch, launch, outputs, fill):
    """``launch()`` through numba, then prepared (once to prepare it, once more prepared): the outputs
    (device arrays, reset to ``fill`` before each run, so the same objects) after each way."""
    results = []
    for switch in ("0", "1", "1"):
        monkeypatch.setenv(prepared.ENV_VAR, switch)
        for o in outputs:
            o.copy_to_device(np.full(o.shape, fill, o.dtype))
        launch()
        cuda.synchronize()
        results.append([o.copy_to_host() for o in outputs])
    return results


def test_single_kernels_bit_identical_both_ways(monkeypatch, rng):
    n = 5000
    x = cuda.to_device(rng.standard_normal(n).astype(np.float32))
    online = cuda.to_device(rng.standard_normal(n).astype(np.float32))
    isv = S.bootstrap_vector()
    isv[S.RL_TARGET_TAU] = 0.37
    isv_d = cuda.to_device(isv)
    out, norm, target = cuda.device_array(n, np.float32), cuda.device_array(3, np.float32), cuda.device_array(
        n, np.float32)
    stream = cuda.stream()

    def launch():
        rl_scale[cdiv(n, STEP_OPS_BLOCK), STEP_OPS_BLOCK, stream](x, np.int32(n), np.float32(-1.75), out)
        rl_l2_norm[1, REDUCE_BLOCK, stream](x, np.int32(n - 7), norm, np.int32(1))
        rl_soft_update[cdiv(n, 256), 256, stream](target, online, np.int32(n), isv_d)

    prepared.COUNTS.reset()
    numba_way, first, again = _both_ways(monkeypatch, launch, (out, norm, target), 0.5)
    for a, b, c in zip(numba_way, first, again):
        np.testing.assert_array_equal(a.view(np.uint32), b.view(np.uint32))
        np.testing.assert_array_equal(a.view(np.uint32), c.view(np.uint32))
    assert prepared.COUNTS.hits == 3 and prepared.COUNTS.misses == 3
    np.testing.assert_array_equal(numba_way[0], x.copy_to_host() * np.float32(-1.75))


def _trainer(graph: bool, steps: int, seed: int = 11):
    tr = IntegratedTrainer(TrainConfig.plain(b=16, backend="cuda", graph=graph, seed=seed, replay_capacity=4096,
                                             minibatch=64), load_embedded())
    tr.run(steps)
    return tr.state_dict()


@pytest.mark.parametrize("graph", [False, True], ids=["eager", "graph"])
def test_trainer_same_bits_with_and_without_prepared_launches(monkeypatch, graph):
    monkeypatch.setenv(prepared.ENV_VAR, "0")
    prepared.COUNTS.reset()
    a = _trainer(graph, 6)
    assert prepared.COUNTS.hits == prepared.COUNTS.misses == 0
    monkeypatch.setenv(prepared.ENV_VAR, "1")
    b = _trainer(graph, 6)
    for k in a:
        np.testing.assert_array_equal(a[k], b[k], err_msg=k)
    c = prepared.COUNTS
    assert c.hits > 0, (c.hits, c.misses, c.unprepared)
    if not graph:
        # 6 eager steps: from the second on, nearly all of a step's launches are the first step's again
        assert c.hits > 3 * (c.misses + c.unprepared), (c.hits, c.misses, c.unprepared)
