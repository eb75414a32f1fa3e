"""Data-parallel ranks without several GPUs: G virtual ranks in one process (NumpyRanks, one thread
each) on the numpy backend, the sync points' kernels against their references, and the G = 1 path
through the communicator against the plain single-rank path, bit for bit."""
import threading

import numpy as np
import pytest

from alpharl import isv as S
from alpharl.comm import NumpyRanks, RankError, SingleRank, ThreadChannel, ThreadHub, virtual_group
from alpharl.config import ConfigError, TrainConfig
from alpharl.cuda_kernels import ranks as K
from alpharl.lobster.sample import load_embedded
from alpharl.prng import rank_seed
from alpharl.ranks import LEARN_SLOTS, SIGNAL_SLOTS, check_identical, rank_config, state_digest
from alpharl.reference import ranks as R
from alpharl.trainer import IntegratedTrainer

MARKET = load_embedded()
HIDDEN = 16
STEPS = 4


def _cfg(**kw):
    return TrainConfig(**(dict(b=8, backend="numpy", minibatch=16, replay_capacity=256, seed=3) | kw))


def _run_ranks(trainers, hub, steps=STEPS):
    """Step every rank's trainer in its own thread; the first failure is raised here."""
    errors = []

    def work(tr):
        try:
            tr.run(steps)
        except BaseException as exc:  # noqa: BLE001 - handed to the test
            errors.append(exc)
            hub.abort()

    threads = [threading.Thread(target=work, args=(tr,)) for tr in trainers]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if errors:
        raise errors[0]


class SpyRanks(NumpyRanks):
    """NumpyRanks that keeps what each all-reduce was given and what it gave back."""

    def __init__(self, channel):
        super().__init__(channel)
        self.calls = []

    def allreduce_sum(self, array, stream=None):
        given = np.array(array, copy=True)
        super().allreduce_sum(array, stream)
        self.calls.append((given, np.array(array, copy=True)))


def _group(g, cls=NumpyRanks):
    hub = ThreadHub(g, timeout=60)
    return [cls(ThreadChannel(hub, r)) for r in range(g)], hub


def test_g1_through_the_communicator_is_the_plain_path_bit_for_bit():
    plain = IntegratedTrainer(_cfg(), MARKET, hidden=HIDDEN)
    plain.run(STEPS)
    comms, hub = _group(1, SpyRanks)
    one = IntegratedTrainer(rank_config(_cfg()), MARKET, hidden=HIDDEN, comm=comms[0])
    one.run(STEPS)
    assert comms[0].calls, "the G = 1 group went through the all-reduce"
    a, b = plain.state_dict(), one.state_dict()
    assert a.keys() == b.keys()
    for k in a:
        np.testing.assert_array_equal(a[k], b[k], err_msg=k)


def test_single_rank_adds_nothing_to_the_step():
    tr = IntegratedTrainer(_cfg(), MARKET, hidden=HIDDEN, comm=SingleRank())
    assert tr.ops.ranks is None


@pytest.mark.parametrize("g, switches", [(2, {}), (4, {}), (2, {"mirror_policy": True})],
                         ids=["g2", "g4", "g2-mirror"])
