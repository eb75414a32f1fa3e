"""GPU-only trainer tests: graph replay == eager launches bit for bit; same seed -> same bits;
integrated smoke at real sizes."""
import numpy as np
import pytest

from alpharl import isv as S
from alpharl.config import TrainConfig
from alpharl.lobster.sample import load_embedded
from alpharl.trainer import IntegratedTrainer

pytestmark = pytest.mark.gpu
MARKET = load_embedded()


#: The switches of the scale-free signals, all on.
SIGNALS_ON = dict(reward_norm=True, adaptive_support=True, adaptive_anchors=True)


def _run(graph: bool, steps: int, b: int = 16, seed: int = 5, rollout: int = 1, **switches):
    tr = IntegratedTrainer(TrainConfig.plain(b=b, backend="cuda", graph=graph, seed=seed, replay_capacity=4096,
                                             minibatch=64, rollout=rollout, **switches), MARKET)
    tr.run(steps)
    return tr


@pytest.mark.parametrize("rollout", [1, 4])
@pytest.mark.parametrize("switches", [{}, SIGNALS_ON, {**SIGNALS_ON, "pace_policy": True, "k_max": 2},
                                      {**SIGNALS_ON, "k_noise_band": True}, {**SIGNALS_ON, "mirror_policy": True},
                                      {**SIGNALS_ON, "mirror_policy": True, "q_target": "policy"}],
                         ids=["fixed", "signals", "paced", "k_noise", "mirror", "policy-target"])
def test_graph_and_eager_are_bit_identical(rollout, switches):
    """rollout 4: 13 steps = collect and update graphs each captured and replayed, ending mid-rollout."""
    steps = 12 if rollout == 1 else 13
    ga = _run(True, steps, rollout=rollout, **switches)
    a = ga.state_dict()
    b = _run(False, steps, rollout=rollout, **switches).state_dict()
    for k in a:
        np.testing.assert_array_equal(a[k], b[k], err_msg=k)
    if rollout > 1:
        from alpharl.cuda_kernels.nets.advantage import ENV_COLLECT, ENV_GAE

        assert ga.captured(ENV_COLLECT) is not None and ga.captured(ENV_GAE) is not None
        assert ga.read_isv()[S.RL_OBS_PPO_SAMPLES] == 0  # step 13 collected
    if switches:
        isv = a["isv"]
        assert isv[S.RL_SUPPORT_V_MAX] != 10.0 and isv[S.RL_REWARD_GAIN] != 1.0
        assert (isv[[S.RL_OBS_Q_REL_UPDATE + k for k in range(len(S.LR_SLOTS))]] > 0).all()


def test_graph_and_eager_are_bit_identical_with_rollout_rows():
    """rollout 4 at B = 16 with rollout_rows 32: each update learns from 8 backtests (stride 2), a different
    subset at each of the 13 steps' three updates, the later two replayed from the update graph (the subset
    follows the device step counter)."""
    kw = dict(rollout=4, rollout_rows=32, **SIGNALS_ON)
    ga = _run(True, 13, **kw)
    a, b = ga.state_dict(), _run(False, 13, **kw).state_dict()
    for k in a:
        np.testing.assert_array_equal(a[k], b[k], err_msg=k)
    assert ga.ops.rollout.n_sub == 8
    full, part = _run(True, 12, rollout=4, **SIGNALS_ON), _run(True, 12, **kw)  # ending on an update step
    assert not np.array_equal(part.state_dict()["nets.params"], full.state_dict()["nets.params"])
    assert full.read_isv()[S.RL_OBS_PPO_SAMPLES] == 64 and part.read_isv()[S.RL_OBS_PPO_SAMPLES] == 32


@pytest.mark.parametrize("rollout", [1, 4])
def test_same_seed_same_bits_on_gpu(rollout):
    a = _run(True, 8, rollout=rollout).state_dict()
    b = _run(True, 8, rollout=rollout).state_dict()
    for k in a:
        np.testing.assert_array_equal(a[k], b[k], err_msg=k)


@pytest.mark.parametrize("b", [1, 16])
def test_integrated_trainer_smoke_gpu(b):
    tr = _run(True, 1, b=b)
    isv = tr.read_isv()
    for s in S.SLOTS:
        assert s.lo <= isv[s.index] <= s.hi, s.name
        if s.group == "losses":
            assert np.isfinite(isv[s.index])


def test_integrated_smoke_b128_gpu():
    tr = _run(True, 3, b=128)
    isv = tr.read_isv()
    assert all(np.isfinite(isv[s.index]) for s in S.SLOTS if s.group == "losses")
    assert np.isfinite(tr.state_dict()["nets.params"]).all()


@pytest.mark.parametrize("rollout", [1, 4])
def test_resume_in_a_new_process_is_bit_identical_on_gpu(tmp_path, rollout):
    """2N graph-replayed steps == N steps, checkpoint, a new process resumes for N more (rollout 4: mid-rollout)."""
    import subprocess
    import sys

    from alpharl.checkpoint import load_checkpoint
    from alpharl.run import train

    n = 6
    kw = dict(b=16, backend="cuda", seed=2, replay_capacity=4096, minibatch=64, diag_every=2, rollout=rollout)
    train(TrainConfig.plain(steps=2 * n, run_dir=str(tmp_path / "straight"), **kw))
    train(TrainConfig.plain(steps=n, run_dir=str(tmp_path / "split"), **kw))
    code = (f"from alpharl.config import TrainConfig; from alpharl.run import train; "
            f"train(TrainConfig(steps={2 * n}, backend='cuda'), resume={str(tmp_path / 'split')!r})")
    subprocess.run([sys.executable, "-c", code], check=True, timeout=600)
    a, _ = load_checkpoint(tmp_path / "straight")
    b, meta = load_checkpoint(tmp_path / "split")
    assert meta["step"] == 2 * n
    for k in a:
        np.testing.assert_array_equal(a[k], b[k], err_msg=k)


@pytest.mark.parametrize("rollout", [1, 4])
def test_fused_update_graph_and_eager_are_bit_identical(rollout):
    """--fused-update on: the cooperative launch captured in the step's graph replays what eager steps do, and
    a second run from the same seed gives the same bits (rollout 4: the update step's first iteration runs
    the sequence with its GAE pass, the others the fused launch)."""
    steps = 12 if rollout == 1 else 13
    a = _run(True, steps, rollout=rollout, fused_update="on").state_dict()
    b = _run(False, steps, rollout=rollout, fused_update="on").state_dict()
    c = _run(True, steps, rollout=rollout, fused_update="on").state_dict()
    for k in a:
        np.testing.assert_array_equal(a[k], b[k], err_msg=k)
        np.testing.assert_array_equal(a[k], c[k], err_msg=k)
