"""The holding penalty in units of the market's own volatility (SimParams.inventory_penalty_unit
"sigma"): the running RMS of the mid's change per step each backtest keeps (state vol_steps /
vol_msq), checked against a NumPy computation on a replay, carried across episodes and cleared by
reset(); the penalty lambda x sigma x |q| x tick on a hand-made market whose moves are known; a
state saved before the estimate existed loads; evaluation drops the penalty. Kernels, reference and CPU build alike (the three
step side by side in test_lobsim_vs_reference and test_orders)."""
import dataclasses

import numpy as np
import pytest

from alpharl import actions as A
from alpharl.config import TrainConfig
from alpharl.evaluate import make_setup
from alpharl.lobster.format import ASK_PRICE, BID_PRICE, EV_NEW
from alpharl.reference.lobsim import ReferenceLobSim
from alpharl.sim import layout as L
from alpharl.sim.cpu import CpuLobSim
from alpharl.sim.driver import run_script
from alpharl.sim.lobsim import LobSim
from alpharl.sim.market import replay_stream
from alpharl.sim.params import SimParams
from lobsim_helpers import device_actions, make_market, real_market
from support import AMZN5

SIMS = {"kernels": LobSim, "numpy": ReferenceLobSim, "cpu": CpuLobSim}
SELL = -1
#: ask 102 x 500 / bid 100 x 300 (second levels 103 / 99): mid 101 ticks of $0.01.
BOOK = [102, 500, 100, 300, 103, 100, 99, 100]


def _swinging_rows(move: int, n: int = 8):
    """n rows of a market whose mid moves ``move`` ticks, up and down in turn, at every event."""
    rows = []
    for i in range(n):
        up = move * (i % 2)
        book = [v + up if c % 2 == 0 else v for c, v in enumerate(BOOK)]
        rows.append((EV_NEW, SELL, 10, 120, book))
    return rows


#: Buy a lot, hold it to the window's end (7 one-event steps, flattened there), buy again in the next
#: episode: the estimate must carry over the episode's end.
SCRIPT = [A.MARKET_BUY] + [A.HOLD] * 6 + [A.MARKET_BUY, A.HOLD, A.HOLD]
HELD = np.array([100, 100, 100, 100, 100, 100, 0, 100, 100, 100])    # shares held after each step


def _swinging(kind, move, **kw):
    rows = _swinging_rows(move)
    params = SimParams(events_per_step=1, episode_steps=len(rows) - 1, episode_end="horizon", **kw)
    return SIMS[kind](make_market(rows), params, 1, 3)


@pytest.mark.parametrize("kind", list(SIMS))
def test_sigma_penalty_on_a_market_of_known_moves(kind):
    """The mid moves 2 ticks every step, so sigma = 2 exactly from the second step on: the penalty is
    0 on the first step (nothing seen yet) and then lambda x 2 ticks a share, the tick unit's term
    with 2 lambda; the episode's end keeps the estimate, reset() clears it."""
    lam, move = 0.5, 2
    plain = run_script(_swinging(kind, move), SCRIPT)
    sim = _swinging(kind, move, inventory_penalty=lam, inventory_penalty_unit="sigma")
    sigma = run_script(sim, SCRIPT)
    ticks = run_script(_swinging(kind, move, inventory_penalty=lam * move), SCRIPT)
    assert sigma.truncated[6, 0] == 1                                  # an episode ended in the run
    assert sigma.reward[0, 0] == plain.reward[0, 0]
    np.testing.assert_array_equal(sigma.reward[1:], ticks.reward[1:])
    term = (lam * move * HELD * 0.01).astype(np.float32)
    np.testing.assert_array_equal(sigma.reward[1:, 0], plain.reward[1:, 0] - term[1:])
    np.testing.assert_array_equal(sigma.trade_pnl, plain.trade_pnl)    # never in the PnL
    assert sim.field("vol_steps")[0] == len(SCRIPT) and sim.field("vol_msq")[0] == move ** 2
    sim.reset()
    assert sim.field("vol_steps")[0] == 0 and sim.field("vol_msq")[0] == 0.0


def _mid_ticks(book, rows):
    """The mid in ticks of book rows (the one side's best when the other is empty, NaN with neither)."""
    ask, bid = book[rows, ASK_PRICE].astype(np.float64), book[rows, BID_PRICE].astype(np.float64)
    has_a, has_b = ask != L.ASK_EMPTY, bid != L.BID_EMPTY
    return np.where(has_a & has_b, (ask + bid) / 2, np.where(has_a, ask, np.where(has_b, bid, np.nan)))


def _running_msq(x: np.ndarray, horizon: int) -> np.ndarray:
    """Mean square after each of the per-step moves x: the plain mean of x^2 over the first ``horizon``,
    then an exponential average of weight 1 / horizon."""
    sq = x ** 2
    out = np.cumsum(sq) / np.arange(1, len(x) + 1)
    for k in range(horizon, len(x)):
        out[k] = (1 - 1 / horizon) * out[k - 1] + sq[k] / horizon
    return out


