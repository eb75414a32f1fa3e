"""The GPU kernels and the NumPy reference, stepped side by side on real LOBSTER data (and
on the synthetic market) with random actions: every state field after every step."""
import numpy as np
import pytest

from alpharl.cuda_kernels.lobsim.stage import STAGE_SMEM_BYTES, stage_ints, step_launch
from alpharl.reference.lobsim import ReferenceLobSim
from alpharl.sim import layout as L
from alpharl.sim.fills import drain_fills
from alpharl.sim.lobsim import LobSim
from alpharl.sim.market import SyntheticMarket, replay_stream, time_ns
from alpharl.sim.params import SimParams, SynthParams
from lobsim_helpers import check_invariants, compare_states, device_actions, poison_outputs, real_market
from support import AMZN5, GOOG1, GOOG10, assert_all_written

CONFIGS = {
    "amzn5-probabilistic": (AMZN5, SimParams(events_per_step=4, episode_steps=12, fills_log_capacity=32,
                                             queue_model="probabilistic", max_position=300)),
    "goog10-risk-averse-aon-latency": (GOOG10, SimParams(events_per_step=3, episode_steps=9, fills_log_capacity=32,
                                                         queue_model="risk_averse", fill_rule="all_or_nothing",
                                                         fee_mode="per_value", maker_fee=-2e-5, taker_fee=3e-5,
                                                         latency_events=2, force_flatten=False)),
    "synthetic": (None, SimParams(events_per_step=5, episode_steps=10, fills_log_capacity=32, latency_events=1)),
    # hftbacktest's rules (benchmarks/vs_hftbacktest.py) on one level, where prices leave the view often
    "goog1-matched-rules": (GOOG1, SimParams(events_per_step=3, episode_steps=9, fills_log_capacity=32,
                                             queue_model="risk_averse", fill_rule="whole_order", post_only=True,
                                             entry_queue="last_seen", off_tick_trades="nearest", latency_events=2)),
    # price-time priority from LOBSTER's order ids
    "amzn5-l3-fifo": (AMZN5, SimParams(events_per_step=4, episode_steps=12, fills_log_capacity=32,
                                       queue_model="l3_fifo", fill_rule="all_or_nothing", latency_events=1)),
    # latencies in the data's time: entry ~ a few events, the feed several events behind
    "amzn5-latency-in-time": (AMZN5, SimParams(events_per_step=4, episode_steps=12, fills_log_capacity=32,
                                               entry_latency_ns=300_000_000, feed_latency_ns=800_000_000,
                                               max_position=300)),
    # the own position and orders reaching the agent a response latency late (several step ends back,
    # some past the own-state ring in episodes longer than it), beside a feed latency
    "amzn5-response-latency": (AMZN5, SimParams(events_per_step=2, episode_steps=24, episode_end="horizon",
                                                fills_log_capacity=32, response_latency_ns=1_000_000_000,
                                                feed_latency_ns=100_000_000, latency_events=1, max_position=300)),
    # cancel-and-replace at the same price, with the replaced order travelling an entry latency in time
    "amzn5-requote-replace": (AMZN5, SimParams(events_per_step=4, episode_steps=12, fills_log_capacity=32,
                                               requote="replace", entry_latency_ns=300_000_000, max_position=300)),
    # pegged quotes following the touch (re-sent across an entry latency, with last-seen queues), horizon
    # episodes so that quotes rest long enough to be moved
    "amzn5-peg": (AMZN5, SimParams(events_per_step=4, episode_steps=12, fills_log_capacity=32, peg_quotes=True,
                                   episode_end="horizon", latency_events=1, entry_queue="last_seen",
                                   max_position=300)),
    # and refilled after their fills (up to the position limit), as the pegged study settings' option
    "goog1-peg-refill-requote-replace": (GOOG1, SimParams(events_per_step=6, episode_steps=12, fills_log_capacity=32,
                                                          peg_quotes=True, refill_quotes=True, requote="replace",
                                                          entry_latency_ns=300_000_000, max_position=300)),
    "synthetic-peg": (None, SimParams(events_per_step=5, episode_steps=10, fills_log_capacity=32, latency_events=1,
                                      peg_quotes=True, episode_end="horizon")),
    # round trips that do not end the episode, marked to mid at its end, and a holding penalty
    "amzn5-horizon-penalty": (AMZN5, SimParams(events_per_step=4, episode_steps=12, fills_log_capacity=32,
                                               episode_end="horizon", force_flatten=False,
                                               inventory_penalty=0.37, max_position=300)),
    # horizon episodes on the synthetic market, with the holding penalty in units of its own volatility
    "synthetic-horizon-sigma-penalty": (None, SimParams(events_per_step=5, episode_steps=10, fills_log_capacity=32,
                                                        episode_end="horizon", latency_events=1,
                                                        inventory_penalty=0.25, inventory_penalty_unit="sigma")),
    # the holding penalty in units of the backtest's own running volatility of the mid (carried across
    # the episodes that round trips end)
    "amzn5-sigma-penalty": (AMZN5, SimParams(events_per_step=4, episode_steps=12, fills_log_capacity=32,
                                             inventory_penalty=0.6, inventory_penalty_unit="sigma",
                                             max_position=300)),
}
B = 6
STEPS = 30


def _market(name, rows):
    return SyntheticMarket(SynthParams(levels=4, limit_rate=(9, 6, 4, 3))) if name is None else real_market(name,
                                                                                                           rows=rows)


