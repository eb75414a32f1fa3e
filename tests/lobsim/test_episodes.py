"""Episode structure and the learning reward (SimParams.episode_end, episode_steps = 0,
inventory_penalty): hand-made markets whose outcome is known exactly, the kernels against the
reference step by step, and the defaults pinned bit for bit to the simulator before the options."""
import dataclasses
import hashlib

import numpy as np
import pytest

from alpharl import actions as A
from alpharl.lobster.sample import load_embedded
from alpharl.reference.lobsim import ReferenceLobSim
from alpharl.sim import layout as L
from alpharl.sim.driver import run_script
from alpharl.sim.lobsim import LobSim
from alpharl.sim.market import SyntheticMarket
from alpharl.sim.params import SimParams
from lobsim_helpers import compare_states, device_actions, make_market, real_market
from support import AMZN5
from test_controls import BACKENDS, QUIET_ROWS

#: A quiet market (ask 102 / bid 100, mid 101 ticks of $0.01): buying a lot at market costs
#: 100 x $1.02 + the taker fee $0.30; selling it gets 100 x $1.00 - $0.30.
BUY_COST, SELL_GAIN = -102.3, 99.7
#: Buy, rest a bid (never filled: nothing trades), sell (flat: a round trip), buy, hold to the
#: window's end (7 steps of one event), where the position is flattened at the bid.
SCRIPT = [A.MARKET_BUY, A.JOIN_BID, A.MARKET_SELL, A.MARKET_BUY, A.HOLD, A.HOLD, A.HOLD]


def _quiet(kind, **kw):
    params = SimParams(events_per_step=1, episode_steps=len(QUIET_ROWS) - 1, fills_log_capacity=16, **kw)
    return (LobSim if kind == "kernels" else ReferenceLobSim)(make_market(QUIET_ROWS), params, 1, 3)


@pytest.mark.parametrize("kind", BACKENDS)
def test_horizon_round_trip_does_not_end_the_episode(kind):
    sim = _quiet(kind, episode_end="horizon")
    sim.reset()
    out = []
    for t, a in enumerate(SCRIPT):
        sim.step(device_actions(np.array([a])) if kind == "kernels" else np.array([a], np.int32))
        o = sim.out.copy_to_host() if kind == "kernels" else sim.out.copy()
        out.append(o[:, 0])
        if t == 2:   # the round trip closed: counted, the episode and the resting bid go on
            assert (sim.field("trips")[0], sim.field("step_in_ep")[0], sim.field("episode")[0]) == (1, 3, 0)
            assert sim.field("buy_qty")[0] == 100 and sim.field("was_open")[0] == 0
    out = np.array(out)
    first, second = SELL_GAIN + BUY_COST, SELL_GAIN + BUY_COST       # two round trips, each -$2.60
    np.testing.assert_array_equal(out[:, L.OUT_DONE], [0, 0, 0, 0, 0, 0, 1])
    np.testing.assert_array_equal(out[:, L.OUT_TRUNCATED], [0, 0, 0, 0, 0, 0, 1])
    np.testing.assert_array_equal(out[:, L.OUT_TRADE_DONE], [0, 0, 1, 0, 0, 0, 1])
    np.testing.assert_allclose(out[:, L.OUT_TRADE_PNL], [0, 0, first, 0, 0, 0, second], atol=1e-5)
    # rewards: equity changes (marked to the mid of $1.01), summing to the final equity = both trades
    np.testing.assert_allclose(out[:, L.OUT_REWARD], [BUY_COST + 101, 0, SELL_GAIN - 101, BUY_COST + 101, 0, 0,
                                                      SELL_GAIN - 101], atol=1e-5)
    np.testing.assert_allclose(out[:, L.OUT_REWARD].sum(), first + second, atol=1e-4)
    # the next episode starts afresh (the window spans the market: at row 0)
    assert (sim.field("step_in_ep")[0], sim.field("episode")[0], sim.field("cursor")[0]) == (0, 1, 0)


@pytest.mark.parametrize("kind", BACKENDS)
def test_round_trip_ends_the_episode_by_default(kind):
    sim = _quiet(kind)
    res = run_script(sim, SCRIPT[:3])
    np.testing.assert_array_equal(res.done[:, 0], [0, 0, 1])
    np.testing.assert_array_equal(res.trade_done[:, 0], [0, 0, 1])
    np.testing.assert_allclose(res.trade_pnl[2, 0], SELL_GAIN + BUY_COST, atol=1e-5)
    assert sim.field("buy_qty")[0] == 0 and sim.field("step_in_ep")[0] == 0       # the bid went with it


@pytest.mark.parametrize("kind", BACKENDS)
def test_horizon_marks_the_open_trade_to_mid_without_force_flatten(kind):
    res = run_script(_quiet(kind, episode_end="horizon", force_flatten=False), SCRIPT)
    # the last trade is truncated open: marked to the mid ($101 for the lot), not sold at the bid
    np.testing.assert_allclose(res.trade_pnl[-1, 0], BUY_COST + 101, atol=1e-5)
    assert res.truncated[-1, 0] == 1 and len(res.trades()) == 2


