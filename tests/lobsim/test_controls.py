"""Backtester controls on hand-made markets whose outcome is known exactly: queue models,
partial / all-or-nothing fills, fees per share / per value, latency, position limit,
forced flatten, round trips; the scripted driver and the Arrow fills log. Every case runs
on the GPU kernels and on the NumPy reference."""
import dataclasses

import numpy as np
import pyarrow as pa
import pytest

from alpharl import actions as A
from alpharl.lobster.format import EV_CANCEL, EV_DELETE, EV_EXEC, EV_HIDDEN_EXEC, EV_NEW
from alpharl.reference.lobsim import ReferenceLobSim
from alpharl.sim import layout as L
from alpharl.sim.driver import run_script
from alpharl.sim.fills import FILLS_SCHEMA, FillsLog, read_fills
from alpharl.sim.cpu import CpuLobSim
from alpharl.sim.lobsim import LobSim
from alpharl.sim.market import SyntheticMarket, nearest_tick, time_ns
from alpharl.sim.params import SimParams
from lobsim_helpers import TICK, device_actions, make_market, real_market

BUY, SELL = 1, -1
BOOK = [102, 500, 100, 300, 103, 100, 99, 100]   # ask 102x500 / bid 100x300, second levels 103 / 99


def _book(bid_size):
    b = list(BOOK)
    b[3] = bid_size
    return b


#: Resting bid at 100 behind 300 shares: 500 join behind us, 100 cancel, then trades of 350 and 100.
QUEUE_ROWS = [
    (EV_NEW, SELL, 10, 105, _book(300)),
    (EV_NEW, BUY, 500, 100, _book(800)),
    (EV_CANCEL, BUY, 100, 100, _book(700)),
    (EV_EXEC, BUY, 350, 100, _book(350)),
    (EV_EXEC, BUY, 100, 100, _book(250)),
    (EV_NEW, SELL, 10, 106, _book(250)),
]
#: A quiet market: nothing touches the top of the book.
QUIET_ROWS = [(EV_NEW, SELL, 10, 110, _book(300))] * 8


def _params(rows, **kw):
    # one event per step and a window spanning the whole market: every episode starts at row 0
    kw.setdefault("episode_steps", len(rows) - 1)
    return SimParams(events_per_step=1, fills_log_capacity=16, **kw)


def _sim(kind, rows, params, B=1, seed=3):
    market = make_market(rows)
    return (LobSim if kind == "kernels" else ReferenceLobSim)(market, params, B, seed)


#: Kernels (LobSim, on the GPU or the CUDA simulator) and the NumPy reference.
BACKENDS = ["kernels", "numpy"]


def _fills(res, b=0):
    return [r for r in res.fills.to_pylist() if r["backtest"] == b]


@pytest.mark.parametrize("kind", BACKENDS)
def test_risk_averse_queue_partial_fills(kind):
    sim = _sim(kind, QUEUE_ROWS, _params(QUEUE_ROWS, queue_model="risk_averse"))
    res = run_script(sim, [A.JOIN_BID, A.HOLD])                       # two steps: placed, then the cancel
    assert sim.field("buy_qa0")[0] == 300
    assert sim.field("buy_qa")[0] == 300                              # cancellations never advance us
    res = run_script(sim, [A.JOIN_BID, A.HOLD, A.HOLD, A.HOLD, A.HOLD])
    f = _fills(res)
    # the 350-share trade takes the 300 ahead and 50 of ours; the next 100 fills the rest;
    # the window then ends and the position is flattened at the bid
    assert [(x["maker"], x["side"], x["quantity"], x["price_ticks"], x["event_row"]) for x in f] == \
        [(True, BUY, 50, 100, 3), (True, BUY, 50, 100, 4), (False, SELL, 100, 100, 5)]
    assert f[0]["queue_ahead"] == 300 and f[0]["order_id"] == f[1]["order_id"] != f[2]["order_id"]
    assert res.truncated[-1, 0] == 1 and res.done[-1, 0] == 1


@pytest.mark.parametrize("kind", BACKENDS)
@pytest.mark.parametrize("model, queues", [("risk_averse", [300, 0]), ("probabilistic", [None, 0])])
def test_fills_record_their_time_and_queue_at_fill(kind, model, queues):
    """Events one second apart (make_market): each fill carries its event's time in ns, and the queue
    ahead just before the event that filled it: 300 (risk-averse: the cancel at row 2 did not move
    us) before the 350-share trade, 0 before the next one; the taker flatten 0. Probabilistic: the
    cancel at row 2 drew ahead of us or not (600 or 300 shares still ahead of the first fill)."""
    times = np.array([0.0, 1.5, 2.25, 3.0, 4.125, 5.0])
    sim = _timed_sim(kind, QUEUE_ROWS, times, queue_model=model)
    f = _fills(run_script(sim, [A.JOIN_BID, A.HOLD, A.HOLD, A.HOLD, A.HOLD]))
    assert [x["time_ns"] for x in f] == [int(times[x["event_row"]] * 1e9) for x in f]
    assert [x["time_ns"] for x in f][-1] == 5_000_000_000 and not f[-1]["maker"]
    maker = [x for x in f if x["maker"]]
    assert maker and all(x["queue_ahead"] == 300 for x in maker) and f[-1]["queue_at_fill"] == 0
    if queues[0] is not None:
        assert [x["queue_at_fill"] for x in maker] == queues
    else:   # one cancel of 100 may have been ahead: 200 then remain, and the 350 trade fills 100 at once
        assert maker[0]["queue_at_fill"] in (200, 300)


