"""benchmarks/step_dag.py: the graph shape of a step from its launch order, without a GPU. It reads a
forked chain as a captured graph does, and puts the step's first PER draw and its insert off the critical
path (beside acting and the simulator; behind the last priority update)."""
import numpy as np
import pytest
from numba import cuda
from support import load_benchmark
from test_graph import _chain_with_branches

from alpharl import target
from alpharl.config import TrainConfig
from alpharl.graph import Branches, chain_depths
from alpharl.lobster.sample import load_embedded
from alpharl.trainer import IntegratedTrainer

step_dag = load_benchmark("step_dag")


def test_chain_depths():
    # a diamond with a tail: 0 -> 1 -> 3, 0 -> 2 -> 3, 3 -> 4; 5 alone
    d = chain_depths(range(6), [(0, 1), (0, 2), (1, 3), (2, 3), (3, 4)])
    assert d == {0: 1, 1: 2, 2: 2, 3: 3, 4: 4, 5: 1}


def test_a_forked_chain_has_the_captured_graphs_shape():
    """tests/test_graph.py's chain, which a GPU capture gives 4 nodes and a 3-node critical path."""
    stream = cuda.stream()
    bufs = [cuda.device_array(3, np.float32) for _ in range(4)]
    with step_dag.recording(step_dag.StepDag()) as dag:
        _chain_with_branches(stream, Branches(stream, 1), *bufs)
    assert (len(dag.names), max(dag.depths())) == (4, 3)


@pytest.mark.skipif(target.on_simulator() is False, reason="records the step's launches under the CUDA simulator")
def test_the_first_draw_and_the_insert_are_off_the_critical_path():
    tr = IntegratedTrainer(TrainConfig.plain(b=4, backend="sim", minibatch=16, replay_capacity=64, k_max=1),
                           load_embedded(), hidden=16)
    tr.steps_done = 1
    dag = step_dag.step_dag(tr)
    depth = dict(zip(dag.names, dag.depths()))  # every kernel below launches once at K = 1
    assert dag.names.count("rl_per_gather") == dag.names.count("rl_per_insert") == 1
    # the draw branch ends before the acting and simulator chain, which alone the update's first node waits for
    assert max(depth[k] for k in ("rl_per_build_cdf", "rl_per_sample", "rl_per_gather")) < depth["rl_scale"]
    assert depth["rl_stack_obs"] == depth["rl_scale"] + 1
    # the insert's branch behind the priority update is no longer than the main chain's tail
    assert depth["rl_per_advance"] <= depth["rl_soft_update"] == max(dag.depths())
    with pytest.raises(ValueError, match="past its first step"):
        step_dag.step_dag(IntegratedTrainer(TrainConfig.plain(b=4, backend="sim", minibatch=16, replay_capacity=64),
                                            load_embedded(), hidden=16))