@pytest.mark.parametrize("kind", BACKENDS)
def test_inventory_penalty_on_the_quiet_market(kind):
    lam = 0.5
    plain = run_script(_quiet(kind, episode_end="horizon"), SCRIPT)
    pen = run_script(_quiet(kind, episode_end="horizon", inventory_penalty=lam), SCRIPT)
    held = np.array([100, 100, 0, 100, 100, 100, 0])                 # shares held after each step
    term = (lam * held * 0.01).astype(np.float32)                    # lambda ticks of $0.01 a share
    np.testing.assert_array_equal(pen.reward[:, 0], plain.reward[:, 0] - term)
    np.testing.assert_array_equal(pen.trade_pnl, plain.trade_pnl)    # the PnL never includes it


@pytest.mark.parametrize("kind", BACKENDS)
def test_quadratic_inventory_penalty_on_the_quiet_market(kind):
    """inventory_penalty_quadratic lambda_2: (lambda + lambda_2 x |q| / lot) x |q| x tick, lambda +
    lambda_2 a share at one lot, lambda + 2 lambda_2 at two; the PnL never includes it."""
    lam, lam2 = 0.5, 0.25
    script = [A.MARKET_BUY, A.MARKET_BUY, A.HOLD, A.MARKET_SELL, A.HOLD, A.HOLD, A.HOLD]
    plain = run_script(_quiet(kind, episode_end="horizon"), script)
    pen = run_script(_quiet(kind, episode_end="horizon", inventory_penalty=lam,
                            inventory_penalty_quadratic=lam2), script)
    held = np.array([100, 200, 200, 100, 100, 100, 0])                # shares held after each step
    term = ((lam + lam2 * (held / 100)) * held * 0.01).astype(np.float32)    # lots of 100, ticks of $0.01
    np.testing.assert_array_equal(pen.reward[:, 0], plain.reward[:, 0] - term)
    np.testing.assert_array_equal(pen.trade_pnl, plain.trade_pnl)


@pytest.mark.slow
@pytest.mark.parametrize("episode_end, unit, quadratic", [("round_trip", "tick", False), ("horizon", "tick", False),
                                                          ("round_trip", "sigma", False), ("horizon", "sigma", True)])
def test_inventory_penalty_is_exactly_the_term(episode_end, unit, quadratic, rng):
    """Random actions on real data: the penalised run's state is the plain run's, and its reward
    is exactly the plain reward less float32(lambda x |inventory| x tick $), or with the unit "sigma"
    float32(lambda x sigma x |inventory| x tick $), sigma = sqrt(vol_msq) before the step, and with
    inventory_penalty_quadratic lambda_2 lambda + lambda_2 x |inventory| / lot in place of lambda, on
    both backends."""
    market = real_market(AMZN5, rows=1_500)
    base = SimParams(events_per_step=4, episode_steps=10, max_position=300, episode_end=episode_end,
                     inventory_penalty_unit=unit)
    lam = float(rng.uniform(0.05, 2.0))
    lam2 = float(rng.uniform(0.05, 1.0)) if quadratic else 0.0
    seed = int(rng.integers(1, 2**31))
    sims = [cls(market, dataclasses.replace(base, inventory_penalty=x, inventory_penalty_quadratic=lam2 if x else 0.0),
                5, seed) for cls in (ReferenceLobSim, LobSim) for x in (0.0, lam)]
    for s in sims:
        s.reset()
    tick = sims[0].tick_dollars
    held_seen = 0
    for t in range(25):
        a = rng.choice(9, size=5).astype(np.int32)
        sigma = np.sqrt(sims[0].field("vol_msq")) if unit == "sigma" else 1.0     # of the steps before
        for s in sims:
            s.step(device_actions(a) if isinstance(s, LobSim) else a)
        outs = [s.out.copy_to_host() if isinstance(s, LobSim) else s.out.copy() for s in sims]
        states = [s.state_dict() for s in sims]
        # force_flatten: an episode ends flat, so the inventory after the step is the state's or 0
        held = np.where(outs[0][L.OUT_DONE] != 0, 0, np.abs(states[0]["state_i"][L.S_INVENTORY]))
        held_seen += int((held > 0).sum())
        held = held.astype(np.float64)
        lam_q = lam + lam2 * (held / base.lot_size) if quadratic else lam
        term = (lam_q * sigma * held * tick).astype(np.float32)
        for plain, pen in ((0, 1), (2, 3)):
            np.testing.assert_array_equal(states[plain]["state_i"], states[pen]["state_i"])
            np.testing.assert_array_equal(outs[pen][L.OUT_REWARD], outs[plain][L.OUT_REWARD] - term)
            keep = np.arange(L.N_OUT) != L.OUT_REWARD
            np.testing.assert_array_equal(outs[pen][keep], outs[plain][keep])
        compare_states(states[3], states[1], f"step {t}")
    assert held_seen > 0