@pytest.mark.parametrize("kind", BACKENDS)
def test_synthetic_fills_have_no_time(kind):
    params = SimParams(events_per_step=2, episode_steps=4, fills_log_capacity=8)
    sim = (LobSim if kind == "kernels" else ReferenceLobSim)(SyntheticMarket(), params, 2, 1)
    res = run_script(sim, [A.MARKET_BUY, A.HOLD])
    assert res.fills.num_rows > 0 and res.fills.column("time_ns").null_count == res.fills.num_rows


@pytest.mark.parametrize("kind", BACKENDS)
@pytest.mark.parametrize("requote", ["keep", "replace"])
def test_requote_replace_sends_the_order_again(kind, requote):
    """Our bid joins 300 shares at row 0; 500 join behind it at row 1. Joining again at row 1 keeps
    the order and its place ("keep": the 350 trade fills 50, the next 50), or cancels and re-sends
    it in the one step ("replace": a new order id behind all 800 shares, which the trades of 450 do
    not reach)."""
    sim = _sim(kind, QUEUE_ROWS, _params(QUEUE_ROWS, queue_model="risk_averse", requote=requote,
                                         force_flatten=False))
    run_script(sim, [A.JOIN_BID, A.JOIN_BID])                          # to row 2
    replaced = requote == "replace"
    assert sim.field("buy_oid")[0] == (1 if replaced else 0) and sim.field("next_oid")[0] == (2 if replaced else 1)
    assert sim.field("buy_qa0")[0] == (800 if replaced else 300)
    run_script(sim, [A.JOIN_BID, A.JOIN_BID, A.HOLD, A.HOLD])         # to row 4
    assert sim.field("buy_qa")[0] == (250 if replaced else 0)
    res = run_script(sim, [A.JOIN_BID, A.JOIN_BID, A.HOLD, A.HOLD, A.HOLD])
    assert [(x["quantity"], x["event_row"]) for x in _fills(res)] == ([] if replaced else [(50, 3), (50, 4)])


#: The best bid steps up to 101 (200 shares) at row 1 and back to 100 at row 3; the ask stays at 102.
_BID_UP = [102, 500, 101, 200, 103, 100, 100, 300]
PEG_ROWS = [
    (EV_NEW, SELL, 10, 110, BOOK),
    (EV_NEW, BUY, 200, 101, _BID_UP),
    (EV_NEW, SELL, 10, 110, _BID_UP),
    (EV_DELETE, BUY, 200, 101, BOOK),
    (EV_NEW, SELL, 10, 110, BOOK),
    (EV_NEW, SELL, 10, 110, BOOK),
]


@pytest.mark.parametrize("kind", BACKENDS)
@pytest.mark.parametrize("peg", [False, True])
def test_pegged_join_follows_the_touch(kind, peg):
    """A join bid at 100 (row 0) and a join ask at 102 (row 1). Pegged, the bid is sent again at 101
    when the best bid steps up (row 1, before the ask: ids 1 then 2), behind the 200 there, and back at
    100 behind 300 when it steps down (row 3, id 3); the ask, at its touch throughout, keeps its id.
    Not pegged, both rest where they were placed."""
    sim = _sim(kind, PEG_ROWS, _params(PEG_ROWS, peg_quotes=peg, force_flatten=False))
    run_script(sim, [A.JOIN_BID, A.JOIN_ASK, A.HOLD])                  # to row 3
    assert sim.field("buy_px")[0] == (101 if peg else 100) and sim.field("buy_qa0")[0] == (200 if peg else 300)
    assert sim.field("buy_oid")[0] == (1 if peg else 0)
    assert sim.field("sell_px")[0] == 102 and sim.field("sell_oid")[0] == (2 if peg else 1)
    run_script(sim, [A.JOIN_BID, A.JOIN_ASK, A.HOLD, A.HOLD])          # to row 4
    assert sim.field("buy_px")[0] == 100 and sim.field("buy_oid")[0] == (3 if peg else 0)
    assert sim.field("buy_qa0")[0] == 300 and sim.field("sell_oid")[0] == (2 if peg else 1)
    assert sim.field("next_oid")[0] == (4 if peg else 2) and sim.field("buy_qty")[0] == 100