@pytest.mark.parametrize("kind", ["cpu", "numpy"])
def test_vol_state_is_the_running_rms_of_mid_changes(kind, rng):
    """Random actions on real data for more steps than the horizon (short episodes, so many start at
    random rows): after every step each backtest's vol_msq is the running mean square of its own mid
    changes so far (the rows it replayed, read off its cursor), computed here from the book."""
    E, B, steps = 4, 3, L.VOL_HORIZON + 250
    market = real_market(AMZN5, rows=3_000)
    params = SimParams(events_per_step=E, episode_steps=12, max_position=300, inventory_penalty=0.2,
                       inventory_penalty_unit="sigma")
    sim = SIMS[kind](market, params, B, int(rng.integers(1, 2**31)))
    sim.reset()
    book = replay_stream(market).book
    rows = np.zeros((steps, B), np.int64)
    msq = np.zeros((steps, B))
    n = np.zeros((steps, B), np.int64)
    for t in range(steps):
        rows[t] = sim.field("cursor")
        sim.step(rng.choice(9, size=B).astype(np.int32))
        msq[t], n[t] = sim.field("vol_msq"), sim.field("vol_steps")
    assert sim.field("episode").min() > steps // 12 // 2             # many episodes, one estimate
    moves = _mid_ticks(book, rows + E) - _mid_ticks(book, rows)
    assert np.isfinite(moves).all()
    for b in range(B):
        np.testing.assert_allclose(msq[:, b], _running_msq(moves[:, b], L.VOL_HORIZON), rtol=1e-9)
    counted = np.minimum(np.arange(1, steps + 1), L.VOL_HORIZON)
    np.testing.assert_array_equal(n, np.broadcast_to(counted[:, None], n.shape))
    assert (msq[-1] > 0).all()


@pytest.mark.parametrize("kind", list(SIMS))
def test_a_state_from_before_the_estimate_loads_and_starts_it_afresh(kind, rng):
    """A state saved before the volatility estimate existed (no vol_steps / vol_msq rows) loads: every
    other field as saved, the estimate at "nothing seen", so the next step's sigma penalty is 0 and
    the estimate counts again from that step; the step is otherwise the one the saved run takes."""
    market = real_market(AMZN5, rows=1_000)
    params = SimParams(events_per_step=4, episode_steps=20, episode_end="horizon", max_position=300,
                       inventory_penalty=0.5, inventory_penalty_unit="sigma")
    seed = int(rng.integers(1, 2**31))
    cls = SIMS[kind]
    sim = cls(market, params, 2, seed)
    plain = cls(market, dataclasses.replace(params, inventory_penalty=0.0), 2, seed)
    buy = np.full(2, A.MARKET_BUY, np.int32)
    for s in (sim, plain):
        run_script(s, [A.MARKET_BUY] * 5)
    d = sim.state_dict()
    assert (d["state_i"][L.S_VOL_STEPS] == 5).all() and (d["state_i"][L.S_INVENTORY] != 0).all()
    # that layout had no response latency either (its row came after)
    old = d | {"state_i": np.delete(d["state_i"], [L.S_VOL_STEPS, L.S_RESP_STALE], axis=0),
               "state_f": d["state_f"][:L.F_VOL_MSQ]}
    fresh = cls(market, params, 2, seed)
    fresh.load_state_dict(old)
    got = fresh.state_dict()
    keep_i = np.arange(L.N_STATE_I) != L.S_VOL_STEPS
    np.testing.assert_array_equal(got["state_i"][keep_i], d["state_i"][keep_i])
    np.testing.assert_array_equal(got["state_f"][:L.N_EPISODE_F], d["state_f"][:L.N_EPISODE_F])
    assert (got["state_i"][L.S_VOL_STEPS] == 0).all() and (got["state_f"][L.F_VOL_MSQ] == 0).all()
    for s in (fresh, plain):
        s.step(device_actions(buy) if kind == "kernels" else buy)
    out, ref = _host(fresh.out), _host(plain.out)
    np.testing.assert_array_equal(out, ref)                         # no penalty: nothing seen yet
    assert (fresh.field("vol_steps") == 1).all()


def _host(x):
    return x.copy_to_host() if hasattr(x, "copy_to_host") else np.array(x)


def test_evaluation_drops_the_sigma_penalty(rng):
    """alpharl eval's simulator parameters hold no penalty, whatever its unit and with its quadratic
    term: a run under them rewards exactly what the unpenalised run does."""
    config = TrainConfig(sim=SimParams(events_per_step=4, episode_steps=20, episode_end="horizon",
                                       inventory_penalty=0.3, inventory_penalty_unit="sigma",
                                       inventory_penalty_quadratic=0.2))
    market = real_market(AMZN5, rows=1_000)
    setup = make_setup(config, market, 0.0, 1.0, 2, 15, 7, fills=False)
    assert setup.sim_params.inventory_penalty == 0.0 == setup.sim_params.inventory_penalty_quadratic
    plain = dataclasses.replace(setup.sim_params, inventory_penalty_unit="tick")
    acts = rng.choice(9, size=(15, 2)).astype(np.int32)
    got, want = (run_script(CpuLobSim(setup.market, p, 2, 7), acts) for p in (setup.sim_params, plain))
    assert (np.abs(got.reward) > 0).any()
    np.testing.assert_array_equal(got.reward, want.reward)