def test_virtual_ranks_stay_identical_and_reduce_to_the_sum(g, switches):
    cfg = _cfg(gpus=g, **switches)
    comms, hub = _group(g, SpyRanks)
    trainers = [IntegratedTrainer(rank_config(cfg), MARKET, hidden=HIDDEN, comm=c) for c in comms]
    assert all(t.B == cfg.b // g for t in trainers)
    _run_ranks(trainers, hub)
    # weights (with Adam state and target) and ISV: the same bits on every rank
    assert len({state_digest(t) for t in trainers}) == 1
    isvs = [t.read_isv() for t in trainers]
    for isv in isvs[1:]:
        np.testing.assert_array_equal(isv, isvs[0])
    # ... while each rank stepped its own backtests
    sims = [{k: v for k, v in t.state_dict().items() if k.startswith("sim.")} for t in trainers]
    assert any(not np.array_equal(sims[0][k], sims[1][k]) for k in sims[0])
    # at every all-reduce: each rank got the sum, in rank order, of what the ranks gave
    n_grad = trainers[0].ops.layout.n_params
    n_calls = len(comms[0].calls)
    assert n_calls >= 2 * STEPS and all(len(c.calls) == n_calls for c in comms)
    learn_calls = 0
    for i in range(n_calls):
        given = [c.calls[i][0] for c in comms]
        total = given[0].copy()
        for x in given[1:]:
            total += x
        for c in comms:
            np.testing.assert_array_equal(c.calls[i][1], total)
        if given[0].size == n_grad + len(LEARN_SLOTS):  # the update's hook: the ranks' own gradients differ
            learn_calls += 1
            assert not np.array_equal(given[0][:n_grad], given[1][:n_grad])
        else:
            assert given[0].size == len(SIGNAL_SLOTS)
    assert learn_calls >= STEPS


def test_the_reduced_gradient_is_what_adam_steps_with():
    """After the hook the update's gradient is the ranks' mean: every rank's weights move the same."""
    cfg = _cfg(gpus=2, k_max=1)
    comms, hub = _group(2, SpyRanks)
    trainers = [IntegratedTrainer(rank_config(cfg), MARKET, hidden=HIDDEN, comm=c) for c in comms]
    _run_ranks(trainers, hub, steps=1)
    n_grad = trainers[0].ops.layout.n_params
    (given0, summed), = [c for c in comms[0].calls if c[0].size == n_grad + len(LEARN_SLOTS)]
    given1 = comms[1].calls[0][0]
    np.testing.assert_array_equal(summed[:n_grad], given0[:n_grad] + given1[:n_grad])
    isv = trainers[0].read_isv()
    np.testing.assert_array_equal(isv[list(LEARN_SLOTS)][np.isin(LEARN_SLOTS, (S.RL_LOSS_Q,))],
                                  summed[n_grad:][np.isin(LEARN_SLOTS, (S.RL_LOSS_Q,))] * np.float32(0.5))


def test_a_failing_rank_releases_the_others():
    comms, hub = virtual_group(2, timeout=60)
    errors = []

    def other():
        try:
            comms[1].allreduce_sum(np.ones(3, np.float32))
        except RankError as exc:
            errors.append(exc)

    t = threading.Thread(target=other)
    t.start()
    hub.abort()  # rank 0 failed before its all-reduce
    t.join(timeout=30)
    assert not t.is_alive() and len(errors) == 1 and "another rank stopped" in str(errors[0])


def test_first_mismatch_names_the_rank():
    comms, hub = virtual_group(3, timeout=60)
    out = [None] * 3
    values = ["a", "a", "b"]

    def work(r):
        out[r] = comms[r].first_mismatch(values[r])

    threads = [threading.Thread(target=work, args=(r,)) for r in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert out == [2, 2, 2]


def test_rank_seeds():
    assert rank_seed(7, 0) == 7
    seeds = {rank_seed(7, r) for r in range(8)}
    assert len(seeds) == 8 and all(0 <= s < 2**31 for s in seeds)


@pytest.mark.parametrize("gate", [0, 1])
def test_pack_and_unpack_kernels_match_their_references(rng, gate):
    from numba import cuda

    n_grad, slots = 300, np.array(LEARN_SLOTS, np.int32)
    grads, isv = rng.standard_normal(n_grad).astype(np.float32), rng.standard_normal(S.RL_SLOTS_END).astype(np.float32)
    g = np.array([gate], np.int32)
    n = n_grad + slots.size
    grid = ((n + K.RANK_BLOCK - 1) // K.RANK_BLOCK, K.RANK_BLOCK)
    stage_ref = rng.standard_normal(n).astype(np.float32)
    d_stage = cuda.to_device(stage_ref.copy())
    R.rl_rank_pack(g, grads, n_grad, isv, slots, slots.size, stage_ref)
    K.rl_rank_pack[grid](cuda.to_device(g), cuda.to_device(grads), np.int32(n_grad), cuda.to_device(isv),
                         cuda.to_device(slots), np.int32(slots.size), d_stage)
    np.testing.assert_array_equal(d_stage.copy_to_host(), stage_ref)
    summed = rng.standard_normal(n).astype(np.float32)
    g_ref, isv_ref = grads.copy(), isv.copy()
    d_g, d_isv = cuda.to_device(grads), cuda.to_device(isv)
    R.rl_rank_unpack(g, summed, n_grad, slots, slots.size, np.float32(0.25), g_ref, isv_ref)
    K.rl_rank_unpack[grid](cuda.to_device(g), cuda.to_device(summed), np.int32(n_grad), cuda.to_device(slots),
                           np.int32(slots.size), np.float32(0.25), d_g, d_isv)
    np.testing.assert_array_equal(d_g.copy_to_host(), g_ref)
    np.testing.assert_array_equal(d_isv.copy_to_host(), isv_ref)
    assert np.array_equal(g_ref, grads) == (gate == 0)


def test_config_gpus_must_divide_b():
    with pytest.raises(ConfigError, match="--b 6 does not divide by --gpus 4"):
        _cfg(b=6, gpus=4).validate()
    with pytest.raises(ConfigError, match="--gpus 0"):
        _cfg(gpus=0).validate()


def test_ranks_that_differ_stop_with_one_line():
    cfg = _cfg(gpus=2)
    comms, hub = _group(2)
    trainers = [IntegratedTrainer(rank_config(cfg), MARKET, hidden=HIDDEN, comm=c) for c in comms]
    _run_ranks(trainers, hub, steps=1)
    trainers[1].ops.nets.state["params"][0] += np.float32(1.0)  # rank 1's weights drift
    errors = [None, None]

    def check(r):
        try:
            check_identical(comms[r], trainers[r], 1)
        except RankError as exc:
            errors[r] = str(exc)

    threads = [threading.Thread(target=check, args=(r,)) for r in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors[0] == errors[1] == "step 1: rank 1's weights or ISV differ from rank 0's; stopped"