@pytest.mark.parametrize("kind", BACKENDS)
def test_pegged_improve_keeps_a_tick_inside_and_cancel_ends_the_peg(kind):
    """An improve bid at 101 (spread 2). When the bid steps up to 101 the spread is one tick and an
    improve is a join at 101: the order is where its peg wants it and keeps its id and place; so it
    does when the bid steps back (101 is again a tick inside). A cancel drops a pegged order (the join
    moved to 101 at row 1, id 1, then cancelled); nothing re-sends it."""
    sim = _sim(kind, PEG_ROWS, _params(PEG_ROWS, peg_quotes=True, force_flatten=False))
    run_script(sim, [A.IMPROVE_BID, A.HOLD, A.HOLD, A.HOLD])
    assert sim.field("buy_px")[0] == 101 and sim.field("buy_oid")[0] == 0 and sim.field("next_oid")[0] == 1
    assert sim.field("buy_peg")[0] == L.PEG_IMPROVE
    run_script(sim, [A.JOIN_BID, A.CANCEL, A.HOLD, A.HOLD])
    assert sim.field("buy_qty")[0] == 0 and sim.field("next_oid")[0] == 2


#: QUEUE_ROWS, then quiet rows where nothing trades.
REFILL_ROWS = QUEUE_ROWS + [(EV_NEW, SELL, 10, 106, _book(250))] * 3


@pytest.mark.parametrize("kind", BACKENDS)
@pytest.mark.parametrize("refill, max_position", [(False, 500), (True, 500), (True, 100)])
def test_refilled_quotes_are_sent_again_after_their_fill(kind, refill, max_position):
    """A pegged join bid (id 0) behind 300 (risk-averse queue) fills 50 + 50 in the trades at rows 3
    and 4. With refill_quotes the next step quotes the side again before its action: a new order
    (id 1), one lot, at the bid behind the 250 shown there, still pegged; without it, or while a second
    lot would pass max_position (long 100 of 100), nothing is sent and nothing counts as refused. A
    cancel ends the peg: no refill follows it."""
    sim = _sim(kind, REFILL_ROWS, _params(REFILL_ROWS, peg_quotes=True, refill_quotes=refill, queue_model="risk_averse",
                                          max_position=max_position, force_flatten=False))
    run_script(sim, [A.JOIN_BID, A.HOLD, A.HOLD, A.HOLD, A.HOLD, A.HOLD])          # to row 6
    assert sim.field("inventory")[0] == 100 and sim.field("refused")[0] == 0
    sent = refill and max_position > 100
    assert sim.field("buy_qty")[0] == (100 if sent else 0) and sim.field("next_oid")[0] == (2 if sent else 1)
    assert sim.field("buy_peg")[0] == L.PEG_JOIN
    if sent:
        assert sim.field("buy_oid")[0] == 1 and sim.field("buy_px")[0] == 100
        assert sim.field("buy_qa0")[0] == 250 and sim.field("buy_qa")[0] == 250
    run_script(sim, [A.JOIN_BID, A.HOLD, A.HOLD, A.HOLD, A.HOLD, A.CANCEL, A.HOLD])   # to row 7 of 8
    assert sim.field("buy_peg")[0] == L.PEG_NONE and sim.field("buy_qty")[0] == 0
    assert sim.field("next_oid")[0] == (2 if sent else 1) and sim.field("refused")[0] == 0


def test_refill_quotes_needs_pegged_quotes():
    with pytest.raises(ValueError, match="refill_quotes"):
        SimParams(refill_quotes=True)


@pytest.mark.parametrize("kind", BACKENDS)
def test_an_instruction_price_is_not_pegged(kind):
    """A join bid (pegged) that an order instruction replaces at an explicit 99 rests there when the
    best bid steps up (row 1): the peg is the action's, not the driver's."""
    sim = _sim(kind, PEG_ROWS, _params(PEG_ROWS, peg_quotes=True, force_flatten=False))
    to_dev = device_actions if kind == "kernels" else (lambda a: np.asarray(a, np.int32))
    orders = np.zeros((L.N_ORD, 1), np.int32)
    orders[L.ORD_BUY + L.OI_OP], orders[L.ORD_BUY + L.OI_PX], orders[L.ORD_BUY + L.OI_QTY] = L.OP_PLACE, 99, 100
    sim.reset()
    sim.step(to_dev([A.JOIN_BID]))
    sim.step(to_dev([A.HOLD]), to_dev(orders))                      # row 1: the peg first (id 1), then 99 (id 2)
    assert sim.field("buy_px")[0] == 99 and sim.field("buy_peg")[0] == L.PEG_NONE
    sim.step(to_dev([A.HOLD]))
    sim.step(to_dev([A.HOLD]))
    assert sim.field("buy_px")[0] == 99 and sim.field("buy_oid")[0] == 2 and sim.field("next_oid")[0] == 3


