"""NumPy reference of the LOB simulator: the ``numpy`` backend's ``LobSim``; twin of
cuda_kernels/lobsim/step.py (the step's order, the branch-free reset).

``ReferenceLobSim`` has the interface of :class:`alpharl.sim.LobSim` over host
arrays and the same semantics, event by event, as the kernels in
``alpharl.cuda_kernels.lobsim``; it is written independently (vectorised over
the backtests, one masked update per rule) so the two check each other. Its
parts sit in files named as the kernels': book.py, agent.py, observe.py,
synthetic.py; this file holds the host state and the order of one step.

The semantics, in the order one env step applies them to every backtest
(``c`` = its cursor; the snapshot it sees is ``book[c]``, the book after event c):

1. **Action** (ids of :mod:`alpharl.actions`) on the snapshot the agent saw.
   One lot per order. Market buy/sell and flatten become the pending market
   order; join/improve bid/ask (re)place the one resting buy / sell order
   (same price as the existing one: kept, with its queue position, or with
   ``requote = "replace"`` cancelled and sent again: a new order id, the entry
   latency, the back of the queue); with ``peg_quotes`` a join / improve
   order follows its reference price first (before the action, buy then
   sell): off its side's best (a tick inside it for an improve, the best at
   a one-tick spread) on the snapshot the agent sees, it is sent again there
   with its remaining size, a new id, the entry latency and the back of the
   queue (not while that side is empty; not an order instruction's); with
   ``refill_quotes`` too, a pegged side whose order has filled is sent again
   there, one lot, a new id (waiting, uncounted, while the worst case would
   pass ``max_position``); cancel drops both resting orders (and ends their
   pegs); flatten drops them and closes the position at market. Improving
   when the spread is one tick joins instead. Orders are refused (counted in ``refused``) when their side of the book is empty or
   when the worst case of the inventory plus every order on that side would
   pass ``max_position``. **Order instructions** (``step``'s ``orders``,
   layout ORD_*, alpharl.sim.orders drives them) follow the action on the
   same snapshot: per side cancel the resting order, or (re)place it at an
   explicit price (ticks), size and post-only flag (refused past
   ``max_position`` as a join is); then a market order of signed size joins
   the pending one. Every order goes live ``latency_events`` events later,
   or with ``entry_latency_ns`` after the last event at time <= t + latency
   (t: the cursor's time). With ``feed_latency_ns`` the snapshot the agent
   sees (its observation, its join / improve prices) is the last row at time
   <= t - latency; its own orders and position it sees at once, or with
   ``response_latency_ns`` as it observed them at the last step end at time
   <= t - latency (observe.delay_own's ring of the last RESP_RING step ends).
2. **Activation** (at the cursor, and again after every event): a pending
   market order walks the visible depth of the current snapshot level by level
   (taker fills; what the depth cannot fill is dropped, except for a flatten,
   whose remainder fills at the deepest visible price; under ``fill_rule =
   "whole_order"`` the best level takes the whole order). A limit order going
   live takes ``queue_ahead`` = the visible size at its price (0 when the price
   improves the book); one that is marketable by then fills at once as a taker
   at the best opposite price, or with ``post_only`` (or its instruction's
   post-only flag) is cancelled (counted in ``post_cancelled``).
3. **Events** ``c+1 .. c+E``; for each live resting order (buy first):
   an execution (types 4/5) of a same-side limit order at our price consumes
   the queue ahead; an excess over it fills us by ``fill_rule``: "partial"
   min(excess, remaining), "all_or_nothing" the whole order if excess >=
   remaining (else nothing), "whole_order" the whole order. An
   execution beyond our price (the market traded through it), or the opposite
   best reaching our price in the book after the event, fills the whole order.
   Under the probabilistic model a same-side cancellation of size s at our
   price, where S shares were visible, was ahead of us with probability
   queue_ahead / S (test: top 24 PRNG bits x S < queue_ahead x 2^24) and then
   removes s from the queue ahead. Finally the queue ahead is capped by the
   visible size at our price (0 once the level is visibly empty). Maker fills
   are at our limit price. Executions at a price between ticks (hidden
   midpoint orders) never touch displayed queues, or with ``off_tick_trades =
   "nearest"`` are replayed at the tick hftbacktest rounds them onto.
4. **Round trip**: fills that reduce the position are clipped at flat; when
   the position comes back to flat a round trip closes at that event: it is
   counted (``trips``) and the equity then (= cash) is kept as the next trade's
   start (``trip_base``). With ``episode_end = "round_trip"`` the episode ends
   there (resting and pending orders are cancelled; the remaining events only
   move the cursor); with "horizon" the episode and the orders go on.
5. **End of step**: the window ends after ``episode_steps`` steps (truncated;
   with ``force_flatten`` the position closes at market on the last snapshot);
   with ``episode_steps = 0`` the window is the whole data from row 0
   (layout.window_steps). reward = equity - equity at the previous step end
   (equity = cash + inventory x mid, fees already in cash), so an episode's
   rewards sum to its final equity; less, with ``inventory_penalty`` lambda,
   float32(lambda x |inventory| x tick $) (the inventory after the step, in
   float32 after the equity change, so the penalised reward is exactly the
   plain one minus that term); with ``inventory_penalty_unit = "sigma"``
   float32(lambda x sigma x |inventory| x tick $), sigma the RMS of the mid's
   change per step (ticks) over the backtest's steps before this one; with
   ``inventory_penalty_quadratic`` lambda_2, lambda + lambda_2 x |inventory| /
   lot in place of lambda (a term quadratic in the position). Then the
   step's change x (mid after - mid before; not counted where either end has
   no mid, both book sides empty) joins the mean square ``vol_msq``:
   m += (x^2 - m) / min(n, VOL_HORIZON), ``vol_steps`` = n the steps counted;
   no episode end clears them (reset() does). A trade ends where a round trip
   closed this step, or the window truncates an open position; its PnL
   (trade_pnl) is the equity at its end less trip_base, so the trades' PnLs sum to the episode's
   final equity and, round trip per episode, a trade's rewards sum to its PnL.
   Labels compare the mid after the step with the mid before it. Done
   backtests get the reset state (select on done; the PRNG draws one start
   offset every step) and the observation is written (its own-state part,
   under a response latency, an older one; the episode start fills the ring).

The historical book is replayed unchanged: our orders never change it, so two
market orders against the same snapshot would both see its full depth; a
step always advances at least one event, so only orders activated by latency
at the same event can share one.

Fills log (``fills_log_capacity`` > 0): every fill writes one record to its backtest's ring:
the step, the row it filled on (the cursor's snapshot for takers and orders filling as they go
live, the event's row for resting orders) and that row's time (ns after midnight; NO_TIME in the
synthetic market), order id, side, price, size, maker flag, fee, the queue ahead when the order
went live and the queue ahead just before the filling event (what the trade had to pass, or what
the market skipped by trading through or crossing; 0 for takers).

Accounting (float64 $): a fill of q shares at price P with fee f moves cash
by -/+ q P - f; a fill that grows |inventory| moves the average entry price,
one that shrinks it realises q (P - avg) sign(inventory); ``realised`` is net
of all fees, so at flat realised = cash.
"""
from __future__ import annotations

