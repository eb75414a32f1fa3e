"""alpharl against hftbacktest on LOBSTER data, fill for fill.

Converts a LOBSTER day into hftbacktest's event format, runs one scripted
strategy in both backtesters with matched settings, and compares their fills
(row, side, price, quantity, maker or taker, fee) and cash.

    PYTHONPATH=. python benchmarks/vs_hftbacktest.py FILE.zip [FILE.zip ...] [--out results/x.md]

prints the LADDER of comparisons as a Markdown table; needs ``hftbacktest``
(the ``test`` extra). The test suite runs the same comparisons
(tests/backtest/test_vs_hftbacktest.py).

**The clocks.** ``clock="rows"``: row i of the LOBSTER file (message i and the
book after it) is hftbacktest's timestamp i, so ``latency_events = 1`` in
alpharl is a constant entry latency of 1 in hftbacktest (response latency 0):
an order sent at row c reaches the exchange after the events of row c + 1, as
an alpharl order goes live on the book after event c + 1. ``clock="time"``:
LOBSTER's ns are the timestamps, alpharl's ``entry_latency_ns`` is
hftbacktest's constant entry latency and its ``feed_latency_ns`` the offset of
hftbacktest's local timestamps; the strategies decide only at rows that end
their timestamp (hftbacktest's clock cannot stand between two events of one
ns), and fills are compared on the time of their row (a taker fill happens
when the order arrives, between two events: alpharl books it on the row
before).

**The conversion** (``lobster_feed``). Row i becomes, at timestamp i: a trade
event for an execution (types 4 and 5; LOBSTER's direction is the side of the
resting order, so an executed sell order is a buyer-initiated trade), then
depth events for every visible level whose size changed. A level that leaves
the visible top L is not known to be empty (it may only have scrolled out of
view): with ``beyond_view="keep"`` it is deleted only once a price beyond it is
visible or the side shows fewer than L levels, the rule alpharl's queue cap
follows; ``"delete"`` deletes it at once (a plain diff of the L-level
snapshots). Executions at a price between two ticks (hidden midpoint orders)
are passed on (``off_tick="pass"``: hftbacktest rounds them onto a tick) or
dropped (``"drop"``, as alpharl does by default).

**Whole windows in alpharl.** A backtest's episode ends when a round trip
closes and the simulator then restarts it at a random row. To replay a whole
window, each backtest replays one segment of the day and is put back on its
next step's row after every step (``alpharl_fills``): an episode that closed
restarts flat, with no orders, exactly where the segment continues. hftbacktest
replays each segment on its own from a snapshot of the book there (the depth it
knows at that row, levels out of view included), so both start every segment
flat.

**Strategies** (the same decisions at the same rows in both):

- ``market``: a market buy at even steps and a market sell at odd steps (one
  round trip every two steps);
- ``join``: join the touch. Flat: a buy at the best bid; long: a sell at the best
  ask; one order at a time, kept while it is at or better than the touch
  (re-posting at the same price would keep its queue position in alpharl) and
  re-posted at the touch once outbid; nothing while a side of the book is empty;
- ``improve``: the same, one tick inside the spread when it is wider than a
  tick (an order the book can cross during its latency: post-only matters).

**hftbacktest's rules in alpharl** (``HBT_RULES``). hftbacktest's
``NoPartialFillExchange`` fills a taker order whole at the best price (it does
not walk the depth) and a resting order whole once a trade passes the queue
ahead by any amount: ``fill_rule = "whole_order"``. A GTX order that would
cross on arrival is rejected: ``post_only``. Its depth keeps the last size the
feed gave for a price, so an order arriving at a price that has just left the
visible levels queues behind that size: ``entry_queue = "last_seen"``. It
rounds an off-tick trade onto the nearest tick: ``off_tick_trades =
"nearest"``. (``PartialFillExchange`` walks the depth, but in version 2.4.4
reports only the last level's fill of a multi-level taker order to the
strategy, so it is not compared.) What remains: alpharl cancels an order (or
replaces it) at once, hftbacktest's cancel travels with the entry latency, so
with a latency above one row (or a feed latency, which makes the agent replace
orders the market is filling) an order alpharl has re-posted can still fill in
hftbacktest (counted as "fills after a cancel"); and an order sent to a price
out of view queues in hftbacktest behind the last size its feed ever showed
there, in alpharl behind the size on the snapshot the agent saw (0 when not
listed there either).
"""
from __future__ import annotations