@pytest.mark.parametrize("kind", BACKENDS)
def test_requote_replace_waits_out_the_entry_latency(kind):
    """Two events of latency: the join sent at row 0 goes live at row 2 behind 700; joined again at
    row 2 it is re-sent (a new id) and pending until row 4, where it queues behind the 250 left."""
    sim = _sim(kind, QUEUE_ROWS, _params(QUEUE_ROWS, queue_model="risk_averse", requote="replace",
                                         latency_events=2, force_flatten=False))
    run_script(sim, [A.JOIN_BID, A.HOLD])
    assert sim.field("buy_live_at")[0] == L.LIVE and sim.field("buy_qa0")[0] == 700
    run_script(sim, [A.JOIN_BID, A.HOLD, A.JOIN_BID])
    assert sim.field("buy_live_at")[0] == 4 and sim.field("buy_oid")[0] == 1
    run_script(sim, [A.JOIN_BID, A.HOLD, A.JOIN_BID, A.HOLD])
    assert sim.field("buy_live_at")[0] == L.LIVE and sim.field("buy_qa0")[0] == 250


@pytest.mark.parametrize("kind", BACKENDS)
def test_all_or_nothing_waits_for_a_whole_fill(kind):
    sim = _sim(kind, QUEUE_ROWS, _params(QUEUE_ROWS, queue_model="risk_averse", fill_rule="all_or_nothing"))
    res = run_script(sim, [A.JOIN_BID, A.HOLD, A.HOLD, A.HOLD, A.HOLD])
    f = _fills(res)
    assert [(x["maker"], x["quantity"], x["event_row"]) for x in f] == [(True, 100, 4), (False, 100, 5)]


@pytest.mark.parametrize("kind", BACKENDS)
@pytest.mark.parametrize("rule, expected", [("partial", [(50, 3), (50, 4)]), ("all_or_nothing", [(100, 4)]),
                                            ("whole_order", [(100, 3)])])
def test_fill_rules(kind, rule, expected):
    """300 ahead of our 100: the 350-share trade passes the queue by 50, the next 100 by 100 more."""
    sim = _sim(kind, QUEUE_ROWS, _params(QUEUE_ROWS, queue_model="risk_averse", fill_rule=rule,
                                         force_flatten=False))
    res = run_script(sim, [A.JOIN_BID, A.HOLD, A.HOLD, A.HOLD, A.HOLD])
    assert [(x["quantity"], x["event_row"]) for x in _fills(res) if x["maker"]] == expected


#: A thin best ask (50 at 102, 500 at 103).
THIN_ROWS = [(EV_NEW, SELL, 10, 110, [102, 50, 100, 300, 103, 500, 99, 100])] * 4


@pytest.mark.parametrize("kind", BACKENDS)
@pytest.mark.parametrize("rule", ["partial", "whole_order"])
def test_whole_order_rule_fills_market_orders_at_the_best_price(kind, rule):
    sim = _sim(kind, THIN_ROWS, _params(THIN_ROWS, fill_rule=rule))
    res = run_script(sim, [A.MARKET_BUY, A.HOLD])
    got = [(f["quantity"], f["price_ticks"]) for f in _fills(res)]
    assert got == ([(100, 102)] if rule == "whole_order" else [(50, 102), (50, 103)])


#: Our bid at 100 goes live two events later, when the ask has come down to 100.
CROSS_ROWS = [
    (EV_NEW, SELL, 10, 110, BOOK),
    (EV_CANCEL, BUY, 300, 100, [102, 500, 99, 100, 103, 100, 98, 100]),
    (EV_NEW, SELL, 200, 100, [100, 200, 99, 100, 102, 500, 98, 100]),
    (EV_NEW, SELL, 10, 110, [100, 200, 99, 100, 102, 500, 98, 100]),
]


@pytest.mark.parametrize("kind", BACKENDS)
@pytest.mark.parametrize("post_only", [False, True])
def test_post_only_cancels_a_join_that_would_cross(kind, post_only):
    sim = _sim(kind, CROSS_ROWS, _params(CROSS_ROWS, latency_events=2, post_only=post_only, force_flatten=False))
    res = run_script(sim, [A.JOIN_BID, A.HOLD, A.HOLD])
    got = [(f["maker"], f["quantity"], f["price_ticks"], f["event_row"]) for f in _fills(res)]
    assert got == ([] if post_only else [(False, 100, 100, 2)])
    assert sim.field("post_cancelled")[0] == int(post_only)
    assert sim.field("buy_qty")[0] == 0


#: Our bid at 100 (300 shown) goes live two events later, when two better bids have pushed 100 out of
#: the two visible levels.
SCROLL_ROWS = [
    (EV_NEW, SELL, 10, 110, [105, 500, 100, 300, 106, 100, 99, 100]),
    (EV_NEW, BUY, 50, 101, [105, 500, 101, 50, 106, 100, 100, 300]),
    (EV_NEW, BUY, 70, 101, [105, 500, 101, 120, 106, 100, 100, 300]),
    (EV_NEW, BUY, 20, 102, [105, 500, 102, 20, 106, 100, 101, 120]),
    (EV_NEW, SELL, 10, 110, [105, 500, 102, 20, 106, 100, 101, 120]),
]


