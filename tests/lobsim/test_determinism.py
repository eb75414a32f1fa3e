"""Same seed, same run; checkpoints restore bit-identically; invariants over a long run of
the reference on real data (the kernels match it step for step, test_lobsim_vs_reference)."""
import numpy as np
import pytest

from alpharl.reference.lobsim import ReferenceLobSim
from alpharl.sim.fills import drain_fills
from alpharl.sim.lobsim import LobSim
from alpharl.sim.market import replay_stream
from alpharl.sim.params import SimParams
from lobsim_helpers import check_invariants, device_actions, real_market

PARAMS = SimParams(events_per_step=3, episode_steps=8, fills_log_capacity=16, latency_events=1)


def _run(sim, acts, reset=True):
    if reset:
        sim.reset()
    for a in acts:
        sim.step(device_actions(a))
    return sim.state_dict()


@pytest.mark.slow
def test_same_seed_same_run(rng):
    market = real_market(rows=1_500)
    acts = rng.integers(0, 9, size=(12, 4)).astype(np.int32)  # 1.5 episodes: an auto-reset inside
    seed = int(rng.integers(1, 2**31))
    sim = LobSim(market, PARAMS, 4, seed)
    first = _run(sim, acts)
    again = _run(sim, acts)                                      # reset() restarts the same run
    other = _run(LobSim(market, PARAMS, 4, seed), acts)
    for k in first:
        np.testing.assert_array_equal(first[k], again[k], err_msg=k)
        np.testing.assert_array_equal(first[k], other[k], err_msg=k)
    different = _run(LobSim(market, PARAMS, 4, seed + 1), acts)
    assert not np.array_equal(first["state_i"], different["state_i"])


def test_checkpoint_roundtrip_continues_identically(rng):
    market = real_market(rows=1_500)
    acts = rng.integers(0, 9, size=(16, 4)).astype(np.int32)
    sim = LobSim(market, PARAMS, 4, 9)
    _run(sim, acts[:8])
    ckpt = sim.state_dict()
    straight = _run(sim, acts[8:], reset=False)
    fresh = LobSim(market, PARAMS, 4, 1234)
    fresh.load_state_dict(ckpt)
    resumed = _run(fresh, acts[8:], reset=False)
    for k in straight:
        np.testing.assert_array_equal(straight[k], resumed[k], err_msg=k)


def test_invariants_long_run_on_real_data(rng):
    market = real_market(rows=4_000, start=60_000)
    params = SimParams(events_per_step=6, episode_steps=20, fills_log_capacity=64, max_position=300,
                       queue_model="probabilistic", latency_events=int(rng.integers(0, 3)))
    B = 12
    sim = ReferenceLobSim(market, params, B, int(rng.integers(1, 2**31)))
    sim.reset()
    stream = replay_stream(market)
    last, reward_sum = np.zeros(B, np.int64), np.zeros(B)
    weights = np.array([4, 1, 1, 2, 2, 2, 2, 1, 1], float)
    n_fills = n_done = 0
    for _ in range(250):
        prev = sim.state_dict()
        sim.step(rng.choice(9, size=B, p=weights / weights.sum()).astype(np.int32))
        fills, last, lost = drain_fills(sim, last)
        assert lost == 0
        check_invariants(sim, stream, prev, sim.state_dict(), fills, reward_sum)
        n_fills += fills.num_rows
        n_done += int(sim.done.sum())
    assert n_fills > 100 and n_done > 50