import alpharl  # noqa: F401,I001  (first: chooses numba's target before numba loads)

import argparse
import sys
from dataclasses import dataclass, field, replace
from pathlib import Path

import numpy as np
import pyarrow as pa
from hftbacktest import (BUY_EVENT, DEPTH_EVENT, EXCH_EVENT, GTC, GTX, LIMIT, LOCAL_EVENT, MARKET, SELL_EVENT,
                         TRADE_EVENT, BacktestAsset, HashMapMarketDepthBacktest)
from hftbacktest.binding import event_dtype
from hftbacktest.order import CANCELED, EXPIRED, FILLED, REJECTED
from numba import njit

from alpharl import actions as A
from alpharl.atomic import atomic_write
from alpharl.lobster.format import (ASK_PAD_PRICE, ASK_PRICE, ASK_SIZE, BID_PAD_PRICE, BID_PRICE, BID_SIZE,
                                    BOOK_COLS_PER_LEVEL, EV_EXEC, EV_HIDDEN_EXEC, PRICE_SCALE)
from alpharl.lobster.load import load_lobster
from alpharl.reference.lobsim import ReferenceLobSim
from alpharl.sim import layout as L
from alpharl.sim.fills import drain_fills
from alpharl.sim.market import latency_rows, time_ns
from alpharl.sim.params import SimParams

STRATEGIES = ("market", "join", "improve")
MARKET_RT, JOIN, IMPROVE = range(len(STRATEGIES))
#: Fields of a fill, the same in both backtesters (price in ticks, side +1 buy / -1 sell).
FILL_FIELDS = ("row", "side", "price", "qty", "maker")
#: hftbacktest's answer for an empty book side (best_bid_tick / best_ask_tick).
HBT_NO_BID = -(2**63)
HBT_NO_ASK = 2**63 - 1
_EV = EXCH_EVENT | LOCAL_EVENT


# ------------------------------------------------------------------ the feed
@dataclass
class HbtFeed:
    """A LOBSTER day in hftbacktest's events: ``events`` for rows 1..n-1, stamped with their row
    (``segment`` puts them on a clock) and, for every asked start row, the depth hftbacktest
    knows there as events of that row."""

    events: np.ndarray
    snapshots: dict = field(default_factory=dict)
    tick_dollars: float = 0.01

    def segment(self, first: int, stop: int, clock=None, feed_latency: int = 0) -> np.ndarray:
        """The events a replay from the book at row ``first`` to row ``stop`` needs: that book, then
        rows first+1..stop, at timestamp clock[row] (default: the row) on the exchange and that
        plus ``feed_latency`` locally; the starting book is known locally at once (alpharl's agent
        sees the first row when the feed latency reaches before it)."""
        rows = self.events["exch_ts"]
        lo, hi = np.searchsorted(rows, first, "right"), np.searchsorted(rows, stop, "right")
        snap = len(self.snapshots[first])
        data = np.concatenate([self.snapshots[first], self.events[lo:hi]])
        if clock is not None:
            data["exch_ts"] = clock[data["exch_ts"]]
        data["local_ts"] = data["exch_ts"] + feed_latency
        data["local_ts"][:snap] = data["exch_ts"][:snap]
        return data


def _depth(ts: int, buy: bool, price: int, qty: int) -> tuple:
    return (_EV | DEPTH_EVENT | (BUY_EVENT if buy else SELL_EVENT), ts, ts, price / PRICE_SCALE, float(qty), 0, 0, 0.0)


def _visible(book_row: np.ndarray, pcols: np.ndarray, zcols: np.ndarray, pad: int) -> dict:
    prices = book_row[pcols]
    ok = prices != pad
    return dict(zip(prices[ok].tolist(), book_row[zcols][ok].tolist()))