# ------------------------------------------------------------------ one pass over the data
def test_one_pass_replays_the_window_from_its_start(rng):
    """episode_steps = 0: every backtest starts at row 0, runs (rows - 1) // E steps and is
    truncated at the data's end, then starts again at row 0 (the kernels: test_lobsim_vs_reference)."""
    e, rows = 4, 43
    params = SimParams(events_per_step=e, episode_steps=0, episode_end="horizon", max_position=300)
    sim = ReferenceLobSim(real_market(AMZN5, rows=rows), params, 4, int(rng.integers(1, 2**31)))
    assert sim.window_steps == (rows - 1) // e == 10
    sim.reset()
    assert (sim.field("cursor") == 0).all()
    for t in range(23):
        sim.step(rng.choice(9, size=4).astype(np.int32))
        end = (t + 1) % 10 == 0                       # the data's end: truncated, back to row 0
        assert (sim.truncated == end).all() and (sim.done == end).all()
        assert (sim.field("cursor") == (0 if end else e * ((t + 1) % 10))).all()


def test_one_pass_needs_an_end_and_horizon_episodes():
    with pytest.raises(ValueError, match="episode_steps=0 .*horizon"):
        SimParams(episode_steps=0)
    params = SimParams(events_per_step=4, episode_steps=0, episode_end="horizon")
    with pytest.raises(ValueError, match="synthetic"):
        ReferenceLobSim(SyntheticMarket(), params, 2, 0)
    with pytest.raises(ValueError, match="no step"):
        ReferenceLobSim(make_market(QUIET_ROWS[:4]), SimParams(events_per_step=4, episode_steps=0,
                                                                 episode_end="horizon"), 2, 0)
    for bad in (dict(episode_end="sometimes"), dict(inventory_penalty=-0.1), dict(inventory_penalty=float("nan")),
                dict(inventory_penalty_unit="ticks")):
        with pytest.raises(ValueError, match=next(iter(bad))):
            SimParams(**bad)


def test_one_pass_policy_runs_the_whole_window():
    sim = ReferenceLobSim(make_market(QUIET_ROWS), SimParams(events_per_step=2, episode_steps=0,
                                                             episode_end="horizon"), 1, 0)
    res = run_script(sim, lambda obs: np.full(len(obs), A.MARKET_BUY, np.int32))
    assert res.reward.shape == (3, 1) and res.truncated[-1, 0] == 1 and res.truncated[:-1].sum() == 0


# ------------------------------------------------------------------ defaults, bit for bit
#: sha256 of the outputs, money, cursors, inventories and fills of _digest's run, computed with the
#: simulator before episode_end / inventory_penalty / one pass existed (so the defaults still give
#: the same run, bit for bit): the default rules, and force_flatten off with latency, risk averse.
PINNED = {
    "defaults": ("9420c44d78152b760db7b731f33cdac7f1abe11f0caa9f03af2c91209e33bb08", 44),
    "mark-to-mid-latency": ("5b5b969454ea1a07b5b43ce2c00306913617ed2c59ff3c8ed59f71df33420422", 42),
}
PINNED_PARAMS = {
    "defaults": SimParams(events_per_step=4, episode_steps=12, fills_log_capacity=64),
    "mark-to-mid-latency": SimParams(events_per_step=4, episode_steps=12, fills_log_capacity=64, force_flatten=False,
                                     latency_events=2, queue_model="risk_averse"),
}


def _digest(params: SimParams) -> tuple[str, int]:
    """60 steps of 8 backtests of the reference on the embedded sample, fixed seed and actions."""
    sim = ReferenceLobSim(load_embedded().window(20_000, 22_000), params, 8, 1234)
    sim.reset()
    weights = np.array([3, 1, 1, 2, 2, 2, 2, 1, 1]) / 15
    acts = np.random.default_rng(7).choice(9, size=(60, 8), p=weights).astype(np.int32)
    h = hashlib.sha256()
    for a in acts:
        sim.step(a)
        h.update(sim.out.tobytes())
        h.update(sim.state_f[:L.F_EQUITY + 1].tobytes())    # the money rows that existed then
        h.update(sim.state_i[L.S_CURSOR].tobytes())
        h.update(sim.state_i[L.S_INVENTORY].tobytes())
    h.update(np.ascontiguousarray(sim.fills_i[..., :L.FL_QA_FILL]).tobytes())   # the record fields that existed then
    h.update(sim.fills_f.tobytes())
    return h.hexdigest(), int(sim.state_i[L.S_EPISODE].sum())


@pytest.mark.parametrize("case", list(PINNED))
def test_defaults_are_bit_identical_to_before(case):
    assert _digest(PINNED_PARAMS[case]) == PINNED[case]
