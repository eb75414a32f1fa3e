"""The training step over several files (one simulator stream each): the kernels (sim backend) agree
with the numpy backend, the checkpoint carries every stream, and on a GPU graph replay equals eager
launches bit for bit."""
import numpy as np
import pytest

from alpharl import target
from alpharl.config import TrainConfig
from alpharl.lobster.load import load_lobster
from alpharl.lobster.sample import load_embedded
from alpharl.sim.params import SimParams
from alpharl.trainer import IntegratedTrainer
from support import GOOG5, cut_path


def _markets():
    return load_embedded().window(0, 3000), load_lobster(cut_path(GOOG5)).window(0, 2400)


def _cfg(**kw):
    base = dict(b=3, backend="numpy", minibatch=4, replay_capacity=64, seed=6, sim=SimParams(episode_steps=40))
    return TrainConfig.plain(**(base | kw))


def test_numpy_trainer_over_two_files_runs_and_checkpoints():
    tr = IntegratedTrainer(_cfg(), _markets())
    tr.run(3)
    d = tr.state_dict()
    assert d["sim.backtest_stream"].tolist() == [0, 1, 0] and d["acc_streams"].shape == (2, 4)
    assert len(tr.stream_metrics()) == 2
    again = IntegratedTrainer(_cfg(), _markets())
    again.load_state_dict(d)
    tr.run(2)
    again.run(2)
    for k, v in tr.state_dict().items():
        np.testing.assert_array_equal(again.state_dict()[k], v, err_msg=k)


@pytest.mark.slow
@pytest.mark.skipif(target.on_simulator() is False, reason="the sim backend needs the CUDA simulator")
def test_one_step_over_two_files_numpy_and_kernels_agree():
    """One training step over two files from the same state: the kernels (the streams' gather and
    scatter, each stream's lobsim_step, the per-file run totals) and the NumPy references agree."""
    kw = dict(b=2, minibatch=2, replay_capacity=8)
    ref = IntegratedTrainer(_cfg(**kw), _markets(), hidden=16)
    dev = IntegratedTrainer(_cfg(backend="sim", **kw), _markets(), hidden=16)
    ref.step()
    dev.step()
    sr, sd = ref.state_dict(), dev.state_dict()
    sim_keys = [k for k in sr if k.startswith("sim.")]
    assert "sim.s1.state_i" in sim_keys and "sim.backtest_stream" in sim_keys
    for k in sim_keys:
        if sr[k].dtype.kind in "iu":
            np.testing.assert_array_equal(sd[k], sr[k], err_msg=k)
        else:
            np.testing.assert_allclose(sd[k], sr[k], rtol=2e-6, atol=1e-6, err_msg=k)
    np.testing.assert_allclose(sd["acc_streams"], sr["acc_streams"], rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(dev.read_isv(), ref.read_isv(), rtol=2e-3, atol=1e-5)


@pytest.mark.gpu
def test_graph_and_eager_are_bit_identical_over_three_files():
    markets = _markets() + (load_embedded().window(10_000, 20_000),)

    def run(graph):
        tr = IntegratedTrainer(TrainConfig.plain(b=16, backend="cuda", graph=graph, seed=5, replay_capacity=4096,
                                           minibatch=64, sim=SimParams(episode_steps=40)), markets)
        tr.run(12)
        return tr.state_dict()

    a, b = run(True), run(False)
    assert a["sim.backtest_stream"].tolist() == [i % 3 for i in range(16)]
    for k in a:
        np.testing.assert_array_equal(a[k], b[k], err_msg=k)
    assert a["acc_streams"][:, 3].sum() == pytest.approx(a["acc"][3], rel=1e-9, abs=1e-9)