def lobster_feed(md, starts=(), beyond_view: str = "keep", off_tick: str = "pass") -> HbtFeed:
    """hftbacktest's events for the LOBSTER day ``md`` (module docstring: the conversion); the
    book known at each row of ``starts`` is kept as a snapshot."""
    if beyond_view not in ("keep", "delete") or off_tick not in ("pass", "drop"):
        raise ValueError(f"beyond_view={beyond_view!r} off_tick={off_tick!r}")
    book, n, nl = md.book, md.n_events, md.levels
    lv = np.arange(nl) * BOOK_COLS_PER_LEVEL
    sides = ((True, lv + BID_PRICE, lv + BID_SIZE, BID_PAD_PRICE),
             (False, lv + ASK_PRICE, lv + ASK_SIZE, ASK_PAD_PRICE))
    changed = {buy: np.r_[True, np.any(book[1:, np.r_[pc, zc]] != book[:-1, np.r_[pc, zc]], axis=1)]
               for buy, pc, zc, _ in sides}
    known = {True: {}, False: {}}            # price -> size hftbacktest holds, per side (True: bids)
    wanted = set(int(s) for s in starts)
    snapshots, out = {}, []
    trade = np.isin(md.event_type, (EV_EXEC, EV_HIDDEN_EXEC))
    if off_tick == "drop":
        trade &= md.price % md.tick == 0
    for i in range(n):
        if i > 0 and trade[i]:
            # direction = side of the executed resting order: a sell order executed = a buyer's trade
            flag = BUY_EVENT if md.direction[i] < 0 else SELL_EVENT
            out.append((_EV | TRADE_EVENT | flag, i, i, md.price[i] / PRICE_SCALE, float(md.size[i]), 0, 0, 0.0))
        for buy, pc, zc, pad in sides:
            if not changed[buy][i]:
                continue
            vis = _visible(book[i], pc, zc, pad)
            have = known[buy]
            full = len(vis) == nl
            deepest = (min(vis) if buy else max(vis)) if vis else None
            for p in list(have):
                if p in vis:
                    continue
                beyond = full and (p < deepest if buy else p > deepest)
                if beyond_view == "delete" or not beyond:
                    del have[p]
                    if i > 0:
                        out.append(_depth(i, buy, p, 0))
            for p, q in vis.items():
                if have.get(p) != q:
                    have[p] = q
                    if i > 0:
                        out.append(_depth(i, buy, p, q))
        if i in wanted:
            snapshots[i] = np.array([_depth(i, buy, p, q) for buy in (True, False) for p, q in known[buy].items()],
                                    dtype=event_dtype)
    return HbtFeed(np.array(out, dtype=event_dtype), snapshots, md.tick / PRICE_SCALE)


# ----------------------------------------------------------- the strategies
#: alpharl's settings of hftbacktest's rules: its no-partial exchange (fill_rule), GTX joins
#: (post_only), the depth it keeps for a price out of view (entry_queue) and its rounding of
#: off-tick trades.
HBT_RULES = SimParams(fill_rule="whole_order", post_only=True, entry_queue="last_seen", off_tick_trades="nearest")


CLOCKS = ("rows", "time")


