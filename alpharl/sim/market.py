"""The two market sources behind one simulator interface.

- :func:`replay_stream` turns a :class:`alpharl.lobster.market.MarketData` into the
  simulator's read-only tables: ``events int32[n, N_EV_COLS]`` and
  ``book int32[n, 4L]`` with prices in ticks and the padding mapped to
  ``ASK_EMPTY`` / ``BID_EMPTY``. Row i of ``book`` is the book after event i.
- :class:`SyntheticMarket` describes the Poisson order-flow generator; the
  simulator then generates each step's events per backtest into tables of
  the same layout (one block of ``events_per_step + 1`` rows per backtest).
"""
from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from alpharl.lobster.errors import at
from alpharl.lobster.format import (ASK_PAD_PRICE, ASK_PRICE, BID_PAD_PRICE, BID_PRICE, BOOK_COLS_PER_LEVEL,
                                    EV_HIDDEN_EXEC, EV_NEW, PRICE_SCALE)
from alpharl.sim.layout import (ARRIVED_BEFORE, ASK_EMPTY, BID_EMPTY, EV_DIR, EV_PRICE, EV_SIZE, EV_TYPE, N_EV_COLS,
                                NO_TIME, OFF_TICK_TRADES)
from alpharl.sim.params import SimParams, SynthParams

#: Event code given to executions at a price between two ticks (hidden
#: midpoint-pegged orders): they never meet the displayed queues, so the
#: simulator treats them as no event for our orders.
EV_OFF_TICK = 0


@dataclass(frozen=True)
class ReplayStream:
    """The historical stream in the simulator's layout (host arrays, read-only)."""

    events: np.ndarray   # int32[n, N_EV_COLS]: type, direction, size, price (ticks)
    book: np.ndarray     # int32[n, 4L]: LOBSTER column order, prices in ticks, sentinels mapped
    levels: int
    tick: int            # price units (1e-4 $) per tick

    @property
    def n_rows(self) -> int:
        return int(self.book.shape[0])


def check_window(params: SimParams, n_rows: int) -> None:
    """ValueError when an episode window of ``params`` does not fit ``n_rows`` replayed rows."""
    if n_rows - params.window_events < 1:
        raise ValueError(f"episode window of {params.window_events} events does not fit "
                         f"in the {n_rows} events of the data")


def nearest_tick(price: np.ndarray, tick: int) -> np.ndarray:
    """The tick hftbacktest rounds a price (int 1e-4 $) onto: (price / 1e4) / (tick / 1e4) in
    float64, halves away from zero (Rust's round). Exact arithmetic would put every half-tick on
    the tick above; the two divisions' rounding puts some below."""
    x = (np.asarray(price, np.int64) / PRICE_SCALE) / (tick / PRICE_SCALE)
    r = np.floor(x)
    return (r + (x - r >= 0.5)).astype(np.int64)


