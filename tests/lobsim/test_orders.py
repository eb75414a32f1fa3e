"""Order instructions and the order-level driver on real LOBSTER data: the kernels (LobSim), the NumPy
reference and the CPU build (CpuLobSim) agree on every state array after every step; the driver's
ids, acknowledgements, refusals and order-event log; bad requests are ValueErrors."""
import numpy as np
import pyarrow as pa
import pytest
from numba import cuda

from alpharl.lobster.format import ASK_PRICE, BID_PRICE
from alpharl.reference.lobsim import ReferenceLobSim
from alpharl.sim import layout as L
from alpharl.sim.cpu import CpuLobSim
from alpharl.sim.lobsim import LobSim
from alpharl.sim.market import replay_stream
from alpharl.sim.orders import EVENTS, EVENTS_SCHEMA, Backtest
from alpharl.sim.params import SimParams
from lobsim_helpers import compare_states, real_market

BUY, SELL = 1, -1


def _random_orders(rng, book, rows, B):
    """Instructions int32[N_ORD, B] around each backtest's touch (book rows ``rows``): random cancels and
    placements inside, at and through the spread, post-only or not, and market orders."""
    o = np.zeros((L.N_ORD, B), np.int32)
    ask, bid = book[rows, ASK_PRICE], book[rows, BID_PRICE]
    for ob, touch, inward in ((L.ORD_BUY, bid, 1), (L.ORD_SELL, ask, -1)):
        op = rng.choice([L.OP_NONE, L.OP_PLACE, L.OP_CANCEL], size=B, p=[0.5, 0.35, 0.15])
        o[ob + L.OI_OP] = op
        o[ob + L.OI_PX] = touch + inward * rng.integers(-2, 4, size=B)
        o[ob + L.OI_QTY] = rng.integers(1, 4, size=B) * 100 + rng.integers(0, 2, size=B) * 37
        o[ob + L.OI_POST] = rng.integers(0, 2, size=B)
    o[L.ORD_MKT_QTY] = rng.choice([0, 0, 0, 100, -100, 250, -300], size=B)
    return o


@pytest.mark.parametrize("extra", [dict(), dict(latency_events=3, queue_model="l3_fifo", entry_queue="last_seen"),
                                   dict(episode_steps=0, episode_end="horizon", fill_rule="all_or_nothing",
                                        feed_latency_ns=2_000_000),
                                   dict(episode_steps=8, inventory_penalty=0.4, inventory_penalty_unit="sigma",
                                        latency_events=1),
                                   dict(response_latency_ns=30_000_000, entry_latency_ns=1_000_000),
                                   dict(peg_quotes=True, refill_quotes=True, episode_end="horizon",
                                        latency_events=1)])
def test_instructions_kernels_reference_and_cpu_agree(extra, request):
    md = real_market(rows=1_200)
    kw = dict(events_per_step=8, episode_steps=30, fills_log_capacity=512, max_position=800) | extra
    p = SimParams(**kw)
    B, steps = 3, 40
    sims = {"kernels": LobSim(md, p, B, 5), "numpy": ReferenceLobSim(md, p, B, 5), "cpu": CpuLobSim(md, p, B, 5)}
    for s in sims.values():
        s.reset()
    book = replay_stream(md).book
    rng = np.random.default_rng(abs(hash(request.node.name)) % 2**32)
    for t in range(steps):
        acts = rng.choice(9, size=B, p=np.array([6, 1, 1, 1, 1, 1, 1, 1, 1]) / 14).astype(np.int32)
        orders = _random_orders(rng, book, sims["numpy"].state_i[L.S_CURSOR].astype(np.int64), B)
        sims["kernels"].step(cuda.to_device(acts), cuda.to_device(orders))
        sims["numpy"].step(acts, orders)
        sims["cpu"].step(acts, orders)
        ref = sims["numpy"].state_dict()
        for name in ("kernels", "cpu"):
            compare_states(sims[name].state_dict(), ref, f"{name} step {t}")
    si = ref["state_i"]
    assert si[L.S_FILL_HEAD].sum() > 0 and si[L.S_NEXT_OID].min() > 5


def test_cpu_run_equals_steps():
    """Many steps in one call give what one step a call gives."""
    md = real_market(rows=1_500)
    p = SimParams(events_per_step=16, episode_steps=0, episode_end="horizon", fills_log_capacity=2048)
    a, b = CpuLobSim(md, p, 2, 1), CpuLobSim(md, p, 2, 1)
    a.reset(), b.reset()
    acts = np.random.default_rng(3).integers(0, 9, size=(a.window_steps, 2)).astype(np.int32)
    a.run(acts)
    for row in acts:
        b.step(row)
    compare_states(a.state_dict(), b.state_dict(), "run vs step")