@pytest.mark.parametrize("kind", BACKENDS)
@pytest.mark.parametrize("entry, queue", [("visible", 0), ("last_seen", 300)])
def test_entry_queue_at_a_price_out_of_view(kind, entry, queue):
    sim = _sim(kind, SCROLL_ROWS, _params(SCROLL_ROWS, latency_events=3, entry_queue=entry,
                                          queue_model="risk_averse"))
    run_script(sim, [A.JOIN_BID, A.HOLD, A.HOLD])
    assert sim.field("buy_live_at")[0] == L.LIVE and sim.field("buy_px")[0] == 100
    assert sim.field("buy_qa")[0] == sim.field("buy_qa0")[0] == queue


def _half_tick_rows(price):
    """Book 1003 / 1001 (ticks); then a hidden execution of a buy order, 30 shares at ``price``
    (1e-4 $, between two ticks)."""
    book = [1003, 500, 1001, 300, 1004, 100, 1000, 100]
    return [(EV_NEW, SELL, 10, 1010, book), (EV_HIDDEN_EXEC, BUY, 30, price / TICK, book),
            (EV_NEW, SELL, 10, 1010, book)]


@pytest.mark.parametrize("kind", BACKENDS)
@pytest.mark.parametrize("rule, price, expected", [
    ("drop", 100150, []),
    ("nearest", 100150, [30]),      # 1001.5 ticks exactly in float64: up, at our 1002 (30 pass a queue of 0)
    ("nearest", 100050, [100]),     # 1000.5000000000001: up to 1001, below our 1002: a trade through it
])
def test_off_tick_hidden_executions(kind, rule, price, expected):
    """Our buy improves the bid to 1002 with no queue ahead."""
    rows = _half_tick_rows(price)
    sim = _sim(kind, rows, _params(rows, off_tick_trades=rule, force_flatten=False, queue_model="risk_averse"))
    res = run_script(sim, [A.IMPROVE_BID, A.HOLD])
    assert [f["quantity"] for f in _fills(res)] == expected


def test_nearest_tick_rounds_as_float64_division():
    # halves away from zero after the two float divisions: 1001.5 up, 1006.4999999999999 down
    assert nearest_tick(np.array([100150, 100650, 100100, 100149]), 100).tolist() == [1002, 1006, 1001, 1001]


@pytest.mark.parametrize("kind", BACKENDS)
def test_probabilistic_queue_cancels_ahead_with_probability_qa_over_size(kind):
    B = 24
    sim = _sim(kind, QUEUE_ROWS, _params(QUEUE_ROWS, queue_model="probabilistic"), B=B, seed=11)
    run_script(sim, np.full((2, B), A.HOLD, np.int32) + np.array([[A.JOIN_BID], [A.HOLD]], np.int32))
    qa = sim.field("buy_qa")
    # the 100 cancelled of 800 visible were ahead of our 300 with probability 3/8
    assert set(qa.tolist()) == {200, 300}


@pytest.mark.parametrize("kind", BACKENDS)
@pytest.mark.parametrize("mode", ["per_share", "per_value"])
def test_fees_per_share_and_per_value(kind, mode):
    rate = 0.003 if mode == "per_share" else 2e-5
    sim = _sim(kind, QUIET_ROWS, _params(QUIET_ROWS, fee_mode=mode, taker_fee=rate))
    res = run_script(sim, [A.MARKET_BUY, A.MARKET_SELL])
    buy, sell = _fills(res)
    assert (buy["side"], buy["price"], sell["side"], sell["price"]) == (BUY, 1.02, SELL, 1.00)
    per = (lambda f: rate * f["quantity"]) if mode == "per_share" else (lambda f: rate * f["quantity"] * f["price"])
    assert buy["fee"] == pytest.approx(per(buy)) and sell["fee"] == pytest.approx(per(sell))
    # a round trip ends the episode; its rewards sum to its PnL
    pnl = 100 * (1.00 - 1.02) - per(buy) - per(sell)
    assert res.done[1, 0] == 1 and res.truncated[1, 0] == 0
    assert res.trade_pnl[1, 0] == pytest.approx(pnl, abs=1e-5)
    assert res.reward[:2, 0].sum() == pytest.approx(pnl, abs=1e-5)


@pytest.mark.parametrize("kind", BACKENDS)
def test_latency_delays_orders_by_events(kind):
    sim = _sim(kind, QUEUE_ROWS, _params(QUEUE_ROWS, latency_events=2, queue_model="risk_averse"))
    run_script(sim, [A.JOIN_BID])
    obs = sim.obs.copy_to_host() if kind == "kernels" else sim.obs
    assert obs[0, L.obx_base(sim.params.obs_levels) + L.OBX_BUY_FLAG] == 0.5   # pending
    run_script(sim, [A.JOIN_BID, A.HOLD])
    assert sim.field("buy_live_at")[0] == L.LIVE
    assert sim.field("buy_qa0")[0] == 700                              # the queue when it went live, at row 2
    res = run_script(sim, [A.MARKET_BUY, A.HOLD, A.HOLD])
    assert [(f["event_row"], f["price_ticks"]) for f in _fills(res)][0] == (2, 102)