def _run_against_reference(name, params, rng, launch=None, steps=STEPS, rows=3_000):
    """Step the kernels (with ``launch`` overriding lobsim_step's launch configuration) and the
    reference side by side with random actions, on ``rows`` events of the file ``name``; every
    state field, output and fill after every step."""
    market = _market(name, rows)
    seed = int(rng.integers(1, 2**31))
    gpu = LobSim(market, params, B, seed)
    ref = ReferenceLobSim(market, params, B, seed)
    if launch is not None:
        gpu.step_launch = launch(gpu.levels)
    poison_outputs(gpu)
    gpu.reset()
    ref.reset()
    compare_states(gpu.state_dict(), ref.state_dict(), "reset")
    stream = None if name is None else replay_stream(market, params.off_tick_trades)
    times = None if name is None else time_ns(market)
    last = np.zeros(B, np.int64)
    reward_sum = np.zeros(B)
    pnl_sum = np.zeros(B)
    # random actions, weighted toward orders so fills, closes and refusals all happen
    weights = np.array([3, 1, 1, 2, 2, 2, 2, 1, 1], float)
    fills_seen = 0
    t = 0
    # `steps` steps, and on past them (up to 4 x steps) while no round trip has closed yet: with some seeds a
    # slow configuration (latencies in time) closes none in `steps` (about 1 seed in 60), and the closes
    # are part of what is compared
    while t < steps or (t < 4 * steps and ref.state_i[L.STATE_I_NAMES.index("trips")].sum() == 0):
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
        check_fill_records(fills, times)
        fills_seen += fills.num_rows
        check_invariants(gpu, stream, prev, now, fills, reward_sum, pnl_sum)
        t += 1
    assert fills_seen > 0
    assert gpu.field("episode").sum() > 0
    assert gpu.field("trips").sum() > 0


def check_fill_records(fills, times) -> None:
    """Each fill's time is its event row's (``times``; None: the synthetic market, no time); the queue
    ahead at a fill is at most the one when the order went live (it never grows), 0 for takers."""
    rows = fills.column("event_row").to_numpy()
    got = fills.column("time_ns")
    if times is None:
        assert got.null_count == fills.num_rows
    else:
        assert got.null_count == 0 and (got.to_numpy() == times[rows]).all()
    at_fill, qa0 = fills.column("queue_at_fill").to_numpy(), fills.column("queue_ahead").to_numpy()
    maker = fills.column("maker").to_numpy(zero_copy_only=False)
    assert (at_fill[~maker] == 0).all() and (0 <= at_fill).all() and (at_fill <= qa0).all()


@pytest.mark.slow
@pytest.mark.parametrize("config", list(CONFIGS))
def test_gpu_matches_reference_every_step(config, rng):
    _run_against_reference(*CONFIGS[config], rng)


@pytest.mark.slow
def test_one_pass_matches_reference(rng):
    """episode_steps = 0 on 43 events: two passes of 10 steps (each truncated at the data's end and
    restarted at its first row) and a few steps of a third."""
    params = SimParams(events_per_step=4, episode_steps=0, episode_end="horizon", fills_log_capacity=32,
                       max_position=300)
    _run_against_reference(AMZN5, params, rng, steps=23, rows=43)


@pytest.mark.slow
@pytest.mark.parametrize("config", ["amzn5-probabilistic", "synthetic"])
@pytest.mark.parametrize("staged", [True, False])
def test_launch_configurations_match_reference(config, staged, rng):
    """Four backtests per block (a second, partial block) and, staged, shared memory for two
    events per pass (the step's E = 4 / 5 events in 2 / 3 passes, the last one short), so the
    chunked staging, the early end of the passes and the copy of the step's last row all run;
    unstaged, the walk reads the global tables."""
    name, params = CONFIGS[config]

    def launch(levels):
        sl = step_launch(B, params.events_per_step, levels, per_block=4, threads=32,
                         smem_bytes=4 * stage_ints(4, 2, levels), staged=staged)
        assert (sl.grid, sl.per_block, sl.chunk) == (2, 4, 2 if staged else 0)
        return sl

    _run_against_reference(name, params, rng, launch=launch, steps=25)


def test_step_launch_fits_shared_memory():
    for n, events, levels, pb in ((16, 16, 5, None), (4096, 64, 10, 32), (7, 1, 50, None), (100, 16, 50, 32)):
        sl = step_launch(n, events, levels, per_block=pb, staged=True)
        assert sl.smem_bytes == 4 * stage_ints(sl.per_block, sl.chunk, levels) <= STAGE_SMEM_BYTES
        assert 1 <= sl.chunk <= events and sl.per_block <= min(n, sl.threads)
        assert sl.grid * sl.per_block >= n > (sl.grid - 1) * sl.per_block
        # the chunk is the largest that fits (or all the step's events)
        assert sl.chunk == events or 4 * stage_ints(sl.per_block, sl.chunk + 1, levels) > STAGE_SMEM_BYTES
    assert step_launch(100, 16, 50, per_block=32, staged=True).per_block == 16     # halved to fit one event
    direct = step_launch(65536, 16, 5, staged=False)
    assert direct.chunk == 0 and direct.smem_bytes == 0 and direct.grid * direct.per_block == 65536


def test_obs_layout_is_defined_once():
    for levels in (1, 5, 10):
        assert len(L.obs_names(levels)) == L.obs_dim(levels) == 4 * levels + L.N_OBS_EXTRA
    assert len(L.STATE_I_NAMES) == L.N_STATE_I and len(L.OUT_NAMES) == L.N_OUT