def _driver(kind, **kw):
    md = real_market(rows=2_000)
    p = SimParams(**(dict(events_per_step=4, episode_steps=0, episode_end="horizon", fills_log_capacity=1024,
                          max_position=1000) | kw))
    sim = {"numpy": ReferenceLobSim, "cpu": CpuLobSim, "kernels": LobSim}[kind](md, p, 1, 0)
    return Backtest(sim), replay_stream(md).book


def _script(bt, book):
    """Join the bid, try a second bid (refused), improve the ask post-only, run, replace, cancel, trade
    at market, run to the end."""
    tick = bt.tick_dollars
    bid, ask = int(book[bt.row, BID_PRICE]), int(book[bt.row, ASK_PRICE])
    acks = [bt.limit(BUY, bid * tick, 200)]
    acks.append(bt.limit(BUY, (bid - 1) * tick, 100))
    acks.append(bt.limit(SELL, ask * tick, 100, post_only=True))
    acks.append(bt.limit(SELL, (bid - 5) * tick, 100, post_only=True))      # a second sell: refused
    bt.run_until(row=bt.row + 400)
    acks.append(bt.replace(acks[2].order_id, price=(int(book[bt.row, ASK_PRICE]) - 0) * tick, qty=300))
    acks.append(bt.market(BUY, 5_000))                                      # past max_position: refused
    acks.append(bt.market(SELL, 100))
    bt.step(3)
    open_ids = [o.order_id for o in bt.open_orders()]
    acks += [bt.cancel(i) for i in open_ids]
    acks.append(bt.limit(BUY, int(book[bt.row, ASK_PRICE]) * tick, 100, post_only=True))   # crosses: cancelled live
    bt.run_until()
    return acks


@pytest.mark.parametrize("kind", ["numpy", "cpu"])
def test_driver_ids_acks_and_event_log(kind):
    bt, book = _driver(kind)
    acks = _script(bt, book)
    assert [a.order_id for a in acks[:4]] == [1, 2, 3, 4]
    assert [a.accepted for a in acks[:4]] == [True, False, True, False]
    assert "one limit order per side" in acks[1].reason and "one limit order per side" in acks[3].reason
    assert acks[4].accepted and acks[4].order_id == 5                       # replace: a new id
    assert not acks[5].accepted and "max_position" in acks[5].reason
    assert acks[6].accepted
    assert bt.done
    ev = bt.events()
    assert ev.schema.equals(EVENTS_SCHEMA) and set(ev.column("event").to_pylist()) <= set(EVENTS)
    rows = ev.to_pylist()
    by_id = {}
    for r in rows:
        by_id.setdefault(r["order_id"], []).append(r["event"])
    assert by_id[2] == ["refused"] and by_id[4] == ["refused"] and by_id[6] == ["refused"]
    assert by_id[3][0] == "placed" and by_id[3][-1] == "cancelled"          # replaced
    assert by_id[7][0] == "placed" and by_id[7][-1] in ("filled", "cancelled")
    # every order ends closed: filled, cancelled or refused; a fill is logged once per fill record
    for oid, evs in by_id.items():
        assert evs[-1] in ("filled", "cancelled", "refused"), (oid, evs)
    fills = bt.fills()
    n_fill_events = sum(e in ("filled", "partially_filled") for e in ev.column("event").to_pylist())
    assert n_fill_events == fills.num_rows > 0
    assert set(fills.column("order_id").to_pylist()) <= set(by_id)
    # times are the rows' LOBSTER times, non-decreasing per backtest
    t = ev.column("time_ns").to_numpy()
    assert (np.diff(t) >= 0).all() and (t == bt.times[ev.column("event_row").to_numpy()]).all()
    assert (ev.column("seen_ns").to_numpy() == t).all() and acks[0].seen_ns == bt.times[0]   # no response latency
    # the accounts: the fills' cash and position; flat at the end (forced flatten)
    assert bt.position() == 0
    np.testing.assert_allclose(bt.equity(), bt.cash(), atol=1e-6)
    assert pa.Table.from_pylist(rows, schema=EVENTS_SCHEMA).num_rows == ev.num_rows