def _timed_sim(kind, rows, times, **kw):
    market = dataclasses.replace(make_market(rows), time=np.asarray(times, np.float64))
    return (LobSim if kind == "kernels" else ReferenceLobSim)(market, _params(rows, **kw), 1, 3)


@pytest.mark.parametrize("kind", BACKENDS)
@pytest.mark.parametrize("entry_s, queue", [(0.4, 300), (0.5, 700)])
def test_entry_latency_in_time(kind, entry_s, queue):
    """Events at 0, 0.5, 0.5, 1, 2, 3 s: a join sent at 0 s with 0.4 s of latency goes live at once
    (no event by then), with 0.5 s after both events at 0.5 s (ties come first)."""
    sim = _timed_sim(kind, QUEUE_ROWS, [0.0, 0.5, 0.5, 1.0, 2.0, 3.0], entry_latency_ns=int(entry_s * 1e9),
                     queue_model="risk_averse")
    run_script(sim, [A.JOIN_BID])
    assert sim.field("buy_live_at")[0] == (L.LIVE if queue == 300 else 2)
    run_script(sim, [A.JOIN_BID, A.HOLD])
    assert sim.field("buy_live_at")[0] == L.LIVE and sim.field("buy_qa0")[0] == queue


#: The bid rises from 100 to 101 at row 1.
RISING_ROWS = [(EV_NEW, SELL, 10, 110, BOOK)] + [(EV_NEW, BUY, 50, 101, [102, 500, 101, 50, 103, 100, 100, 300])] * 4


@pytest.mark.parametrize("kind", BACKENDS)
@pytest.mark.parametrize("feed_s, bid", [(0.0, 101), (1.5, 100)])
def test_feed_latency_shows_an_older_book(kind, feed_s, bid):
    """Events one second apart: at row 2 with 1.5 s of feed latency the agent sees row 0's book
    (bid 100, spread 2) and joins there; without it, row 2's (bid 101, spread 1)."""
    sim = _timed_sim(kind, RISING_ROWS, np.arange(len(RISING_ROWS), dtype=np.float64),
                     feed_latency_ns=int(feed_s * 1e9))
    run_script(sim, [A.HOLD, A.HOLD])
    obs = sim.obs.copy_to_host() if kind == "kernels" else sim.obs
    assert obs[0, L.obx_base(sim.params.obs_levels) + L.OBX_SPREAD] == 102 - bid
    run_script(sim, [A.HOLD, A.HOLD, A.JOIN_BID])
    assert sim.field("buy_px")[0] == bid


#: Our bid joins 300 shares from before the file (orders 1000: 200, 1001: 100); order 5 (500)
#: arrives behind it; 1001 is deleted, 1000 executed, then 100 of order 5 executed.
L3_ROWS = [
    (EV_NEW, SELL, 10, 105, _book(300)),
    (EV_NEW, BUY, 500, 100, _book(800)),
    (EV_DELETE, BUY, 100, 100, _book(700)),
    (EV_EXEC, BUY, 200, 100, _book(500)),
    (EV_EXEC, BUY, 100, 100, _book(400)),
    (EV_NEW, SELL, 10, 106, _book(400)),
]
L3_IDS = [900, 5, 1001, 1000, 5, 901]


@pytest.mark.parametrize("kind", BACKENDS)
@pytest.mark.parametrize("model, queue, fills", [("l3_fifo", 200, [(100, 4)]), ("risk_averse", 300, [])])
def test_l3_fifo_queue_follows_the_orders_ahead(kind, model, queue, fills):
    """l3_fifo: the deletion of an order ahead moves us forward, an order behind us trading fills
    us; risk-averse: neither (the execution of 200 then leaves 100 ahead of us)."""
    market = dataclasses.replace(make_market(L3_ROWS), order_id=np.array(L3_IDS, np.int64))
    sim = (LobSim if kind == "kernels" else ReferenceLobSim)(
        market, _params(L3_ROWS, queue_model=model, force_flatten=False), 1, 3)
    run_script(sim, [A.JOIN_BID, A.HOLD])                   # rows 1 and 2
    assert sim.field("buy_qa")[0] == queue and sim.field("buy_live_row")[0] == 0
    res = run_script(sim, [A.JOIN_BID, A.HOLD, A.HOLD, A.HOLD, A.HOLD])
    assert [(f["quantity"], f["event_row"]) for f in _fills(res)] == fills


@pytest.mark.parametrize("kind", BACKENDS)
def test_position_limit_refuses_orders(kind):
    sim = _sim(kind, QUIET_ROWS, _params(QUIET_ROWS, max_position=200))
    res = run_script(sim, [A.MARKET_BUY, A.MARKET_BUY, A.MARKET_BUY, A.JOIN_BID])
    assert sim.field("inventory")[0] == 200
    assert sim.field("refused")[0] == 2
    assert sim.field("buy_qty")[0] == 0
    assert sum(f["quantity"] for f in _fills(res)) == 200