@dataclass(frozen=True)
class Match:
    """Matched settings of one comparison."""

    strategy: str = "market"
    every: int = 2000
    """Rows between two decisions (alpharl's events_per_step)."""
    lot: int = 100
    clock: str = "rows"
    """"rows": hftbacktest's timestamps are the rows, ``latency`` counts rows. "time": they are
    LOBSTER's ns, ``entry_ns`` / ``feed_ns`` are alpharl's entry_latency_ns / feed_latency_ns and
    hftbacktest's constant entry latency / the local timestamps' offset; decisions are taken
    only at rows that end their timestamp (hftbacktest's clock cannot stand between two events
    of the same ns)."""
    latency: int = 1
    """Entry latency in rows (alpharl's latency_events; hftbacktest's constant entry latency)."""
    entry_ns: int = 0
    feed_ns: int = 0
    maker_fee: float = -0.0002
    taker_fee: float = 0.0003
    """Per-value fees (negative: rebate), in both backtesters."""
    sim: SimParams = SimParams()
    """alpharl's order rules (fill_rule, post_only, entry_queue, off_tick_trades; HBT_RULES match
    hftbacktest); events_per_step, lot, latency, fees and the risk-averse queue are set from the
    above. hftbacktest's joins are GTX when ``sim.post_only``, else GTC."""

    def __post_init__(self):
        timed = self.clock == "time"
        if self.clock not in CLOCKS or (timed and self.entry_ns <= 0) or (not timed and self.latency < 1):
            raise ValueError(f"Match: clock={self.clock!r} needs a positive {'entry_ns' if timed else 'latency'}")

    def sim_params(self, n_rows: int) -> SimParams:
        timed = self.clock == "time"
        return replace(self.sim, events_per_step=self.every, episode_steps=max((n_rows - 1) // self.every, 1),
                       lot_size=self.lot, max_position=max(self.sim.max_position, self.lot),
                       latency_events=0 if timed else self.latency,
                       entry_latency_ns=self.entry_ns if timed else 0, feed_latency_ns=self.feed_ns if timed else 0,
                       maker_fee=self.maker_fee, taker_fee=self.taker_fee, fee_mode="per_value",
                       queue_model="risk_averse", force_flatten=False, fills_log_capacity=64)

    def hbt_latency(self) -> int:
        return self.entry_ns if self.clock == "time" else self.latency


@njit
def hbt_strategy(hbt, kind, ts, act, lot, tif, out_i, out_f):
    """Run ``kind`` (MARKET_RT / JOIN / IMPROVE) with decisions at the local times ts[:-1] (where
    ``act``) up to ts[-1]. Every fill goes to out_i [exchange time, side, price tick, qty, maker]
    and the fees paid since the last look to out_f. Returns (fills, post-only rejections, fills
    of orders whose cancel was in flight)."""
    nf = 0
    fee0 = 0.0
    next_id = 1
    live = 0          # our order in flight or resting (0: none)
    live_px = 0
    live_side = 0
    rejected = 0
    late = 0
    hbt.elapse(0)
    hbt.elapse(ts[0] - hbt.current_timestamp)
    for t in range(ts.size - 1):
        if act[t]:
            d = hbt.depth(0)
            bid, ask = d.best_bid_tick, d.best_ask_tick
            if kind == MARKET_RT:
                if t % 2 == 0:
                    hbt.submit_buy_order(0, next_id, d.best_ask, lot, GTC, MARKET, False)
                else:
                    hbt.submit_sell_order(0, next_id, d.best_bid, lot, GTC, MARKET, False)
                live = next_id
                next_id += 1
            elif bid != HBT_NO_BID and ask != HBT_NO_ASK:
                buy = hbt.position(0) < 0.5
                touch = bid if buy else ask
                inside = kind == IMPROVE and ask - bid > 1          # one tick inside a spread wider than a tick
                px = touch + (1 if buy else -1) if inside else touch
                side = 1 if buy else -1
                keep = live != 0 and live_side == side and (live_px >= touch if buy else live_px <= touch)
                if not keep:
                    if live != 0:
                        hbt.cancel(0, live, False)
                    if buy:
                        hbt.submit_buy_order(0, next_id, px * d.tick_size, lot, tif, LIMIT, False)
                    else:
                        hbt.submit_sell_order(0, next_id, px * d.tick_size, lot, tif, LIMIT, False)
                    live, live_px, live_side = next_id, px, side
                    next_id += 1
        end = hbt.elapse(ts[t + 1] - hbt.current_timestamp) != 0
        # every order that ended since the last look (the last events are processed all the same)
        fee = hbt.state_values(0).fee
        first = nf
        values = hbt.orders(0).values()
        while True:
            o = values.next()
            if o is None:
                break
            st = o.status
            if st == FILLED:
                out_i[nf, 0] = o.exch_timestamp
                out_i[nf, 1] = o.side
                out_i[nf, 2] = o.exec_price_tick
                out_i[nf, 3] = int(o.exec_qty + 0.5)
                out_i[nf, 4] = 1 if o.arr[0].maker else 0
                out_f[nf, 0] = 0.0
                late += 0 if o.order_id == live else 1
                nf += 1
            elif st == EXPIRED and o.order_id == live:
                rejected += 1
            if o.order_id == live and (st == FILLED or st == EXPIRED or st == CANCELED or st == REJECTED):
                live = 0
        if nf > first:
            out_f[first, 0] = fee - fee0
            fee0 = fee
        hbt.clear_inactive_orders(0)
        if end:
            break
    if kind == MARKET_RT:
        late = 0            # market orders are never cancelled: each one fills before the next
    return nf, rejected, late


def _asset(data: np.ndarray, m: Match, tick_dollars: float):
    """hftbacktest's asset of a segment: constant entry latency (response 0), risk-averse queue,
    no-partial exchange, per-value fees, one-share lots."""
    return (BacktestAsset().data(data).linear_asset(1.0).constant_order_latency(m.hbt_latency(), 0)
            .risk_adverse_queue_model().no_partial_fill_exchange()
            .trading_value_fee_model(m.maker_fee, m.taker_fee).tick_size(tick_dollars).lot_size(1.0))


@dataclass
class SideResult:
    """One backtester's fills per segment (int64 [k, 5]: FILL_FIELDS, sorted, the row as a Timeline
    key) with each segment's fees, cash and position."""

    fills: list
    fees: np.ndarray
    cash: np.ndarray
    position: np.ndarray
    rejected: int = 0          # post-only orders cancelled for crossing
    late_fills: int = 0        # fills of an order whose cancel was in flight (hftbacktest)


@dataclass
class Timeline:
    """The decisions of a run: per segment, its steps' rows; the clock of each row (its index, or
    its ns); which decisions are taken (time clock: rows that end their timestamp); and the key
    fills are compared on: the clock of the fill's row."""

    md: object
    m: Match
    starts: np.ndarray
    steps: int

    def __post_init__(self):
        n = self.md.n_events
        self.rows = self.starts[:, None] + self.m.every * np.arange(self.steps + 1)[None, :]
        if self.m.clock == "rows":
            self.clock = np.arange(n, dtype=np.int64)
            self.act = np.ones(self.rows.shape, bool)
        else:
            self.clock = time_ns(self.md)
            ends = np.r_[self.clock[1:] > self.clock[:-1], True]
            self.act = ends[self.rows]
        self.seen = (latency_rows(self.md, self.m.sim_params(n)).seen_rows if self.m.feed_ns and
                     self.m.clock == "time" else None)

    def first_row(self, k: int) -> int:
        """The row whose book a segment's replay in hftbacktest starts from (what it sees first)."""
        r = int(self.starts[k])
        return int(self.seen[r]) if self.seen is not None else r

    def key_of_rows(self, rows):
        return self.clock[rows] if self.m.clock == "time" else rows

    def key_of_time(self, ts):
        """An hftbacktest fill's exchange time as the key: the time of the last row at or before it
        (a taker fills when its order arrives, between events; alpharl books it on that row)."""
        return self.clock[np.searchsorted(self.clock, ts, "right") - 1]


def _sorted(f: np.ndarray) -> np.ndarray:
    return f[np.lexsort(f.T[::-1])] if len(f) else f.reshape(0, len(FILL_FIELDS))


def hbt_fills(feed: HbtFeed, tl: Timeline) -> SideResult:
    """hftbacktest's run of the strategy on every segment."""
    m = tl.m
    if m.every <= (m.latency if m.clock == "rows" else 0):
        raise ValueError(f"every={m.every}: decisions must lie further apart than the latency {m.latency}")
    fills, fees, cash, pos, rejected, late = [], [], [], [], 0, 0
    kind = STRATEGIES.index(m.strategy)
    clock = tl.clock if m.clock == "time" else None
    feed_latency = m.feed_ns if m.clock == "time" else 0
    for k in range(len(tl.starts)):
        rows = tl.rows[k]
        data = feed.segment(tl.first_row(k), int(rows[-1]), clock, feed_latency)
        hbt = HashMapMarketDepthBacktest([_asset(data, m, feed.tick_dollars)])
        cap = 4 * tl.steps + 8
        out_i, out_f = np.zeros((cap, 5), np.int64), np.zeros((cap, 1), np.float64)
        tif = GTX if m.sim.post_only else GTC
        nf, rej, lf = hbt_strategy(hbt, kind, tl.clock[rows], tl.act[k], float(m.lot), tif, out_i, out_f)
        sv = hbt.state_values(0)
        cash.append(sv.balance - sv.fee)
        pos.append(hbt.position(0))
        hbt.close()
        f = out_i[:nf].copy()
        f[:, 0] = tl.key_of_time(f[:, 0])
        fills.append(_sorted(f))
        fees.append(out_f[:nf, 0].sum())
        rejected += rej
        late += lf
    return SideResult(fills, np.array(fees), np.array(cash), np.array(pos), rejected, late)


# ------------------------------------------------------------ alpharl's side
def _policy(sim, kind: int, t: int, act: np.ndarray) -> np.ndarray:
    """The strategy's actions for every backtest at its step t (alpharl ids); HOLD where not ``act``."""
    si = sim.state_i
    if kind == MARKET_RT:
        a = np.full(sim.B, A.MARKET_BUY if t % 2 == 0 else A.MARKET_SELL, np.int32)
        return np.where(act, a, A.HOLD).astype(np.int32)
    rows = si[L.S_CURSOR]
    if sim.ip[L.IP_FEED_DELAY]:
        rows = sim.seen_rows[rows]            # the book the agent sees
    bid, ask = sim.book[rows, BID_PRICE], sim.book[rows, ASK_PRICE]
    post = (A.IMPROVE_BID, A.IMPROVE_ASK) if kind == IMPROVE else (A.JOIN_BID, A.JOIN_ASK)
    buy = si[L.S_INVENTORY] <= 0
    base = np.where(buy, L.S_BUY_PX, L.S_SELL_PX)
    b = np.arange(sim.B)
    qty, px = si[base + L.O_QTY, b], si[base + L.O_PX, b]
    keep = (qty > 0) & np.where(buy, px >= bid, px <= ask)
    ok = (bid != L.BID_EMPTY) & (ask != L.ASK_EMPTY)
    return np.where(keep | ~ok | ~act, A.HOLD, np.where(buy, post[0], post[1])).astype(np.int32)


def alpharl_fills(tl: Timeline, params: SimParams | None = None) -> SideResult:
    """The reference simulator's run of the strategy: backtest k replays segment k, put back on
    its next step's row after every step (module doc)."""
    md, m = tl.md, tl.m
    params = params or m.sim_params(md.n_events)
    B = tl.starts.size
    sim = ReferenceLobSim(md, params, B, seed=0)
    sim.reset()
    si, sf = sim.state_i, sim.state_f
    si[L.S_CURSOR] = tl.starts
    kind = STRATEGIES.index(m.strategy)
    last = np.zeros(B, np.int64)
    closed = np.zeros(B, np.float64)
    tables = []
    for t in range(tl.steps):
        sim.step(_policy(sim, kind, t, tl.act[:, t]))
        table, last, lost = drain_fills(sim, last)
        assert lost == 0
        tables.append(table)
        done = sim.out[L.OUT_DONE] != 0
        closed += np.where(done, sim.out[L.OUT_TRADE_PNL].astype(np.float64), 0.0)
        si[L.S_CURSOR] = tl.rows[:, t + 1]
    t = pa.concat_tables(tables)
    cols = {k: t.column(k).to_numpy() for k in ("backtest", "event_row", "side", "price_ticks", "quantity",
                                                "maker", "fee")}
    fills, fees = [], []
    for k in range(B):
        sel = cols["backtest"] == k
        f = np.stack([tl.key_of_rows(cols["event_row"][sel]), cols["side"][sel], cols["price_ticks"][sel],
                      cols["quantity"][sel], cols["maker"][sel]], axis=1).astype(np.int64)
        fills.append(_sorted(f))
        fees.append(cols["fee"][sel].sum())
    return SideResult(fills, np.array(fees), closed + sf[L.F_CASH], si[L.S_INVENTORY].astype(np.float64),
                      int(si[L.S_POST_CANCELLED].sum()))


# ------------------------------------------------------------ comparison
@dataclass
class Comparison:
    """How two runs of the same segments compare."""

    segments: int
    fills: tuple               # (alpharl fills, hftbacktest fills)
    equal_fills: int           # fills equal in both, in order, before a segment's first difference
    equal_segments: int        # segments whose fills, fees, cash and position all agree
    first_differences: list = field(default_factory=list)   # (segment, alpharl fill, hftbacktest fill)
    max_fee_error: float = 0.0
    max_cash_error: float = 0.0
    rejected: tuple = (0, 0)   # post-only orders cancelled for crossing (alpharl, hftbacktest)
    late_fills: int = 0        # hftbacktest's fills of orders alpharl had cancelled (the cancel in flight)
    sides: tuple = ()          # the two SideResults compared

    def fills_of(self, who: str, segment: int) -> list:
        """One backtester's ("alpharl" / "hftbacktest") fills of a segment, as lists of FILL_FIELDS."""
        return self.sides[0 if who == "alpharl" else 1].fills[segment].tolist()

    def line(self) -> str:
        return (f"{self.equal_segments}/{self.segments} segments equal, fills {self.fills[0]} alpharl / "
                f"{self.fills[1]} hftbacktest, {self.equal_fills} equal before a segment's first difference")


def compare(a: SideResult, h: SideResult, tol: float = 0.005) -> Comparison:
    """Fill for fill (FILL_FIELDS exactly), each segment's fees, cash (to ``tol`` dollars) and position."""
    c = Comparison(len(a.fills), (sum(len(f) for f in a.fills), sum(len(f) for f in h.fills)), 0, 0,
                   rejected=(a.rejected, h.rejected), late_fills=h.late_fills, sides=(a, h))
    for k, (fa, fh) in enumerate(zip(a.fills, h.fills)):
        n = min(len(fa), len(fh))
        same = np.all(fa[:n] == fh[:n], axis=1) if n else np.zeros(0, bool)
        first = int(np.argmin(same)) if n and not same.all() else n
        c.equal_fills += first
        fee_err = abs(float(a.fees[k] - h.fees[k]))
        cash_err = abs(float(a.cash[k] - h.cash[k]))
        if first == len(fa) == len(fh):
            c.max_fee_error = max(c.max_fee_error, fee_err)
            c.max_cash_error = max(c.max_cash_error, cash_err)
            if fee_err <= tol and cash_err <= tol and a.position[k] == h.position[k]:
                c.equal_segments += 1
                continue
        c.first_differences.append((k, fa[first].tolist() if first < len(fa) else None,
                                    fh[first].tolist() if first < len(fh) else None))
    return c


def segment_starts(n_rows: int, every: int, steps: int, first: int = 0) -> np.ndarray:
    """Back-to-back segments of steps x every rows from ``first``, all inside the data."""
    span = steps * every
    k = max((n_rows - 1 - first - every) // span, 0)
    return first + span * np.arange(k, dtype=np.int64)


def cross_check(md, m: Match, steps: int, feed: HbtFeed | None = None, params: SimParams | None = None,
                starts=None) -> Comparison:
    """Run ``m.strategy`` over back-to-back segments of ``md`` in both backtesters and compare;
    ``feed`` must hold a snapshot at every segment's first row (Timeline.first_row)."""
    starts = segment_starts(md.n_events, m.every, steps) if starts is None else np.asarray(starts, np.int64)
    tl = Timeline(md, m, starts, steps)
    feed = feed or lobster_feed(md, first_rows(tl))
    return compare(alpharl_fills(tl, params), hbt_fills(feed, tl))


def first_rows(tl: Timeline) -> np.ndarray:
    """Every segment's first row: the rows whose books a feed must keep."""
    return np.array([tl.first_row(k) for k in range(len(tl.starts))], np.int64)


#: (rows between decisions, decisions per segment) of each strategy, on a whole day and on a short cut.
PLANS = {"day": {"market": (2000, 2), "join": (10, 200), "improve": (10, 200)},
         "cut": {"market": (100, 2), "join": (10, 50), "improve": (10, 50)}}
#: The report's comparisons: alpharl's defaults, then hftbacktest's rules added one at a time.
LADDER = (
    ("market, 1 share, defaults", dict(strategy="market", lot=1)),
    ("market, 100 shares, defaults", dict(strategy="market")),
    ("market, 100 shares, fill_rule whole_order", dict(strategy="market", sim=SimParams(fill_rule="whole_order"))),
    ("join, defaults (partial fills)", dict(strategy="join")),
    ("join, all_or_nothing", dict(strategy="join", sim=SimParams(fill_rule="all_or_nothing"))),
    ("join, whole_order", dict(strategy="join", sim=SimParams(fill_rule="whole_order"))),
    ("join, whole_order + entry_queue last_seen",
     dict(strategy="join", sim=SimParams(fill_rule="whole_order", entry_queue="last_seen"))),
    ("join, ... + off_tick_trades nearest", dict(strategy="join", sim=replace(HBT_RULES, post_only=False))),
    ("join, ... + post_only (hftbacktest's rules)", dict(strategy="join", sim=HBT_RULES)),
    ("join, hftbacktest's rules, latency 2", dict(strategy="join", sim=HBT_RULES, latency=2)),
    ("join, hftbacktest's rules, latency 5", dict(strategy="join", sim=HBT_RULES, latency=5)),
    ("improve, hftbacktest's rules with GTC joins", dict(strategy="improve", sim=replace(HBT_RULES, post_only=False))),
    ("improve, hftbacktest's rules", dict(strategy="improve", sim=HBT_RULES)),
    ("market, 100 shares, whole_order, in time: entry 10 ms, feed 20 ms",
     dict(strategy="market", sim=SimParams(fill_rule="whole_order"), clock="time", entry_ns=10**7, feed_ns=2 * 10**7)),
    ("improve, hftbacktest's rules, in time: entry 0.1 ms",
     dict(strategy="improve", sim=HBT_RULES, clock="time", entry_ns=10**5)),
    ("improve, hftbacktest's rules, in time: entry 0.1 ms, feed 20 ms",
     dict(strategy="improve", sim=HBT_RULES, clock="time", entry_ns=10**5, feed_ns=2 * 10**7)),
    ("improve, hftbacktest's rules, in time: entry 10 ms",
     dict(strategy="improve", sim=HBT_RULES, clock="time", entry_ns=10**7)),
    ("improve, hftbacktest's rules, in time: entry 10 ms, feed 20 ms",
     dict(strategy="improve", sim=HBT_RULES, clock="time", entry_ns=10**7, feed_ns=2 * 10**7)),
)


def report(files, plan: str = "day") -> str:
    """The LADDER on every file, as a Markdown table (totals over the files; segments equal per file)."""
    days = []
    for f in files:
        md = load_lobster(f)
        starts = {k: segment_starts(md.n_events, e, s) for k, (e, s) in PLANS[plan].items()}
        firsts = [first_rows(Timeline(md, Match(every=PLANS[plan][kw["strategy"]][0], **kw),
                                      starts[kw["strategy"]], PLANS[plan][kw["strategy"]][1])) for _, kw in LADDER]
        days.append((md, starts, lobster_feed(md, np.unique(np.concatenate(firsts)))))
    names = ", ".join(f"{md.ticker} L{md.levels}" for md, _, _ in days)
    lines = [f"| comparison | segments equal ({names}) | fills alpharl / hftbacktest | equal fills | "
             "post-only cancels | fills after a cancel |", "|---|---|---|---|---|---|"]
    for label, kw in LADDER:
        every, steps = PLANS[plan][kw["strategy"]]
        cs = [cross_check(md, Match(every=every, **kw), steps, feed=feed, starts=starts[kw["strategy"]])
              for md, starts, feed in days]
        seg = " ".join(f"{c.equal_segments}/{c.segments}" for c in cs)
        lines.append(f"| {label} | {seg} | {sum(c.fills[0] for c in cs)} / {sum(c.fills[1] for c in cs)} | "
                     f"{sum(c.equal_fills for c in cs)} | {sum(c.rejected[1] for c in cs)} | "
                     f"{sum(c.late_fills for c in cs)} |")
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("files", nargs="+", help="LOBSTER files (zip, CSV pair, folder)")
    ap.add_argument("--plan", choices=tuple(PLANS), default="day",
                    help="segments of a whole day or of a short cut (module PLANS)")
    ap.add_argument("--out", help="also write the table to this Markdown file")
    args = ap.parse_args(argv)
    table = report(args.files, args.plan)
    print(table, end="")
    if args.out:
        atomic_write(Path(args.out), table)
    return 0


if __name__ == "__main__":
    sys.exit(main())