import numpy as np

from alpharl.prng import STREAM_SIM, seed_lanes, xorshift32_np
from alpharl.reference.lobsim.agent import activate, order_event, place_instructions, place_orders, walk
from alpharl.reference.lobsim.book import mid2
from alpharl.reference.lobsim.observe import delay_own, write_obs
from alpharl.reference.lobsim.synthetic import ReferenceSynth
from alpharl.sim import layout as L
from alpharl.sim.market import SyntheticMarket, check_window, replay_stream
from alpharl.sim.outputs import HostState, StepOutputs
from alpharl.sim.params import SimParams

_I32 = np.int32


class ReferenceLobSim(HostState, StepOutputs):
    """B backtests of the LOB simulator on host arrays (same API as ``LobSim``).

    ``market``: a MarketData (historical replay) or a :class:`SyntheticMarket`; ``lanes``: the
    run's backtest indices these backtests are (their STREAM_SIM lanes; default 0..B-1).
    """

    def __init__(self, market, params: SimParams, n_backtests: int, seed: int, lanes=None):
        self._init_backtests(params, n_backtests, seed, lanes)
        self.synthetic = isinstance(market, SyntheticMarket)
        if self.synthetic:
            self.synth = ReferenceSynth(market, self.B, self.E, seed)
            self.levels, self.tick = market.levels, market.tick
            self.events, self.book = self.synth.events, self.synth.book
            n_rows = 0
        else:
            stream = replay_stream(market, params.off_tick_trades)
            self.levels, self.tick = stream.levels, stream.tick
            self.events, self.book = stream.events, stream.book
            n_rows = stream.n_rows
            check_window(params, n_rows)
        self._init_buffers(market, params, n_rows, self.synthetic)
        self.tick_dollars = float(self.fp[L.FP_TICK_DOLLARS])
        self.span = int(self.ip[L.IP_START_SPAN])
        self.backtests = np.arange(self.B)

    # ------------------------------------------------------------ public API
    def reset(self) -> None:
        """Every backtest starts a fresh episode (counters cleared, PRNGs reseeded)."""
        self.rng = seed_lanes(self.seed, self.lanes, STREAM_SIM)
        self.state_i[:] = 0
        self.state_f[:] = 0.0
        self.out[:] = 0.0
        if self.synthetic:
            self.synth.reset()
        start = self._draw_start()
        self.state_i[L.S_CURSOR] = np.where(self.synthetic, 0, start)
        self._clear_episode(np.ones(self.B, bool))
        row = self._obs_rows()
        self.state_i[L.S_MID_HIST:L.S_MID_HIST + L.N_MID_HIST] = mid2(self.book, row)[None, :]
        write_obs(self.obs_buf, self.book, row, self.state_i, self.state_f, self.ip, self.fp)
        self._delay_own(np.ones(self.B, bool))

    def step(self, actions, orders=None) -> None:
        """One env step of every backtest with actions int32[B] (alpharl.actions ids) and order
        instructions ``orders`` int32[N_ORD, B] (alpharl.sim.layout ORD_*; None: none)."""
        si, sf, E = self.state_i, self.state_f, self.E
        actions = np.asarray(actions).astype(_I32)
        if self.synthetic:
            self.synth.generate()
        b = self.backtests
        row0 = self._row0()
        mid_before = mid2(self.book, row0)
        closed = np.zeros(self.B, bool)
        trips0, base0 = si[L.S_TRIPS].copy(), sf[L.F_TRIP_BASE].copy()
        place_orders(self, actions, row0)
        if orders is not None:
            place_instructions(self, orders, row0)
        activate(self, row0, closed)
        for j in range(1, E + 1):
            r0, r1 = row0 + j - 1, row0 + j
            for side in (L.SIDE_BUY, L.SIDE_SELL):
                order_event(self, side, r0, r1, closed)
            si[L.S_CURSOR] += 1
            activate(self, r1, closed)
        row_e = row0 + E
        si[L.S_STEP_IN_EP] += 1
        si[L.S_STEP] += 1
        trunc = ~closed & (si[L.S_STEP_IN_EP] >= self.window_steps)
        flat = trunc & (self.ip[L.IP_FORCE_FLATTEN] != 0) & (si[L.S_INVENTORY] != 0)
        idx = b[flat]
        oid = si[L.S_NEXT_OID, idx].copy()
        si[L.S_NEXT_OID, idx] += 1
        walk(self, idx, -np.sign(si[L.S_INVENTORY, idx]), np.abs(si[L.S_INVENTORY, idx]), row_e[idx], True, oid)
        mid_e = mid2(self.book, row_e)
        equity = sf[L.F_CASH] + si[L.S_INVENTORY] * (mid_e * (0.5 * self.tick_dollars))
        done = closed | trunc
        open_end = trunc & (si[L.S_WAS_OPEN] != 0)        # the window ends a trade still open
        trade_done = (si[L.S_TRIPS] != trips0) | open_end
        base = sf[L.F_TRIP_BASE]
        held = np.abs(si[L.S_INVENTORY]).astype(np.float64)
        lam = self.fp[L.FP_INV_PENALTY]
        if self.ip[L.IP_PENALTY_QUADRATIC]:
            lam = lam + self.fp[L.FP_INV_PENALTY_Q2] * (held / float(self.ip[L.IP_LOT]))   # + lambda_2 |q| / lot
        if self.ip[L.IP_PENALTY_UNIT] == L.PENALTY_SIGMA:
            lam = lam * np.sqrt(sf[L.F_VOL_MSQ])            # sigma of the steps before this one
        penalty = (lam * held * self.tick_dollars).astype(np.float32)
        o = self.out
        o[L.OUT_REWARD] = (equity - sf[L.F_EQUITY]).astype(np.float32) - penalty
        o[L.OUT_DONE] = done
        o[L.OUT_TRUNCATED] = trunc
        o[L.OUT_TRADE_DONE] = trade_done
        o[L.OUT_TRADE_PNL] = ((base - base0) + np.where(open_end, equity - base, 0.0)).astype(np.float32)
        o[L.OUT_LABEL_UP] = mid_e > mid_before
        safe = np.where(mid_before != 0, mid_before, 1).astype(np.float64)
        o[L.OUT_LABEL_RET] = np.where(mid_before != 0, (mid_e - mid_before) / safe, 0.0).astype(np.float32)
        self._observe_move(mid_before, mid_e)
        si[L.S_TRADE_STEPS] += si[L.S_INVENTORY] != 0
        hist = slice(L.S_MID_HIST, L.S_MID_HIST + L.N_MID_HIST)
        mid_seen = mid2(self.book, self._seen(row_e))
        si[hist] = np.concatenate([mid_seen[None, :], si[L.S_MID_HIST:L.S_MID_HIST + L.N_MID_HIST - 1]])
        sf[L.F_EQUITY] = equity
        si[L.S_EPISODE] += done
        # Branch-free auto-reset: a start offset is drawn every step; done selects the reset state.
        start = self._draw_start()
        if not self.synthetic:
            si[L.S_CURSOR] = np.where(done, start, si[L.S_CURSOR])
        self._clear_episode(done)
        row = self._obs_rows()
        si[hist] = np.where(done[None, :], mid2(self.book, row)[None, :], si[hist])
        write_obs(self.obs_buf, self.book, row, self.state_i, self.state_f, self.ip, self.fp)
        self._delay_own(done)

    # accessors (host arrays; LobSim returns device arrays of the same shapes)
    @property
    def obs(self) -> np.ndarray:
        return self.obs_buf

    # output(k), reward, done, ...: StepOutputs

    def state_dict(self) -> dict:
        d = HostState.state_dict(self)
        if self.synthetic:
            d.update(self.synth.state_dict())
        return d

    def load_state_dict(self, d: dict) -> None:
        HostState.load_state_dict(self, d)
        if self.synthetic:
            self.synth.load_state_dict(d)

    # ------------------------------------------------- snapshot rows
    def _row0(self):
        """Each backtest's snapshot row before the step's events."""
        if self.synthetic:
            return self.backtests * (self.E + 1)
        return self.state_i[L.S_CURSOR].astype(np.int64)

    def _obs_rows(self):
        """The rows the observation is written from (after the step, and after a reset): the cursor's
        row, or with a feed latency the row the agent sees then."""
        return self._row0() + self.E if self.synthetic else self._seen(self.state_i[L.S_CURSOR].astype(np.int64))

    def _seen(self, rows):
        """The rows whose book the agent sees at ``rows`` (SimParams.feed_latency_ns)."""
        return self.seen_rows[rows].astype(np.int64) if self.ip[L.IP_FEED_DELAY] else rows

    def _delay_own(self, fresh):
        """The response latency on the observation just written (delay_own; ``fresh``: episode starts)."""
        if self.ip[L.IP_RESP_DELAY]:
            delay_own(self.resp_ring, self.state_i, self.obs_buf, self.state_i[L.S_CURSOR].astype(np.int64), fresh,
                      self.resp_rows, self.ip)

    def _observe_move(self, mid_before, mid_e):
        """The step's mid change (ticks) into the running mean square: the plain mean over the first
        VOL_HORIZON steps, an EMA of that horizon after; steps without a mid at either end skipped."""
        si, sf = self.state_i, self.state_f
        seen = (mid_before != 0) & (mid_e != 0)
        n = np.minimum(si[L.S_VOL_STEPS] + 1, L.VOL_HORIZON)
        x = ((mid_e - mid_before) * 0.5) ** 2
        sf[L.F_VOL_MSQ] = np.where(seen, sf[L.F_VOL_MSQ] + (x - sf[L.F_VOL_MSQ]) / n, sf[L.F_VOL_MSQ])
        si[L.S_VOL_STEPS] = np.where(seen, n, si[L.S_VOL_STEPS])

    # ------------------------------------------------------- reset (draw_start, select_reset)
    def _draw_start(self):
        """One PRNG step per backtest: a window start offset in [0, span)."""
        x = xorshift32_np(self.rng)
        self.rng[:] = x
        return (x % np.uint32(self.span)).astype(_I32)

    def _clear_episode(self, done):
        """The reset state selected where ``done``: flat, no orders, no money, live-at cleared (the
        market's volatility estimate carries on)."""
        si, sf = self.state_i, self.state_f
        for r in (L.S_STEP_IN_EP, L.S_INVENTORY, L.S_WAS_OPEN, L.S_TRADE_STEPS, L.S_BOUGHT, L.S_SOLD,
                  L.S_BUY_PX, L.S_BUY_QTY, L.S_BUY_QA, L.S_BUY_QA0, L.S_BUY_OID, L.S_BUY_LIVE_ROW,
                  L.S_SELL_PX, L.S_SELL_QTY, L.S_SELL_QA, L.S_SELL_QA0, L.S_SELL_OID, L.S_SELL_LIVE_ROW,
                  L.S_MKT_QTY, L.S_MKT_FLAT, L.S_MKT_OID, L.S_BUY_POST, L.S_SELL_POST,
                  L.S_BUY_PEG, L.S_SELL_PEG):
            si[r] = np.where(done, 0, si[r])
        for r in (L.S_BUY_LIVE_AT, L.S_SELL_LIVE_AT, L.S_MKT_LIVE_AT):
            si[r] = np.where(done, L.LIVE, si[r])
        sf[:L.N_EPISODE_F] = np.where(done[None, :], 0.0, sf[:L.N_EPISODE_F])
