"""The PyTorch peer (benchmarks/torch_peer.py) computes alpharl's learning update: one update from the
same weights and minibatch against the float64 NumPy reference. Skipped where torch is not installed
(it is not a dependency of alpharl)."""
import numpy as np
import pytest
from support import load_benchmark

torch = pytest.importorskip("torch", reason="torch is not installed (the PyTorch peer's tests need it)")



@pytest.fixture(scope="module")
def peer():
    return load_benchmark("torch_peer")


@pytest.mark.parametrize("b, m, obs_dim", [(16, 16, 24), (8, 40, 12)])
def test_one_update_matches_the_reference(peer, b, m, obs_dim):
    r = peer.check_against_reference(b, m, obs_dim, seed=b + m)
    assert r["ok"], r
    # the check really compared something: finite losses near their initial levels (C51 ~ ln 21)
    assert abs(r["losses"]["q"] - np.log(21)) < 0.1 and all(np.isfinite(v) for v in r["losses"].values())


def test_flat_layout_round_trips(peer):
    from alpharl.nets import NetLayout

    layout = NetLayout(10, 16)
    p = np.random.default_rng(0).standard_normal(layout.n_params).astype(np.float32)
    net = peer.PeerNet(10, 16)
    peer.load_flat(net, layout, p)
    np.testing.assert_array_equal(peer.flat_of(net, layout), p.astype(np.float64))
    tgt = peer.QNet(10, 16)
    peer.load_flat(tgt, layout, p, target=True)
    np.testing.assert_array_equal(peer.flat_of(tgt, layout, target=True), p[:layout.n_target].astype(np.float64))


def test_replay_draw_is_proportional_and_weights_normalised(peer):
    n, m = 8, 4000
    rows = (np.zeros((n, 3), np.float32), np.zeros(n, np.int32), np.zeros(n, np.float32), np.zeros(n, np.float32),
            np.zeros((n, 3), np.float32))
    rep = peer.PeerReplay(*rows, "cpu")
    rep.priority[:] = torch.arange(1, n + 1, dtype=torch.float32)
    torch.manual_seed(0)
    mb = rep.draw(m, alpha=1.0, beta=0.5)
    freq = np.bincount(mb.idx.numpy(), minlength=n) / m
    np.testing.assert_allclose(freq, np.arange(1, n + 1) / (n * (n + 1) / 2), atol=2e-3)  # stratified: tight
    assert float(mb.is_weight.max()) == 1.0 and float(mb.is_weight.min()) > 0


def test_timed_step_draws_updates_and_moves_the_target(peer):
    """PeerStep.eager (what the benchmark times, here on the CPU): priorities rewritten, weights and
    target moved, everything finite."""
    from alpharl import isv as S
    from alpharl.nets import NetLayout

    b, m, d, n = 8, 8, 12, 64
    layout = NetLayout(d)
    env, _ = peer.random_batches(b, m, d, 0)
    rng = np.random.default_rng(1)
    rows = (rng.standard_normal((n, d)), rng.integers(0, 9, n), rng.standard_normal(n), np.zeros(n),
            rng.standard_normal((n, d)))
    learner = peer.PeerLearner(layout, layout.init_params(0), S.bootstrap_vector(), "cpu")
    step = peer.PeerStep(learner, peer.PeerReplay(*rows, "cpu"), peer.to_torch(env, "cpu"), m, soft=True)
    t0 = peer.flat_of(learner.target, layout, target=True)
    step.eager()
    step.eager()
    assert (step.replay.priority != 1).sum() > 0
    t1 = peer.flat_of(learner.target, layout, target=True)
    assert np.isfinite(t1).all() and np.abs(t1 - t0).max() > 0
