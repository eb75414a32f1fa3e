"""``Backtest``: an order-level driver for scripted strategies and evaluation.

    bt = Backtest(CpuLobSim(market, SimParams(episode_steps=0, episode_end="horizon",
                                              fills_log_capacity=4096), 1, seed=0))
    ack = bt.limit(+1, price=223.95, qty=200, post_only=True)   # an Ack: order id, accepted / refused
    bt.run_until(time_ns=bt.time_ns + 5_000_000_000)            # replay 5 s of the day
    bt.replace(ack.order_id, price=224.00)                      # cancel and re-send (a new id)
    bt.market(-1, 200)
    bt.run_until()                                              # to the end of the window
    bt.events()                                                 # pyarrow table of order events

It drives any simulator (``LobSim``, ``ReferenceLobSim``, ``CpuLobSim``) through the step's order
instructions (alpharl.sim.layout ORD_*): requests made between two steps are checked here, acknowledged
at once, and sent with the next step, on the snapshot of its cursor. Each backtest is one
continuous run over the whole window (SimParams.episode_steps = 0, episode_end "horizon": no resets).

What the simulator's state allows, and the driver therefore refuses (an Ack with a reason, logged
as a "refused" event) rather than fakes:
- one open limit order per side (resting or on its way): cancel or replace it first;
- one market order in flight (with an entry latency it waits; it cannot be cancelled);
- an order whose worst case passes max_position (the simulator's own rule for its actions).
Fills that reduce the position stop at flat (the simulator never flips a position in one fill): a
market order's unfilled rest, and that of a limit order marketable on arrival, is cancelled. A
limit order that crosses the book when it goes live fills at once as a taker at the best opposite
price, or, post-only, is cancelled (reason "post_only").

Bad input (an unknown order id, a price off the tick grid, a size <= 0, a side other than +-1, a
backtest out of range) is a ValueError. Order ids are the driver's, per backtest, from 1; the
event log and ``fills()`` name orders by them. Times are ns after midnight of the LOBSTER rows.

With a response latency (SimParams.response_latency_ns) what the exchange does to an order reaches
the strategy that much later: an Ack's ``seen_ns`` and every logged event's but "placed" (the
strategy's own request, known at once) are the event's time + the latency, and ``position`` and
``open_orders`` answer as of now - latency (the fills seen by now; the orders not seen closed). Cash,
equity and the logs' other columns stay the exchange's, as they happened.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pyarrow as pa

from alpharl import actions as A
from alpharl.lobster.format import PRICE_SCALE
from alpharl.sim import layout as L
from alpharl.sim.fills import FILLS_SCHEMA, drain_fills

#: The kinds of order event, in the order they can happen to an order.
EVENTS = ("placed", "refused", "live", "partially_filled", "filled", "cancelled")
#: Columns of the order-event log (one row per event).
EVENTS_SCHEMA = pa.schema([
    ("backtest", pa.int32()),
    ("order_id", pa.int32()),        # the driver's id (per backtest)
    ("event", pa.string()),          # one of EVENTS
    ("order_type", pa.string()),     # "limit" / "market"
    ("side", pa.int8()),             # +1 buy, -1 sell
    ("price", pa.float64()),         # $: the limit price, or a fill's price; null for a market order's other events
    ("quantity", pa.int32()),        # shares: the order's (placed / refused / cancelled: what was left) or the fill's
    ("remaining", pa.int32()),       # shares still open after the event
    ("event_row", pa.int32()),       # replay row the event happened on
    ("time_ns", pa.int64()),         # ns after midnight of that row
    ("queue_ahead", pa.int32()),     # live: queue ahead on arrival; fills: queue ahead just before the fill
    ("reason", pa.string()),         # refused / cancelled: why; null otherwise
    ("seen_ns", pa.int64()),         # when it reaches the strategy: time_ns + response latency ("placed": time_ns)
])
LIMIT, MARKET = "limit", "market"


@dataclass
class Ack:
    """The answer to a request: ``accepted`` (sent with the next step) or refused with ``reason``;
    ``seen_ns`` the time it reaches the strategy (the request's time + the response latency)."""

    order_id: int
    accepted: bool
    reason: str | None
    seen_ns: int


@dataclass
class Order:
    """An order the driver sent (its host-side record)."""

    order_id: int
    order_type: str
    side: int
    qty: int
    price_ticks: int | None = None
    post_only: bool = False
    filled: int = 0
    status: str = "sent"          # sent -> live -> filled / cancelled (market: sent -> filled / cancelled)
    sim_oid: int = -1             # the simulator's order id, known once sent
    closed_seen_ns: int | None = None   # when the strategy learns it filled / was cancelled

    @property
    def remaining(self) -> int:
        return self.qty - self.filled

    @property
    def open(self) -> bool:
        return self.status in ("sent", "live")


#: The state rows of each side's resting order, and of the row it went live at.
_BASE_OF = {L.SIDE_BUY: L.S_BUY_PX, L.SIDE_SELL: L.S_SELL_PX}
_LIVE_ROW_OF = {L.SIDE_BUY: L.S_BUY_LIVE_ROW, L.SIDE_SELL: L.S_SELL_LIVE_ROW}


def _host(x) -> np.ndarray:
    return x.copy_to_host() if hasattr(x, "copy_to_host") else np.asarray(x)


class Backtest:
    """Order-level driver of every backtest of ``sim`` (module docstring). Methods take ``backtest``
    (default 0): the backtests run side by side, one step at a time for all."""

    def __init__(self, sim):
        p = sim.params
        if p.episode_steps != 0 or p.episode_end != "horizon":
            raise ValueError("Backtest runs each backtest once over the whole window: SimParams episode_steps = 0 "
                             "and episode_end = 'horizon'")
        if p.fills_log_capacity == 0:
            raise ValueError("Backtest reads fills from the fills log: SimParams fills_log_capacity must be > 0")
        self.sim = sim
        self.resp_ns = p.response_latency_ns
        self.times = _host(sim.times)
        self.tick_dollars = sim.tick / PRICE_SCALE
        self.reset()

    # ------------------------------------------------------------ lifecycle
    def reset(self) -> None:
        """Every backtest from the window's first row again: flat, no orders, empty logs."""
        self.sim.reset()
        B = self.sim.B
        self.steps = 0
        self._orders: list[dict[int, Order]] = [{} for _ in range(B)]
        # the open ones (status sent / live), so that a step's scans do not grow with the run's orders
        self._open: list[dict[int, Order]] = [{} for _ in range(B)]
        self._by_sim: list[dict[int, int]] = [{} for _ in range(B)]
        self._next_id = np.ones(B, np.int64)
        self._queue: list[list[tuple]] = [[] for _ in range(B)]
        self._events: list[tuple] = []
        self._fills: list[pa.Table] = []
        self._head = np.zeros(B, np.int64)
        self._position = np.zeros(B, np.int64)
        self._fill_seen: list[tuple[int, int, int]] = []   # (backtest, seen_ns, signed shares) of every fill
        self._cash = np.zeros(B, np.float64)
        self._read_state()
        self._equity_before = self._sf[L.F_EQUITY].copy()

    @property
    def done(self) -> bool:
        """True once the window is replayed (no step is left)."""
        return self.steps >= self.sim.window_steps

    @property
    def row(self) -> int:
        """The replay row of the snapshot the next step starts from (the same for every backtest)."""
        return int(self._si[L.S_CURSOR, 0])

    @property
    def time_ns(self) -> int:
        return int(self.times[self.row])

    def _now_ns(self) -> int:
        """The strategy's now: the next step's row time, or at the window's end its last row's (the
        state after it is the next pass's start)."""
        return int(self.times[self.steps * self.sim.E]) if self.done else self.time_ns

    # ------------------------------------------------------------ requests
    def limit(self, side: int, price: float, qty: int, post_only: bool = False, backtest: int = 0) -> Ack:
        """A limit order of ``qty`` shares at ``price`` $ (on the tick grid); ``side`` +1 buy, -1 sell."""
        b = self._check_backtest(backtest)
        side, qty, px = self._check_side(side), self._check_qty(qty), self._ticks(price)
        order = self._new(b, LIMIT, side, qty, px, bool(post_only))
        reason = self._side_busy(b, order) or self._limit_breach(b, side, qty)
        return self._answer(b, order, reason)

    def market(self, side: int, qty: int, backtest: int = 0) -> Ack:
        """A market order of ``qty`` shares walking the visible depth; ``side`` +1 buy, -1 sell."""
        b = self._check_backtest(backtest)
        side, qty = self._check_side(side), self._check_qty(qty)
        order = self._new(b, MARKET, side, qty)
        reason = None
        if any(o is not order and o.open and o.order_type == MARKET for o in self._open[b].values()):
            reason = "a market order is in flight: one at a time"
        elif self._si[L.S_MKT_FLAT, b] != 0:
            reason = "a flatten is pending"
        else:
            reason = self._market_breach(b, side * qty)
        return self._answer(b, order, reason)

    def cancel(self, order_id: int, backtest: int = 0) -> Ack:
        """Cancel an open limit order (with the next step, before its events)."""
        b = self._check_backtest(backtest)
        order = self._known(b, order_id)
        reason = self._not_cancellable(order)
        if reason is None:
            self._queue[b] = [q for q in self._queue[b] if q[1] is not order]
            if order.sim_oid >= 0:              # already with the simulator: cancel it there
                self._queue[b].append(("cancel", order))
            self._close(b, order, "cancelled", self.row, "requested")
        return self._ack(order, reason)

    def replace(self, order_id: int, price: float | None = None, qty: int | None = None, backtest: int = 0) -> Ack:
        """Cancel an open limit order and send a new one on its side (a new id, at the back of the queue),
        at ``price`` / ``qty`` (None: the old order's price / its remaining size) and its post-only flag."""
        b = self._check_backtest(backtest)
        old = self._known(b, order_id)
        px = old.price_ticks if price is None else self._ticks(price)
        qty = old.remaining if qty is None else self._check_qty(qty)
        reason = self._not_cancellable(old)
        if reason is not None:
            return self._ack(old, reason)
        order = self._new(b, LIMIT, old.side, qty, px, old.post_only)
        reason = self._limit_breach(b, old.side, qty)
        if reason is None:
            self.cancel(order_id, backtest)
        return self._answer(b, order, reason)

    # ------------------------------------------------------------ running
    def step(self, n: int = 1) -> int:
        """Replay ``n`` steps (events_per_step rows each; fewer at the window's end); the requests
        since the last step go with the first. Returns the steps taken."""
        n = min(int(n), self.sim.window_steps - self.steps)
        if n <= 0:
            return 0
        if n > 1 and self.steps + n == self.sim.window_steps:
            # the window's last step on its own: the state after it is the next pass's start, so the
            # final equity is read from the equity before it and its reward
            return self.step(n - 1) + self.step(1)
        sim, B = self.sim, self.sim.B
        self._equity_before = self._sf[L.F_EQUITY].copy()
        refused = self._si[L.S_REFUSED].copy()
        orders = np.zeros((n, L.N_ORD, B), np.int32)
        for b in range(B):
            self._instructions(b, orders[0, :, b])
        acts = np.full((n, B), A.HOLD, np.int32)
        if hasattr(sim, "run"):
            sim.run(acts, orders)
        else:
            for k in range(n):
                self._step_one(acts[k], orders[k] if k == 0 else None)
        self.steps += n
        self._after(n)
        if (self._si[L.S_REFUSED] != refused).any() and not self.done:
            raise RuntimeError("the simulator refused an instruction the driver accepted")
        return n

    def run_until(self, time_ns: int | None = None, row: int | None = None) -> int:
        """Replay until the snapshot's time reaches ``time_ns`` (or its row ``row``; neither: the window's
        end), in one call to the simulator. Returns the steps taken."""
        target = len(self.times) if time_ns is None and row is None else (
            int(np.searchsorted(self.times, time_ns, "left")) if row is None else int(row))
        return self.step(max(-(-(target - self.row) // self.sim.E), 0))

    # ------------------------------------------------------------ state
    def position(self, backtest: int = 0) -> int:
        """Shares held (signed): the sum of the fills (the state is the next pass's after the window's end);
        with a response latency, of the fills the strategy has seen by now."""
        b = self._check_backtest(backtest)
        if self.resp_ns == 0:
            return int(self._position[b])
        now = self._now_ns()
        return sum(q for fb, seen, q in self._fill_seen if fb == b and seen <= now)

    def cash(self, backtest: int = 0) -> float:
        """Cash, $ (0 at the start): the fills' prices and fees."""
        return float(self._cash[self._check_backtest(backtest)])

    def equity(self, backtest: int = 0) -> float:
        """Mark-to-market equity at the last step's end: cash + position x mid, $ (at the window's end:
        after the forced flatten, the equity before the last step plus its reward, which holds
        SimParams.inventory_penalty's term when one is set)."""
        b = self._check_backtest(backtest)
        if self.done:
            return float(self._equity_before[b] + _host(self.sim.out)[L.OUT_REWARD, b])
        return float(self._sf[L.F_EQUITY, b])

    def open_orders(self, backtest: int = 0) -> list[Order]:
        """The open orders; with a response latency, those the strategy has not yet seen close (an order
        carries its true state: its events' seen_ns say when the strategy learns of them)."""
        now = self._now_ns()
        return [o for o in self._orders[self._check_backtest(backtest)].values()
                if o.open or (o.closed_seen_ns is not None and o.closed_seen_ns > now)]

    def order(self, order_id: int, backtest: int = 0) -> Order:
        return self._known(self._check_backtest(backtest), order_id)

    def events(self) -> pa.Table:
        """Every order event so far (EVENTS_SCHEMA), in the order they happened per backtest."""
        cols = list(zip(*self._events)) if self._events else [[] for _ in EVENTS_SCHEMA.names]
        return pa.Table.from_arrays([pa.array(c, type=f.type) for c, f in zip(cols, EVENTS_SCHEMA)],
                                    schema=EVENTS_SCHEMA)

    def fills(self) -> pa.Table:
        """Every fill so far (alpharl.sim.fills.FILLS_SCHEMA), order ids the driver's."""
        return pa.concat_tables(self._fills) if self._fills else FILLS_SCHEMA.empty_table()

    # ------------------------------------------------------------ internals
    def _check_backtest(self, b) -> int:
        if not 0 <= int(b) < self.sim.B:
            raise ValueError(f"backtest {b}: the simulator runs backtests 0..{self.sim.B - 1}")
        return int(b)

    @staticmethod
    def _check_side(side) -> int:
        if side not in (L.SIDE_BUY, L.SIDE_SELL):
            raise ValueError(f"side {side!r}: expected +1 (buy) or -1 (sell)")
        return int(side)

    @staticmethod
    def _check_qty(qty) -> int:
        if int(qty) != qty or qty <= 0:
            raise ValueError(f"quantity {qty!r}: expected a whole number of shares > 0")
        return int(qty)

    def _ticks(self, price) -> int:
        ticks = float(price) / self.tick_dollars
        if not np.isfinite(ticks) or ticks <= 0 or abs(ticks - round(ticks)) > 1e-6:
            raise ValueError(f"price {price!r}: not on the tick grid of ${self.tick_dollars:g}")
        return int(round(ticks))

    def _known(self, b: int, order_id) -> Order:
        order = self._orders[b].get(order_id)
        if order is None:
            raise ValueError(f"order id {order_id!r}: no such order in backtest {b}")
        return order

    @staticmethod
    def _not_cancellable(order: Order) -> str | None:
        if order.order_type == MARKET:
            return "a market order cannot be cancelled"
        if not order.open:
            return f"order {order.order_id} is already {order.status}"
        return None

    def _new(self, b, order_type, side, qty, px=None, post_only=False) -> Order:
        order = Order(int(self._next_id[b]), order_type, side, qty, px, post_only)
        self._next_id[b] += 1
        self._orders[b][order.order_id] = order
        self._open[b][order.order_id] = order
        return order

    def _end(self, b: int, order: Order, status: str) -> None:
        """``order`` leaves the open ones with ``status`` (refused, filled, cancelled)."""
        order.status = status
        self._open[b].pop(order.order_id, None)

    def _answer(self, b: int, order: Order, reason: str | None) -> Ack:
        if reason is None:
            self._queue[b].append(("place", order))
            self._log(b, order, "placed", order.qty, self.row)
        else:
            self._end(b, order, "refused")
            self._log(b, order, "refused", order.qty, self.row, reason=reason)
        return self._ack(order, reason)

    def _ack(self, order: Order, reason: str | None) -> Ack:
        """The answer about ``order`` (refused with ``reason``, or accepted), reaching the strategy a
        response latency after now."""
        return Ack(order.order_id, reason is None, reason, self.time_ns + self.resp_ns)

    def _side_busy(self, b: int, new: Order) -> str | None:
        for o in self._open[b].values():
            if o is not new and o.open and o.order_type == LIMIT and o.side == new.side:
                return (f"order {o.order_id} is open on this side: the simulator keeps one limit order per side "
                        f"(cancel or replace it)")
        return None

    def _side_qty(self, b: int, side: int, extra: tuple = ()) -> int:
        """Shares of the side's limit order once this step's queued requests are applied (the simulator
        applies the limit instructions before the market order)."""
        q = int(self._si[L.S_BUY_QTY if side == L.SIDE_BUY else L.S_SELL_QTY, b])
        for kind, o in self._queue[b] + [("place", e) for e in extra]:
            if o.order_type == LIMIT and o.side == side:
                q = 0 if kind == "cancel" else o.qty
        return q

    def _limit_breach(self, b: int, side: int, qty: int) -> str | None:
        """The simulator's position check of a limit order, and of a market order queued before it."""
        inv, mkt, maxp = int(self._si[L.S_INVENTORY, b]), int(self._si[L.S_MKT_QTY, b]), self.sim.params.max_position
        worst = inv + max(mkt, 0) + qty if side == L.SIDE_BUY else inv + min(mkt, 0) - qty
        if abs(worst) > maxp:
            return f"max_position {maxp}: position {inv} with this order could reach {worst}"
        queued_mkt = [o for kind, o in self._queue[b] if kind == "place" and o.order_type == MARKET]
        if queued_mkt:
            probe = Order(0, LIMIT, side, qty)
            if self._market_breach(b, queued_mkt[0].side * queued_mkt[0].qty, (probe,)):
                return f"max_position {maxp}: with the queued market order {queued_mkt[0].order_id}"
        return None

    def _market_breach(self, b: int, q: int, extra: tuple = ()) -> str | None:
        inv, mkt, maxp = int(self._si[L.S_INVENTORY, b]), int(self._si[L.S_MKT_QTY, b]), self.sim.params.max_position
        if q > 0:
            worst = inv + self._side_qty(b, L.SIDE_BUY, extra) + max(mkt, 0) + q
        else:
            worst = inv - self._side_qty(b, L.SIDE_SELL, extra) + min(mkt, 0) + q
        if abs(worst) > maxp:
            return f"max_position {maxp}: position {inv} with the resting orders and this one could reach {worst}"
        return None

    def _instructions(self, b: int, out: np.ndarray) -> None:
        """Fill the step's instruction column ``out`` [N_ORD] of backtest b from its queue; the simulator
        gives ids to the orders it places in the order buy, sell, market."""
        placed = {}
        for kind, o in self._queue[b]:
            ob = L.ORD_BUY if o.side == L.SIDE_BUY else L.ORD_SELL
            if kind == "cancel":
                out[ob + L.OI_OP] = L.OP_CANCEL
            elif o.order_type == LIMIT:
                out[ob + L.OI_OP] = L.OP_PLACE
                out[ob + L.OI_PX] = o.price_ticks
                out[ob + L.OI_QTY] = o.qty
                out[ob + L.OI_POST] = int(o.post_only)
                placed[ob] = o
            else:
                out[L.ORD_MKT_QTY] = o.side * o.qty
                placed[L.ORD_MKT_QTY] = o
        oid = int(self._si[L.S_NEXT_OID, b])
        for slot in (L.ORD_BUY, L.ORD_SELL, L.ORD_MKT_QTY):
            if slot in placed:
                placed[slot].sim_oid = oid
                self._by_sim[b][oid] = placed[slot].order_id
                oid += 1
        self._queue[b] = []

    def _step_one(self, actions, orders) -> None:
        sim = self.sim
        if hasattr(sim.obs, "copy_to_host"):        # a device simulator takes device arrays
            from numba import cuda

            sim.step(cuda.to_device(actions), None if orders is None else cuda.to_device(orders))
        else:
            sim.step(actions, orders)

    def _read_state(self) -> None:
        self._si, self._sf = _host(self.sim.state_i), _host(self.sim.state_f)

    def _log(self, b, order: Order, event, qty, row, price_ticks=None, queue=None, reason=None) -> None:
        px = order.price_ticks if price_ticks is None else price_ticks
        t = int(self.times[row])
        self._events.append((b, order.order_id, event, order.order_type, order.side,
                             None if px is None else px * self.tick_dollars, qty, order.remaining if order.open else 0,
                             row, t, queue, reason, t if event == "placed" else t + self.resp_ns))

    def _close(self, b, order: Order, status, row, reason) -> None:
        left = order.remaining
        self._end(b, order, status)
        order.closed_seen_ns = int(self.times[row]) + self.resp_ns
        self._log(b, order, status, left, row, reason=reason)

    def _after(self, n: int) -> None:
        """Order events of the ``n`` steps just taken, from the fills log and the state after them."""
        sim = self.sim
        end_row = self.row + n * sim.E            # the last snapshot of these steps
        table, self._head, lost = drain_fills(sim, self._head)
        if lost:
            raise RuntimeError(f"the fills ring overwrote {lost} fills: raise SimParams.fills_log_capacity")
        self._read_state()
        si = self._si
        fb = table.column("backtest").to_numpy()
        f_oid = table.column("order_id").to_numpy()
        ours = np.array([self._driver_id(b, o, table, k) for k, (b, o) in enumerate(zip(fb, f_oid))], np.int32)
        self._fills.append(table.set_column(table.schema.get_field_index("order_id"), "order_id", pa.array(ours)))
        rows = table.column("event_row").to_numpy()
        side, qty = table.column("side").to_numpy().astype(np.int64), table.column("quantity").to_numpy()
        px_ticks, queue_at = table.column("price_ticks").to_numpy(), table.column("queue_at_fill").to_numpy()
        np.add.at(self._position, fb, side * qty)
        self._fill_seen += [(int(b), int(self.times[r]) + self.resp_ns, int(q))
                            for b, r, q in zip(fb, rows, side * qty)]
        np.add.at(self._cash, fb, -side * qty * table.column("price").to_numpy() - table.column("fee").to_numpy())
        first = len(self._events)
        for b in range(sim.B):
            mine = np.flatnonzero(fb == b)
            for order in [o for o in self._open[b].values() if o.open]:
                if order.order_type == LIMIT:
                    base = _BASE_OF[order.side]
                    went_live = (order.status == "sent" and si[base + L.O_OID, b] == order.sim_oid
                                 and si[base + L.O_LIVE_AT, b] == L.LIVE)
                    if went_live:
                        live_row = int(si[_LIVE_ROW_OF[order.side], b])
                        own = [k for k in mine if ours[k] == order.order_id]
                        post_cancel = (si[base + L.O_QTY, b] == 0 and not own
                                       and (order.post_only or sim.params.post_only))
                        if post_cancel:
                            self._close(b, order, "cancelled", live_row, "post_only")
                            continue
                        order.status = "live"
                        self._log(b, order, "live", order.qty, live_row, queue=int(si[base + L.O_QA0, b]))
            for k in mine:
                order = self._orders[b][int(ours[k])]
                q = int(qty[k])
                order.filled += q
                if order.remaining == 0:
                    self._end(b, order, "filled")
                    order.closed_seen_ns = int(self.times[rows[k]]) + self.resp_ns
                self._log(b, order, "filled" if order.remaining == 0 else "partially_filled", q, int(rows[k]),
                          price_ticks=int(px_ticks[k]), queue=int(queue_at[k]))
            for order in [o for o in self._open[b].values() if o.open and o.sim_oid >= 0]:
                if order.order_type == MARKET:
                    if si[L.S_MKT_QTY, b] == 0 or si[L.S_MKT_OID, b] != order.sim_oid:
                        self._close(b, order, "cancelled", end_row, "unfilled rest (depth, or the fill stopped at flat)")
                elif self.done:
                    self._close(b, order, "cancelled", end_row, "window end")
                else:
                    base = _BASE_OF[order.side]
                    if si[base + L.O_OID, b] != order.sim_oid or si[base + L.O_QTY, b] == 0:
                        self._close(b, order, "cancelled", end_row, "unfilled rest (the fill stopped at flat)")
        # the steps' events in the order they happened, per backtest (live before fills on one row)
        self._events[first:] = sorted(self._events[first:], key=lambda e: (e[0], e[8]))

    def _driver_id(self, b: int, sim_oid: int, table, k: int) -> int:
        """The driver's id of a fill's order; an order the simulator placed itself (the window end's
        flatten) gets one now, logged as a placed market order."""
        ids = self._by_sim[b]
        if sim_oid not in ids:
            side = int(table.column("side")[k].as_py())
            same = (table.column("backtest").to_numpy() == b) & (table.column("order_id").to_numpy() == sim_oid)
            order = self._new(b, MARKET, side, int(table.column("quantity").to_numpy()[same].sum()))
            order.sim_oid, order.status = sim_oid, "sent"
            ids[sim_oid] = order.order_id
            self._log(b, order, "placed", order.qty, int(table.column("event_row")[k].as_py()),
                      reason="window end: flatten")
        return ids[sim_oid]
