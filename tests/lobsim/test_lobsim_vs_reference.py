"""The GPU kernels and the NumPy reference, stepped side by side on real LOBSTER data (and
on the synthetic market) with random actions: every state field after every step."""
import numpy as np
import pytest

from alpharl.reference.lobsim import ReferenceLobSim
from alpharl.sim import LobSim, SimParams, SyntheticMarket, SynthParams, drain_fills
from alpharl.sim import layout as L
from alpharl.sim.market import replay_stream
from lobsim_helpers import (AMZN5, GOOG10, check_invariants, compare_states, device_actions, poison_outputs,
                            real_market)
from support import assert_all_written

CONFIGS = {
    "amzn5-probabilistic": (AMZN5, SimParams(events_per_step=4, episode_steps=12, fills_log_capacity=32,
                                             queue_model="probabilistic", max_position=300)),
    "goog10-risk-averse-aon-latency": (GOOG10, SimParams(events_per_step=3, episode_steps=9, fills_log_capacity=32,
                                                         queue_model="risk_averse", partial_fills=False,
                                                         fee_mode="per_value", maker_fee=-2e-5, taker_fee=3e-5,
                                                         latency_events=2, force_flatten=False)),
    "synthetic": (None, SimParams(events_per_step=5, episode_steps=10, fills_log_capacity=32, latency_events=1)),
}
B = 6
STEPS = 45


def _market(name):
    return SyntheticMarket(SynthParams(levels=4, limit_rate=(9, 6, 4, 3))) if name is None else real_market(name)


@pytest.mark.parametrize("config", list(CONFIGS))
def test_gpu_matches_reference_every_step(config, rng):
    name, params = CONFIGS[config]
    market = _market(name)
    seed = int(rng.integers(1, 2**31))
    gpu = LobSim(market, params, B, seed)
    ref = ReferenceLobSim(market, params, B, seed)
    poison_outputs(gpu)
    gpu.reset()
    ref.reset()
    compare_states(gpu.state_dict(), ref.state_dict(), "reset")
    stream = None if name is None else replay_stream(market)
    last = np.zeros(B, np.int64)
    reward_sum = np.zeros(B)
    # random actions, weighted toward orders so fills, closes and refusals all happen
    weights = np.array([3, 1, 1, 2, 2, 2, 2, 1, 1], float)
    fills_seen = 0
    for t in range(STEPS):
        a = rng.choice(9, size=B, p=weights / weights.sum()).astype(np.int32)
        prev = ref.state_dict()
        poison_outputs(gpu)
        gpu.step(device_actions(a))
        ref.step(a)
        assert_all_written(gpu.obs)
        assert_all_written(gpu.out)
        now = gpu.state_dict()
        compare_states(now, ref.state_dict(), f"step {t}")
        fills, last, lost = drain_fills(gpu, last)
        assert lost == 0
        fills_seen += fills.num_rows
        check_invariants(gpu, stream, prev, now, fills, reward_sum)
    assert fills_seen > 0
    assert gpu.field("episode").sum() > 0


def test_obs_layout_is_defined_once():
    for levels in (1, 5, 10):
        assert len(L.obs_names(levels)) == L.obs_dim(levels) == 4 * levels + L.N_OBS_EXTRA
    assert len(L.STATE_I_NAMES) == L.N_STATE_I and len(L.OUT_NAMES) == L.N_OUT