def replay_stream(market, off_tick_trades: str = "drop") -> ReplayStream:
    """Convert a MarketData (prices in 1e-4 $, int64) to int32 ticks. Hidden executions between
    two ticks are dropped (``off_tick_trades="drop"``: type EV_OFF_TICK) or put on the
    nearest tick as hftbacktest does (``"nearest"``; SimParams.off_tick_trades)."""
    if off_tick_trades not in OFF_TICK_TRADES:
        raise ValueError(f"off_tick_trades={off_tick_trades!r}: expected one of {', '.join(OFF_TICK_TRADES)}")
    tick = int(market.tick)
    levels = int(market.levels)
    n = int(market.n_events)
    book64 = np.asarray(market.book, dtype=np.int64)
    book = (book64 // tick).astype(np.int32)   # sizes are divided below, then restored
    book[:, 1::2] = book64[:, 1::2].astype(np.int32)
    for lv in range(levels):
        a = lv * BOOK_COLS_PER_LEVEL + ASK_PRICE
        b = lv * BOOK_COLS_PER_LEVEL + BID_PRICE
        book[book64[:, a] == ASK_PAD_PRICE, a] = ASK_EMPTY
        book[book64[:, b] == BID_PAD_PRICE, b] = BID_EMPTY
    price = np.asarray(market.price, dtype=np.int64)
    events = np.zeros((n, N_EV_COLS), np.int32)
    etype = np.asarray(market.event_type, dtype=np.int32).copy()
    off = (etype == EV_HIDDEN_EXEC) & (price % tick != 0)
    ticks = price // tick
    if off_tick_trades == "drop":
        etype[off] = EV_OFF_TICK
    else:
        ticks[off] = nearest_tick(price[off], tick)
    events[:, EV_TYPE] = etype
    events[:, EV_DIR] = np.asarray(market.direction, dtype=np.int32)
    events[:, EV_SIZE] = np.asarray(market.size, dtype=np.int32)
    events[:, EV_PRICE] = ticks.astype(np.int32)
    for arr in (events, book):
        arr.flags.writeable = False
    return ReplayStream(events=events, book=np.ascontiguousarray(book), levels=levels, tick=tick)


def time_ns(market) -> np.ndarray:
    """int64 ns after midnight of every event (LOBSTER's seconds, rounded to the ns they carry)."""
    return np.rint(np.asarray(market.time, np.float64) * 1e9).astype(np.int64)


def row_times(market, params: SimParams) -> np.ndarray:
    """int64 ns after midnight of every row, which the fills log records with each fill; a
    one-element placeholder when the log is off (never read) or for the synthetic market (no clock:
    its fills record NO_TIME)."""
    if params.fills_log_capacity == 0 or isinstance(market, SyntheticMarket):
        return np.full(1, NO_TIME, np.int64)
    return time_ns(market)


@dataclass(frozen=True)
class LatencyRows:
    """Latencies in time as rows of the replay (host-computed, read by the step once per order /
    observation): ``live_rows[c]`` the row after whose event an order sent at row c goes live,
    ``seen_rows[c]`` the row whose book the agent sees at row c. One-element placeholders when
    the latency is off (never read); ``resp_rows[c]`` the row as of which the agent knows its own
    state at row c (response latency)."""

    live_rows: np.ndarray
    seen_rows: np.ndarray
    resp_rows: np.ndarray


def latency_rows(market, params: SimParams) -> LatencyRows:
    """SimParams.entry_latency_ns / feed_latency_ns / response_latency_ns as rows of ``market``
    (SimParams docs). A synthetic market has no clock: a latency in time is refused (ValueError)."""
    off = np.zeros(1, np.int32)
    if not params.timed:
        return LatencyRows(off, off, off)
    if isinstance(market, SyntheticMarket):
        raise ValueError("entry_latency_ns / feed_latency_ns / response_latency_ns need the timestamps of replayed "
                         "data; the synthetic market has no clock (use latency_events)")
    t = time_ns(market)

    def back(latency):
        """Per row (time t), the last row at time <= t - latency, else the first row."""
        return np.maximum(np.searchsorted(t, t - latency, "right") - 1, 0).astype(np.int32)

    live, seen, resp = off, off, off
    if params.entry_latency_ns > 0:
        live = (np.searchsorted(t, t + params.entry_latency_ns, "right") - 1).astype(np.int32)
    if params.feed_latency_ns > 0:
        seen = back(params.feed_latency_ns)
    if params.response_latency_ns > 0:
        resp = back(params.response_latency_ns)
    return LatencyRows(live, seen, resp)


def order_arrivals(market, params: SimParams) -> np.ndarray:
    """For queue_model "l3_fifo": per row, the row at which the order its message names arrived
    (its new-order message), ARRIVED_BEFORE for an order from before the file or none (hidden
    executions); a one-element placeholder for the other queue models (never read). A synthetic
    market names no orders: refused (ValueError)."""
    if params.queue_model != "l3_fifo":
        return np.zeros(1, np.int32)
    if isinstance(market, SyntheticMarket):
        raise ValueError("queue_model l3_fifo needs the order ids of replayed LOBSTER data; "
                         "the synthetic market has none")
    oid = np.asarray(market.order_id, np.int64)
    arrived = np.full(oid.size, ARRIVED_BEFORE, np.int32)
    new = np.flatnonzero(np.asarray(market.event_type) == EV_NEW)
    # the first new-order message of each id (ids are not reused within a day)
    ids, first = np.unique(oid[new], return_index=True)
    if ids.size:
        pos = np.minimum(np.searchsorted(ids, oid), ids.size - 1)
        known = (oid != 0) & (ids[pos] == oid)
        arrived[known] = new[first][pos[known]]
    return arrived


def fit_episode(params: SimParams, market) -> tuple[SimParams, str | None]:
    """``params`` with the episode shortened to fit a replayed ``market``, and a one-line notice.

    A replayed episode spans ``window_events`` rows and starts at a cursor
    drawn so that the window ends before the last row, so it needs at least
    window_events + 1 rows. Data that long, and a synthetic market, keep
    ``params`` as they are (the same object: nothing about the run changes);
    shorter data gets the longest episode that fits, (n - 1) // events_per_step
    steps, and the notice says so. Data without room for one step is
    refused (LobsterFormatError naming the file).
    """
    n = getattr(market, "n_events", None)
    if n is None or params.window_events < n:
        return params, None
    steps = (n - 1) // params.events_per_step
    if steps < 1:
        raise at(market.source, None, f"{n} events: too few for one step of events_per_step = "
                                      f"{params.events_per_step} events (needs at least {params.events_per_step + 1})")
    fitted = replace(params, episode_steps=steps)
    return fitted, (f"episode shortened to {steps} steps ({fitted.window_events} events) to fit the {n} events "
                    f"of {market.source} (episode_steps = {params.episode_steps} needs "
                    f"{params.window_events + 1}); set [sim] episode_steps to choose")


@dataclass(frozen=True)
class SyntheticMarket:
    """A synthetic market source: pass it to ``LobSim`` / ``ReferenceLobSim``
    in place of a MarketData. Each backtest owns a generated L-level book and
    a PRNG lane of its own (stream ``STREAM_SYNTH`` of the run seed)."""

    params: SynthParams = SynthParams()

    @property
    def levels(self) -> int:
        return self.params.levels

    @property
    def tick(self) -> int:
        return self.params.tick