@pytest.mark.parametrize("kind", BACKENDS)
@pytest.mark.parametrize("flatten", [True, False])
def test_forced_flatten_switch(kind, flatten):
    rows = QUIET_ROWS[:4]
    sim = _sim(kind, rows, _params(rows, force_flatten=flatten))
    res = run_script(sim, [A.MARKET_BUY, A.HOLD, A.HOLD])
    f = _fills(res)
    assert res.truncated[2, 0] == 1 and res.done[2, 0] == 1
    assert len(f) == (2 if flatten else 1)
    cost = 100 * 1.02 + f[0]["fee"]
    expected = (100 * 1.00 - f[1]["fee"] - cost) if flatten else (100 * 1.01 - cost)   # open position marked at mid
    assert res.trade_pnl[2, 0] == pytest.approx(expected, abs=1e-5)
    assert res.reward[:, 0].sum() == pytest.approx(expected, abs=1e-5)
    assert sim.field("inventory")[0] == 0 and sim.field("cash")[0] == 0.0      # the reset dropped it


@pytest.mark.slow
def test_scripted_driver_same_on_gpu_and_reference(rng):
    market = real_market(rows=1_500)
    params = SimParams(events_per_step=4, episode_steps=10, fills_log_capacity=32)
    B, T = 4, 25
    acts = rng.integers(0, 9, size=(T, B)).astype(np.int32)
    runs = [run_script(cls(market, params, B, 5), acts) for cls in (LobSim, ReferenceLobSim)]
    np.testing.assert_allclose(runs[0].reward, runs[1].reward, rtol=2e-6, atol=1e-6)
    assert runs[0].fills.drop(["fee", "price"]).equals(runs[1].fills.drop(["fee", "price"]))
    assert runs[0].fills.num_rows > 0

    def policy(obs):
        """Join the bid when flat, the ask when long (reads the observation's position)."""
        pos = obs[:, L.obx_base(params.obs_levels) + L.OBX_POSITION]
        return np.where(pos > 0, A.JOIN_ASK, A.JOIN_BID)

    runs = [run_script(cls(market, params, B, 5), policy, steps=T) for cls in (LobSim, ReferenceLobSim)]
    np.testing.assert_array_equal(runs[0].actions, runs[1].actions)
    np.testing.assert_allclose(runs[0].reward, runs[1].reward, rtol=2e-6, atol=1e-6)


def test_fills_log_arrow_file(tmp_path):
    sim = _sim("numpy", QUEUE_ROWS, _params(QUEUE_ROWS, queue_model="risk_averse"), B=2)
    path = tmp_path / "fills.arrow"
    sim.reset()
    with FillsLog(path, sim) as log:
        for a in (A.JOIN_BID, A.HOLD, A.HOLD):
            sim.step(np.full(2, a, np.int32))
        log.drain()
        for _ in range(2):
            sim.step(np.full(2, A.HOLD, np.int32))
    table = read_fills(path)
    assert table.schema.equals(FILLS_SCHEMA)
    assert table.num_rows == 6 and log.lost == 0
    assert table.column("backtest").to_pylist() == [0, 1, 0, 0, 1, 1]   # per drain, by backtest
    assert pa.compute.sum(table.column("quantity")).as_py() == 2 * 200