def test_driver_backends_agree():
    """The same script gives the same event log and fills on the reference, the CPU build and the kernels."""
    logs = {}
    for kind in ("numpy", "cpu", "kernels"):
        bt, book = _driver(kind, events_per_step=16)
        _script(bt, book)
        logs[kind] = (bt.events(), bt.fills(), bt.cash())
    for kind in ("cpu", "kernels"):
        assert logs[kind][0].equals(logs["numpy"][0]), kind
        assert logs[kind][1].drop(["price", "fee"]).equals(logs["numpy"][1].drop(["price", "fee"])), kind
        np.testing.assert_allclose(logs[kind][2], logs["numpy"][2], atol=1e-6)


@pytest.mark.parametrize("kind", ["numpy", "cpu"])
def test_driver_reports_reach_the_strategy_a_response_latency_late(kind):
    """With a response latency the exchange does what it does without one; the strategy learns of it
    that much later: acks and events carry time + latency ("placed": at once), and position /
    open_orders answer as of now - latency (a market buy counts from the first step at or after its
    fill's time + latency)."""
    lat = 300_000_000                # the first steps of the window take 0.15, 0.26, 0.26, 0.34 s
    (bt, book), (free, _) = _driver(kind, response_latency_ns=lat), _driver(kind)
    t0 = bt.time_ns
    ack = bt.market(BUY, 100)
    assert ack.accepted and ack.seen_ns == t0 + lat and free.market(BUY, 100).seen_ns == t0
    bt.step(), free.step()
    fill_t = bt.fills().column("time_ns")[0].as_py()
    assert free.position() == 100 and not free.open_orders()
    waited = 0
    while bt.time_ns < fill_t + lat:
        assert bt.position() == 0 and [o.order_id for o in bt.open_orders()] == [ack.order_id]
        waited += bt.step()
    assert waited > 0 and bt.position() == 100 and not bt.open_orders()
    for d in (bt, free):            # the same requests, by id: a resting bid, later cancelled
        d.step(max(waited - d.steps + 1, 0))
        bid = d.limit(BUY, int(book[d.row, BID_PRICE]) * d.tick_dollars, 200)
        d.run_until(row=d.row + 300)
        d.cancel(bid.order_id)
        d.run_until()
    ev, ref = bt.events(), free.events()
    assert ev.drop(["seen_ns"]).equals(ref.drop(["seen_ns"]))
    placed = np.array([e == "placed" for e in ev.column("event").to_pylist()])
    t = ev.column("time_ns").to_numpy()
    np.testing.assert_array_equal(ev.column("seen_ns").to_numpy(), np.where(placed, t, t + lat))
    assert (~placed).sum() > 2


def test_post_only_cross_is_cancelled_on_arrival():
    bt, book = _driver("cpu")
    ask = int(book[bt.row, ASK_PRICE])
    ack = bt.limit(BUY, ask * bt.tick_dollars, 100, post_only=True)
    bt.step()
    evs = [(r["event"], r["reason"]) for r in bt.events().to_pylist() if r["order_id"] == ack.order_id]
    assert evs == [("placed", None), ("cancelled", "post_only")]
    ack = bt.limit(BUY, ask * bt.tick_dollars, 100)                         # not post-only: a taker fill
    bt.step()
    evs = [r["event"] for r in bt.events().to_pylist() if r["order_id"] == ack.order_id]
    assert evs == ["placed", "live", "filled"] and bt.position() == 100


def test_bad_requests_are_value_errors():
    bt, book = _driver("numpy")
    bid = int(book[bt.row, BID_PRICE])
    with pytest.raises(ValueError, match="tick grid"):
        bt.limit(BUY, bid * bt.tick_dollars + bt.tick_dollars / 3, 100)
    with pytest.raises(ValueError, match="quantity"):
        bt.limit(BUY, bid * bt.tick_dollars, 0)
    with pytest.raises(ValueError, match="quantity"):
        bt.market(SELL, -5)
    with pytest.raises(ValueError, match="side"):
        bt.market(0, 100)
    with pytest.raises(ValueError, match="no such order"):
        bt.cancel(99)
    with pytest.raises(ValueError, match="no such order"):
        bt.replace(42, qty=100)
    with pytest.raises(ValueError, match="backtest"):
        bt.limit(BUY, bid * bt.tick_dollars, 100, backtest=3)
    md = real_market(rows=500)
    with pytest.raises(ValueError, match="episode_steps = 0"):
        Backtest(ReferenceLobSim(md, SimParams(events_per_step=4, episode_steps=10, fills_log_capacity=8), 1, 0))
    with pytest.raises(ValueError, match="fills_log_capacity"):
        Backtest(ReferenceLobSim(md, SimParams(events_per_step=4, episode_steps=0, episode_end="horizon"), 1, 0))
