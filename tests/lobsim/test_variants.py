"""The step kernel LobSim launches is built for its parameters (alpharl.sim.variants): each option
turns on its own switch only, and a build with switches off steps exactly as the generic kernel."""
import numpy as np
import pytest
from numba import cuda

from alpharl.cuda_kernels.lobsim import step as k_step
from alpharl.cuda_kernels.lobsim import switches
from alpharl.cuda_kernels.lobsim.stage import step_launch
from alpharl.lobster.format import BID_PRICE
from alpharl.sim import layout as L
from alpharl.sim.lobsim import LobSim
from alpharl.sim.market import replay_stream
from alpharl.sim.params import SimParams
from alpharl.sim.variants import step_kernel, switches_for
from lobsim_helpers import compare_states, device_actions, real_market

#: Each option and the one switch it turns on.
OPTIONS = {"FEED_DELAY": dict(feed_latency_ns=1_000_000), "TIMED_ENTRY": dict(entry_latency_ns=1_000_000),
           "RESP_DELAY": dict(response_latency_ns=1_000_000), "L3_FIFO": dict(queue_model="l3_fifo"),
           "LAST_SEEN": dict(entry_queue="last_seen"), "POST_ONLY": dict(post_only=True),
           "SIGMA_PENALTY": dict(inventory_penalty_unit="sigma"),
           "QUADRATIC_PENALTY": dict(inventory_penalty_quadratic=0.2), "PEG": dict(peg_quotes=True),
           "FILLS_LOG": dict(fills_log_capacity=8)}


def _switches(params, instructions=False, synthetic=False):
    ip, _ = L.pack_params(params, 5, 100, 10_000, synthetic)
    return dict(zip(switches.NAMES, switches_for(ip, instructions)))


def test_defaults_switch_every_option_off():
    assert not any(_switches(SimParams()).values())
    assert step_kernel(tuple(True for _ in switches.NAMES)) is k_step.lobsim_step


@pytest.mark.parametrize("name", list(OPTIONS))
def test_each_option_turns_on_its_own_switch(name):
    on = _switches(SimParams(**OPTIONS[name]))
    assert [k for k, v in on.items() if v] == [name]


def test_instructions_and_synthetic_switches():
    assert [k for k, v in _switches(SimParams(), instructions=True).items() if v] == ["INSTRUCTIONS"]
    assert [k for k, v in _switches(SimParams(), synthetic=True).items() if v] == ["SYNTHETIC"]


@pytest.mark.parametrize("extra", [dict(), dict(queue_model="l3_fifo", entry_queue="last_seen", post_only=True)])
@pytest.mark.parametrize("one_each", [False, True], ids=["staged", "obs-staged"])
def test_specialized_build_steps_as_the_generic_kernel(extra, one_each, rng):
    """Default parameters (no fills log) and a few options, with and without order instructions, on a
    staged launch and on one of a thread per backtest (the block's observations stored together, a
    block of more threads than backtests): the build and the registered kernel, every state array
    after every step."""
    md = real_market(rows=1_500)
    p = SimParams(events_per_step=6, episode_steps=20, max_position=800, **extra)
    B, steps = 5, 16
    seed = int(rng.integers(1, 2**31))
    built, generic = LobSim(md, p, B, seed), LobSim(md, p, B, seed)
    generic.specialize = False
    if one_each:
        built.step_launch = step_launch(B, p.events_per_step, built.levels, per_block=8, staged=False)
    for s in (built, generic):
        s.reset()
    book = replay_stream(md).book
    for t in range(steps):
        a = rng.choice(9, size=B, p=np.array([3, 1, 1, 2, 2, 2, 2, 1, 1]) / 15).astype(np.int32)
        orders = None
        if t % 2:                            # every other step with instructions (the INSTRUCTIONS build)
            o = np.zeros((L.N_ORD, B), np.int32)
            rows = built.state_dict()["state_i"][L.S_CURSOR].astype(np.int64)
            o[L.ORD_BUY + L.OI_OP] = rng.choice([L.OP_NONE, L.OP_PLACE, L.OP_CANCEL], size=B)
            o[L.ORD_BUY + L.OI_PX] = book[rows, BID_PRICE] + rng.integers(-1, 2, size=B)
            o[L.ORD_BUY + L.OI_QTY] = 100
            o[L.ORD_MKT_QTY] = rng.choice([0, 100, -100], size=B)
            orders = o
        for s in (built, generic):
            s.step(device_actions(a), None if orders is None else cuda.to_device(orders))
        compare_states(built.state_dict(), generic.state_dict(), f"step {t}")