@pytest.mark.parametrize("kind", BACKENDS)
def test_a_state_from_before_fill_times_and_round_trip_counts_loads(kind):
    """A checkpoint's simulator state from before the fill records held their time and queue at
    fill, before round trips were counted, before order instructions' post-only flags, before the
    market's volatility estimate, before the response latency and before pegged quotes, loads: those
    fields read NO_TIME and 0 (an empty own-state ring, no peg), every other field as saved; a state
    of no known layout is refused with a message."""
    sim = _sim(kind, QUEUE_ROWS, _params(QUEUE_ROWS, queue_model="risk_averse"))
    run_script(sim, [A.JOIN_BID, A.HOLD, A.HOLD, A.HOLD])
    d = sim.state_dict()
    # what an older run never had
    d["state_i"][[L.S_TRIPS, L.S_VOL_STEPS, L.S_BUY_PEG, L.S_SELL_PEG]], d["state_f"][L.F_TRIP_BASE:] = 0, 0.0
    newer_i = [L.S_TRIPS, L.S_BUY_POST, L.S_SELL_POST, L.S_VOL_STEPS, L.S_RESP_STALE, L.S_BUY_PEG, L.S_SELL_PEG]
    old = {k: v for k, v in d.items() if k not in ("fills_t", "resp_ring")} | {
        "fills_i": d["fills_i"][..., :L.FL_QA_FILL], "state_i": np.delete(d["state_i"], newer_i, axis=0),
        "state_f": d["state_f"][:L.F_TRIP_BASE]}
    sim.load_state_dict(old)
    got = sim.state_dict()
    assert (got["fills_t"] == L.NO_TIME).all() and (got["fills_i"][..., L.FL_QA_FILL] == 0).all()
    assert got["resp_ring"].shape == (L.N_RESP, 1) and (got["resp_ring"] == 0).all()
    np.testing.assert_array_equal(got["fills_i"][..., :L.FL_QA_FILL], old["fills_i"])
    assert (d["fills_i"][..., L.FL_QTY] > 0).any()
    np.testing.assert_array_equal(got["state_i"], d["state_i"])
    np.testing.assert_array_equal(got["state_f"], d["state_f"])
    with pytest.raises(ValueError, match="simulator state of"):
        sim.load_state_dict(d | {"state_i": d["state_i"][:-5]})
    # the layout with round trips counted but no post-only flags
    sim.load_state_dict(d | {"state_i": np.delete(d["state_i"], newer_i[1:], axis=0),
                             "state_f": d["state_f"][:L.F_VOL_MSQ]})
    np.testing.assert_array_equal(sim.state_dict()["state_i"], d["state_i"])
    np.testing.assert_array_equal(sim.state_dict()["state_f"], d["state_f"])
    # the layout with the volatility estimate but no response latency
    sim.load_state_dict({k: v for k, v in d.items() if k != "resp_ring"} |
                        {"state_i": np.delete(d["state_i"], newer_i[4:], axis=0)})
    np.testing.assert_array_equal(sim.state_dict()["state_i"], d["state_i"])
    # the layout with the response latency but no pegged quotes: they read PEG_NONE
    sim.load_state_dict(d | {"state_i": np.delete(d["state_i"], newer_i[5:], axis=0)})
    np.testing.assert_array_equal(sim.state_dict()["state_i"], d["state_i"])


def _host(x):
    return x.copy_to_host() if hasattr(x, "copy_to_host") else np.asarray(x)


# The kernels equal the reference step for step under a response latency (test_lobsim_vs_reference's
# amzn5-response-latency): this hand check runs on the reference and the CPU build.
@pytest.mark.parametrize("kind", ["numpy", "cpu"])
def test_response_latency_delays_the_own_state_seen(kind):
    """Real data, one event a step: a market buy fills in the first step, a sell later. The position the
    agent observes changes first at the step whose row time is >= that of the step end the fill was
    reported at + the latency; at every step it is the true position at the last step end at time <=
    t - latency (the start's, flat, before any), or the ring's oldest in a burst of more step ends
    than it holds (counted). The book part of the observation and the rewards are
    those of a run without the latency."""
    lat = 20_000_000
    md = real_market(rows=400)
    kw = dict(events_per_step=1, episode_steps=0, episode_end="horizon", fills_log_capacity=16, max_position=300)
    make = {"kernels": LobSim, "numpy": ReferenceLobSim, "cpu": CpuLobSim}[kind]
    sim, free = make(md, SimParams(response_latency_ns=lat, **kw), 1, 3), make(md, SimParams(**kw), 1, 3)
    x = L.obx_base(sim.params.obs_levels)
    own = np.zeros(L.obs_dim(sim.params.obs_levels), bool)
    own[x + L.OBX_OWN:x + L.OBX_OWN + L.N_OWN_OBS] = True
    rows, held, seen = [], [], []
    for a in [None, A.MARKET_BUY] + [A.HOLD] * 59 + [A.MARKET_SELL] + [A.HOLD] * 59:
        for s in (sim, free):
            if a is None:
                s.reset()
            else:
                act = np.array([a], np.int32)
                s.step(device_actions(act) if kind == "kernels" else act)
        obs = _host(sim.obs)
        assert (obs[:, ~own] == _host(free.obs)[:, ~own]).all()
        assert (_host(sim.reward) == _host(free.reward)).all()
        rows.append(int(sim.field("cursor")[0]))
        held.append(int(sim.field("inventory")[0]))
        seen.append(round(float(obs[0, x + L.OBX_POSITION]) * sim.params.max_position))
    times = time_ns(md)[rows]
    # the newest step end j >= 1 at time <= t_k - latency, else the start (index 0, flat since before);
    # the ring holds the last RESP_RING of them: past its oldest, the oldest (a stale read)
    newest = [int(np.searchsorted(times[1:k + 1], times[k] - lat, "right")) for k in range(len(rows))]
    oldest = [max(k - L.RESP_RING + 1, 0) for k in range(len(rows))]
    assert seen == [held[max(n, o)] for n, o in zip(newest, oldest)]
    assert int(sim.field("resp_stale")[0]) == sum(n < o for n, o in zip(newest, oldest)) > 0
    bought = held.index(100)                     # the step end the buy's fill was reported at
    first = seen.index(100)
    assert first > bought and times[first] >= times[bought] + lat > times[first - 1]
    sold = held.index(0, bought)
    assert sold < len(held) - 1 and seen[-1] == 0
