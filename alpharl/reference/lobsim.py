"""NumPy reference of the LOB simulator: the ``numpy`` backend's ``LobSim``.

``ReferenceLobSim`` has the interface of :class:`alpharl.sim.LobSim` over host
arrays and the same semantics, event by event, as the kernels in
``alpharl.cuda_kernels.lobsim``; it is written independently (vectorised over
the backtests, one masked update per rule) so the two check each other.

The semantics, in the order one env step applies them to every backtest
(``c`` = its cursor; the snapshot it sees is ``book[c]``, the book after event c):

1. **Action** (ids of :mod:`alpharl.actions`) on the snapshot the agent saw.
   One lot per order. Market buy/sell and flatten become the pending market
   order; join/improve bid/ask (re)place the one resting buy / sell order
   (same price as the existing one: kept, with its queue position); cancel
   drops both resting orders; flatten drops them and closes the position at
   market. Improving when the spread is one tick joins instead. Orders are
   refused (counted in ``refused``) when their side of the book is empty or
   when the worst case of the inventory plus every order on that side would
   pass ``max_position``. Every order goes live ``latency_events`` events later.
2. **Activation** (at the cursor, and again after every event): a pending
   market order walks the visible depth of the current snapshot level by level
   (taker fills; what the depth cannot fill is dropped, except for a flatten,
   whose remainder fills at the deepest visible price). A limit order going
   live takes ``queue_ahead`` = the visible size at its price (0 when the price
   improves the book); one that is marketable by then fills at once as a taker
   at the best opposite price.
3. **Events** ``c+1 .. c+E``; for each live resting order (buy first):
   an execution (types 4/5) of a same-side limit order at our price consumes
   the queue ahead; what exceeds it fills us (partial, or all-or-nothing). An
   execution beyond our price (the market traded through it), or the opposite
   best reaching our price in the book after the event, fills the whole order.
   Under the probabilistic model a same-side cancellation of size s at our
   price, where S shares were visible, was ahead of us with probability
   queue_ahead / S (test: top 24 PRNG bits x S < queue_ahead x 2^24) and then
   removes s from the queue ahead. Finally the queue ahead is capped by the
   visible size at our price (0 once the level is visibly empty). Maker fills
   are at our limit price. Executions at a price between ticks (hidden
   midpoint orders) never touch displayed queues.
4. **Round trip**: fills that reduce the position are clipped at flat; when
   the position comes back to flat the episode ends at that event (resting and
   pending orders are cancelled; the remaining events only move the cursor).
5. **End of step**: the window ends after ``episode_steps`` steps (truncated;
   with ``force_flatten`` the position closes at market on the last snapshot).
   reward = equity - equity at the previous step end (equity = cash +
   inventory x mid, fees already in cash), so an episode's rewards sum to its
   final equity = the trade's PnL. Labels compare the mid after the step with
   the mid before it. Done backtests get the reset state (select on done; the
   PRNG draws one start offset every step) and the observation is written.

The historical book is replayed unchanged: our orders never change it, so two
market orders against the same snapshot would both see its full depth; a
step always advances at least one event, so only orders activated by latency
at the same event can share one.

Accounting (float64 $): a fill of q shares at price P with fee f moves cash
by -/+ q P - f; a fill that grows |inventory| moves the average entry price,
one that shrinks it realises q (P - avg) sign(inventory); ``realised`` is net
of all fees, so at flat realised = cash.
"""
from __future__ import annotations

import numpy as np

from alpharl import actions as A
from alpharl.lobster.format import ASK_PRICE, ASK_SIZE, BID_PRICE, BID_SIZE, BOOK_COLS_PER_LEVEL, EV_CANCEL, \
    EV_DELETE, EV_EXEC, EV_NEW
from alpharl.prng import STREAM_SIM, STREAM_SYNTH, seed_states, xorshift32_np
from alpharl.sim import layout as L
from alpharl.sim.market import SyntheticMarket, replay_stream
from alpharl.sim.params import SimParams

_I32 = np.int32
#: Bits kept by the Bernoulli draw of the probabilistic queue model.
_U24_SHIFT = 8
_U24_ONE = 1 << 24
#: level_cap's answer when our price lies beyond the visible (full) depth.
_CAP_UNKNOWN = np.iinfo(np.int32).max


class ReferenceLobSim:
    """B backtests of the LOB simulator on host arrays (same API as ``LobSim``).

    ``market``: a MarketData (historical replay) or a :class:`SyntheticMarket`.
    """

    def __init__(self, market, params: SimParams, n_backtests: int, seed: int):
        self.params = params
        self.B = int(n_backtests)
        self.E = params.events_per_step
        self.synthetic = isinstance(market, SyntheticMarket)
        self.seed = int(seed)
        if self.synthetic:
            self.synth = _ReferenceSynth(market, self.B, self.E, seed)
            self.levels, self.tick = market.levels, market.tick
            self.events, self.book = self.synth.events, self.synth.book
            n_rows = 0
        else:
            stream = replay_stream(market)
            self.levels, self.tick = stream.levels, stream.tick
            self.events, self.book = stream.events, stream.book
            n_rows = stream.n_rows
            if n_rows - params.window_events < 1:
                raise ValueError(f"episode window of {params.window_events} events does not fit "
                                 f"in the {n_rows} events of the data")
        self.ip, self.fp = L.pack_params(params, self.levels, self.tick, n_rows, self.synthetic)
        self.tick_dollars = float(self.fp[L.FP_TICK_DOLLARS])
        self.span = max(n_rows - params.window_events, 1)
        self.obs_dim = L.obs_dim(self.levels)
        cap = max(params.fills_log_capacity, 1)
        self.state_i = np.zeros((L.N_STATE_I, self.B), _I32)
        self.state_f = np.zeros((L.N_STATE_F, self.B), np.float64)
        self.rng = seed_states(self.seed, self.B, STREAM_SIM)
        self.obs_buf = np.zeros((self.B, self.obs_dim), np.float32)
        self.out = np.zeros((L.N_OUT, self.B), np.float32)
        self.fills_i = np.zeros((self.B, cap, L.N_FILL_I), _I32)
        self.fills_f = np.zeros((self.B, cap), np.float64)
        self._all = np.arange(self.B)

    # ------------------------------------------------------------ public API
    def reset(self) -> None:
        """Every backtest starts a fresh episode (counters cleared, PRNGs reseeded)."""
        self.rng = seed_states(self.seed, self.B, STREAM_SIM)
        self.state_i[:] = 0
        self.state_f[:] = 0.0
        self.out[:] = 0.0
        if self.synthetic:
            self.synth.reset()
        start = self._draw_start()
        self.state_i[L.S_CURSOR] = np.where(self.synthetic, 0, start)
        self._clear_episode(np.ones(self.B, bool))
        row = self._obs_rows()
        self.state_i[L.S_MID_HIST:L.S_MID_HIST + L.N_MID_HIST] = self._mid2(row)[None, :]
        self._write_obs(row)

    def step(self, actions) -> None:
        """One env step of every backtest with actions int32[B] (alpharl.actions ids)."""
        si, sf, E = self.state_i, self.state_f, self.E
        actions = np.asarray(actions).astype(_I32)
        if self.synthetic:
            self.synth.generate()
        b = self._all
        row0 = self._row0()
        mid_before = self._mid2(row0)
        closed = np.zeros(self.B, bool)
        self._apply_action(actions, row0)
        self._activate(row0, closed)
        for j in range(1, E + 1):
            r0, r1 = row0 + j - 1, row0 + j
            for side in (L.SIDE_BUY, L.SIDE_SELL):
                self._event_fills(side, r0, r1, closed)
            si[L.S_CURSOR] += 1
            self._activate(r1, closed)
        row_e = row0 + E
        si[L.S_STEP_IN_EP] += 1
        si[L.S_STEP] += 1
        trunc = ~closed & (si[L.S_STEP_IN_EP] >= self.params.episode_steps)
        flat = trunc & (self.ip[L.IP_FORCE_FLATTEN] != 0) & (si[L.S_INVENTORY] != 0)
        idx = b[flat]
        oid = si[L.S_NEXT_OID, idx].copy()
        si[L.S_NEXT_OID, idx] += 1
        self._walk(idx, -np.sign(si[L.S_INVENTORY, idx]), np.abs(si[L.S_INVENTORY, idx]), row_e[idx], True, oid)
        mid_e = self._mid2(row_e)
        equity = sf[L.F_CASH] + si[L.S_INVENTORY] * (mid_e * (0.5 * self.tick_dollars))
        done = closed | trunc
        trade_done = done & (si[L.S_WAS_OPEN] != 0)
        o = self.out
        o[L.OUT_REWARD] = (equity - sf[L.F_EQUITY]).astype(np.float32)
        o[L.OUT_DONE] = done
        o[L.OUT_TRUNCATED] = trunc
        o[L.OUT_TRADE_DONE] = trade_done
        o[L.OUT_TRADE_PNL] = np.where(trade_done, equity, 0.0).astype(np.float32)
        o[L.OUT_LABEL_UP] = mid_e > mid_before
        safe = np.where(mid_before != 0, mid_before, 1).astype(np.float64)
        o[L.OUT_LABEL_RET] = np.where(mid_before != 0, (mid_e - mid_before) / safe, 0.0).astype(np.float32)
        si[L.S_TRADE_STEPS] += si[L.S_INVENTORY] != 0
        hist = slice(L.S_MID_HIST, L.S_MID_HIST + L.N_MID_HIST)
        si[hist] = np.concatenate([mid_e[None, :], si[L.S_MID_HIST:L.S_MID_HIST + L.N_MID_HIST - 1]])
        sf[L.F_EQUITY] = equity
        si[L.S_EPISODE] += done
        # Branch-free auto-reset: a start offset is drawn every step; done selects the reset state.
        start = self._draw_start()
        if not self.synthetic:
            si[L.S_CURSOR] = np.where(done, start, si[L.S_CURSOR])
        self._clear_episode(done)
        row = self._obs_rows()
        si[hist] = np.where(done[None, :], self._mid2(row)[None, :], si[hist])
        self._write_obs(row)

    # accessors (host arrays; LobSim returns device arrays of the same shapes)
    @property
    def obs(self) -> np.ndarray:
        return self.obs_buf

    def output(self, k: int) -> np.ndarray:
        return self.out[k]

    reward = property(lambda self: self.out[L.OUT_REWARD])
    done = property(lambda self: self.out[L.OUT_DONE])
    truncated = property(lambda self: self.out[L.OUT_TRUNCATED])
    trade_done = property(lambda self: self.out[L.OUT_TRADE_DONE])
    trade_pnl = property(lambda self: self.out[L.OUT_TRADE_PNL])
    label_up = property(lambda self: self.out[L.OUT_LABEL_UP])
    label_ret = property(lambda self: self.out[L.OUT_LABEL_RET])

    def state_dict(self) -> dict:
        d = {"state_i": self.state_i.copy(), "state_f": self.state_f.copy(), "rng": self.rng.copy(),
             "obs": self.obs_buf.copy(), "out": self.out.copy(), "fills_i": self.fills_i.copy(),
             "fills_f": self.fills_f.copy()}
        if self.synthetic:
            d.update(self.synth.state_dict())
        return d

    def load_state_dict(self, d: dict) -> None:
        for k in ("state_i", "state_f", "rng", "fills_i", "fills_f", "out"):
            getattr(self, k)[...] = d[k]
        self.obs_buf[...] = d["obs"]
        if self.synthetic:
            self.synth.load_state_dict(d)

    def field(self, name: str) -> np.ndarray:
        """One state field by name (STATE_I_NAMES / STATE_F_NAMES): a [B] view."""
        if name in L.STATE_I_NAMES:
            return self.state_i[L.STATE_I_NAMES.index(name)]
        return self.state_f[L.STATE_F_NAMES.index(name)]

    def fills_snapshot(self):
        """(fills_i, fills_f, fill_head) host copies, for the fills log."""
        return self.fills_i.copy(), self.fills_f.copy(), self.state_i[L.S_FILL_HEAD].copy()

    # ----------------------------------------------------------- the book
    def _row0(self):
        if self.synthetic:
            return self._all * (self.E + 1)
        return self.state_i[L.S_CURSOR].astype(np.int64)

    def _obs_rows(self):
        return self._row0() + self.E if self.synthetic else self.state_i[L.S_CURSOR].astype(np.int64)

    def _col(self, lv, c):
        return lv * BOOK_COLS_PER_LEVEL + c

    def _mid2(self, rows):
        a = self.book[rows, ASK_PRICE].astype(np.int64)
        bd = self.book[rows, BID_PRICE].astype(np.int64)
        ha, hb = a != L.ASK_EMPTY, bd != L.BID_EMPTY
        return np.where(ha & hb, a + bd, np.where(ha, 2 * a, np.where(hb, 2 * bd, 0))).astype(_I32)

    def _side_cols(self, side):
        """(price cols, size cols, empty sentinel) of the book side where orders of ``side`` rest."""
        pc = ASK_PRICE if side == L.SIDE_SELL else BID_PRICE
        zc = ASK_SIZE if side == L.SIDE_SELL else BID_SIZE
        lv = np.arange(self.levels) * BOOK_COLS_PER_LEVEL
        return lv + pc, lv + zc, (L.ASK_EMPTY if side == L.SIDE_SELL else L.BID_EMPTY)

    def _level_size(self, rows, side, px):
        """Visible size at price px on the side where ``side`` orders rest, or 0 when not listed."""
        pc, zc, _ = self._side_cols(side)
        match = self.book[rows][:, pc] == px[:, None]
        return (self.book[rows][:, zc] * match).sum(axis=1).astype(_I32)

    def _level_cap(self, rows, side, px):
        """Upper bound of the queue ahead at px: the visible size there; 0 when px lies
        within the visible range (or the side has fewer than L levels) but is not
        listed; _CAP_UNKNOWN when px lies beyond a full visible depth."""
        pc, zc, empty = self._side_cols(side)
        prices = self.book[rows][:, pc]
        match = prices == px[:, None]
        found = match.any(axis=1)
        size = (self.book[rows][:, zc] * match).sum(axis=1)
        deepest = prices[:, -1]
        full = deepest != empty
        beyond = (px < deepest) if side == L.SIDE_BUY else (px > deepest)
        return np.where(found, size, np.where(full & beyond, _CAP_UNKNOWN, 0)).astype(_I32)

    def _best_opposite(self, rows, side):
        """Best price an order of ``side`` would trade against (ask for buys), with its empty sentinel."""
        if side == L.SIDE_BUY:
            return self.book[rows, ASK_PRICE], L.ASK_EMPTY
        return self.book[rows, BID_PRICE], L.BID_EMPTY

    # ---------------------------------------------------------- accounting
    def _fill(self, idx, side, qty, px, maker, ahead, oid, qa0):
        """Book fills of qty[k] shares at px[k] ticks for backtests idx[k] (qty 0: no-op), clipped
        at flat when they reduce the position. ``side``/``maker`` scalars or arrays; the fill
        record's row is the cursor + ``ahead`` (1 for a fill by the event being replayed)."""
        si, sf = self.state_i, self.state_f
        side = np.broadcast_to(np.asarray(side, _I32), idx.shape)
        maker = np.broadcast_to(np.asarray(maker, bool), idx.shape)
        inv0 = si[L.S_INVENTORY, idx].astype(np.int64)
        reducing = (inv0 != 0) & (np.sign(inv0) == -side)
        qty = np.where(reducing, np.minimum(qty, np.abs(inv0)), qty).astype(np.int64)
        keep = qty > 0
        idx, side, maker, inv0, reducing, qty = idx[keep], side[keep], maker[keep], inv0[keep], reducing[keep], qty[keep]
        px, oid, qa0 = (np.broadcast_to(np.asarray(v), keep.shape)[keep] for v in (px, oid, qa0))
        if idx.size == 0:
            return
        price = px.astype(np.float64) * self.tick_dollars
        notional = qty.astype(np.float64) * price
        rate = np.where(maker, self.fp[L.FP_MAKER_FEE], self.fp[L.FP_TAKER_FEE])
        base = qty.astype(np.float64) if self.ip[L.IP_FEE_MODE] == L.FEE_PER_SHARE else notional
        fee = rate * base
        sf[L.F_CASH, idx] = sf[L.F_CASH, idx] - side * notional - fee
        avg = sf[L.F_AVG_PX, idx]
        held = np.abs(inv0).astype(np.float64)
        inv1 = inv0 + side * qty
        grown = (avg * held + price * qty.astype(np.float64)) / (held + qty.astype(np.float64))
        gain = qty.astype(np.float64) * (price - avg) * np.sign(inv0)
        sf[L.F_REALISED, idx] = sf[L.F_REALISED, idx] + np.where(reducing, gain, 0.0) - fee
        sf[L.F_AVG_PX, idx] = np.where(reducing, np.where(inv1 == 0, 0.0, avg), grown)
        sf[L.F_FEES, idx] += fee
        si[L.S_INVENTORY, idx] = inv1
        si[L.S_BOUGHT, idx] += np.where(side == L.SIDE_BUY, qty, 0).astype(_I32)
        si[L.S_SOLD, idx] += np.where(side == L.SIDE_SELL, qty, 0).astype(_I32)
        si[L.S_WAS_OPEN, idx] |= (inv1 != 0).astype(_I32)
        cap = self.ip[L.IP_FILL_CAP]
        if cap > 0:
            slot = si[L.S_FILL_HEAD, idx] % cap
            rec = self.fills_i[idx, slot]
            rec[:, L.FL_STEP] = si[L.S_STEP, idx]
            rec[:, L.FL_ROW] = si[L.S_CURSOR, idx] + ahead
            rec[:, L.FL_OID] = oid
            rec[:, L.FL_SIDE] = side
            rec[:, L.FL_PRICE] = px
            rec[:, L.FL_QTY] = qty
            rec[:, L.FL_MAKER] = maker
            rec[:, L.FL_QA0] = qa0
            self.fills_i[idx, slot] = rec
            self.fills_f[idx, slot] = fee
            si[L.S_FILL_HEAD, idx] += 1

    def _check_closed(self, closed):
        """A position back at flat after being open ends the episode: cancel every order."""
        si = self.state_i
        now = ~closed & (si[L.S_WAS_OPEN] != 0) & (si[L.S_INVENTORY] == 0)
        closed |= now
        for r in (L.S_BUY_QTY, L.S_SELL_QTY, L.S_MKT_QTY, L.S_MKT_FLAT):
            si[r, now] = 0

    def _walk(self, idx, side, qty, rows, flatten, oid):
        """Taker order(s) of qty[k] shares, side[k], walking the visible depth of rows[k].
        A flatten fills what the depth cannot at the deepest visible price (or, with
        that side empty, at the best price of the other side)."""
        si = self.state_i
        if idx.size == 0:
            return
        inv = si[L.S_INVENTORY, idx]
        reducing = (inv != 0) & (np.sign(inv) == -side)
        rem = np.where(reducing, np.minimum(qty, np.abs(inv)), qty).astype(np.int64)
        last_px = np.zeros(idx.size, np.int64)
        has_last = np.zeros(idx.size, bool)
        for lv in range(self.levels):
            pc = np.where(side == L.SIDE_BUY, self._col(lv, ASK_PRICE), self._col(lv, BID_PRICE))
            zc = np.where(side == L.SIDE_BUY, self._col(lv, ASK_SIZE), self._col(lv, BID_SIZE))
            p = self.book[rows, pc].astype(np.int64)
            z = self.book[rows, zc].astype(np.int64)
            valid = np.where(side == L.SIDE_BUY, p != L.ASK_EMPTY, p != L.BID_EMPTY)
            take = np.where(valid, np.minimum(rem, z), 0)
            self._fill(idx, side, take, p, False, 0, oid, 0)
            rem -= take
            last_px = np.where(valid, p, last_px)
            has_last |= valid
        if flatten:
            other = np.where(side == L.SIDE_BUY, self.book[rows, BID_PRICE], self.book[rows, ASK_PRICE])
            other_ok = np.where(side == L.SIDE_BUY, other != L.BID_EMPTY, other != L.ASK_EMPTY)
            px = np.where(has_last, last_px, other)
            ok = (rem > 0) & (has_last | other_ok)
            self._fill(idx, side, np.where(ok, rem, 0), px, False, 0, oid, 0)

    # -------------------------------------------------------------- action
    def _apply_action(self, act, row0):
        si, p = self.state_i, self.params
        lot, maxp = p.lot_size, p.max_position
        live_at = si[L.S_CURSOR] + p.latency_events
        new_oid = si[L.S_NEXT_OID].copy()
        inv = si[L.S_INVENTORY].astype(np.int64)
        mkt = si[L.S_MKT_QTY].astype(np.int64)
        flat_pending = si[L.S_MKT_FLAT] != 0
        buy_q, sell_q = si[L.S_BUY_QTY].astype(np.int64), si[L.S_SELL_QTY].astype(np.int64)
        ask1 = self.book[row0, ASK_PRICE].astype(np.int64)
        bid1 = self.book[row0, BID_PRICE].astype(np.int64)
        has_ask, has_bid = ask1 != L.ASK_EMPTY, bid1 != L.BID_EMPTY
        refused = np.zeros(self.B, bool)
        placed = np.zeros(self.B, bool)

        # market orders join the pending market order (or become it)
        for code, side in ((A.MARKET_BUY, L.SIDE_BUY), (A.MARKET_SELL, L.SIDE_SELL)):
            want = act == code
            if side == L.SIDE_BUY:
                ok = has_ask & (inv + buy_q + np.maximum(mkt, 0) + lot <= maxp)
            else:
                ok = has_bid & (inv - sell_q + np.minimum(mkt, 0) - lot >= -maxp)
            go = want & ok & ~flat_pending
            refused |= want & ~go
            fresh = go & (mkt == 0)
            placed |= fresh
            si[L.S_MKT_QTY] = np.where(go, mkt + side * lot, si[L.S_MKT_QTY])
            si[L.S_MKT_LIVE_AT] = np.where(go, live_at, si[L.S_MKT_LIVE_AT])
            si[L.S_MKT_OID] = np.where(fresh, new_oid, si[L.S_MKT_OID])

        # limit orders: join / improve, replacing the side's resting order
        spread = ask1 - bid1
        for codes, side, base in (((A.JOIN_BID, A.IMPROVE_BID), L.SIDE_BUY, L.S_BUY_PX),
                                  ((A.JOIN_ASK, A.IMPROVE_ASK), L.SIDE_SELL, L.S_SELL_PX)):
            join, improve = act == codes[0], act == codes[1]
            want = join | improve
            if side == L.SIDE_BUY:
                px = bid1 + (improve & (~has_ask | (spread > 1)))
                ok = has_bid & (inv + np.maximum(mkt, 0) + lot <= maxp)
            else:
                px = ask1 - (improve & (~has_bid | (spread > 1)))
                ok = has_ask & (inv + np.minimum(mkt, 0) - lot >= -maxp)
            same = (si[base + L.O_QTY] > 0) & (si[base + L.O_PX] == px)
            go = want & ok & ~same
            refused |= want & ~ok
            placed |= go
            si[base + L.O_PX] = np.where(go, px, si[base + L.O_PX])
            si[base + L.O_QTY] = np.where(go, lot, si[base + L.O_QTY])
            si[base + L.O_QA] = np.where(go, 0, si[base + L.O_QA])
            si[base + L.O_QA0] = np.where(go, 0, si[base + L.O_QA0])
            si[base + L.O_LIVE_AT] = np.where(go, live_at, si[base + L.O_LIVE_AT])
            si[base + L.O_OID] = np.where(go, new_oid, si[base + L.O_OID])

        # cancel / flatten: drop both resting orders; flatten replaces any pending market order
        cancel = (act == A.CANCEL) | (act == A.FLATTEN)
        si[L.S_BUY_QTY] = np.where(cancel, 0, si[L.S_BUY_QTY])
        si[L.S_SELL_QTY] = np.where(cancel, 0, si[L.S_SELL_QTY])
        flatten = act == A.FLATTEN
        go = flatten & (inv != 0)
        placed |= go
        si[L.S_MKT_FLAT] = np.where(flatten, go, si[L.S_MKT_FLAT])
        si[L.S_MKT_QTY] = np.where(flatten, 0, si[L.S_MKT_QTY])
        si[L.S_MKT_LIVE_AT] = np.where(flatten, live_at, si[L.S_MKT_LIVE_AT])
        si[L.S_MKT_OID] = np.where(go, new_oid, si[L.S_MKT_OID])

        si[L.S_NEXT_OID] += placed
        si[L.S_REFUSED] += refused

    # ---------------------------------------------------------- activation
    def _activate(self, rows, closed):
        si = self.state_i
        cur = si[L.S_CURSOR]
        b = self._all
        # pending market order
        pend = ~closed & ((si[L.S_MKT_QTY] != 0) | (si[L.S_MKT_FLAT] != 0)) & (si[L.S_MKT_LIVE_AT] <= cur)
        idx = b[pend]
        if idx.size:
            flat = si[L.S_MKT_FLAT, idx] != 0
            inv = si[L.S_INVENTORY, idx]
            q = np.where(flat, -inv, si[L.S_MKT_QTY, idx])
            oid = si[L.S_MKT_OID, idx]
            si[L.S_MKT_QTY, idx] = 0
            si[L.S_MKT_FLAT, idx] = 0
            for fl in (False, True):
                sel = (flat == fl) & (q != 0)
                self._walk(idx[sel], np.sign(q[sel]).astype(_I32), np.abs(q[sel]), rows[idx[sel]], fl, oid[sel])
            self._check_closed(closed)
        # limit orders going live
        for side, base in ((L.SIDE_BUY, L.S_BUY_PX), (L.SIDE_SELL, L.S_SELL_PX)):
            la = si[base + L.O_LIVE_AT]
            go = ~closed & (si[base + L.O_QTY] > 0) & (la != L.LIVE) & (la <= cur)
            idx = b[go]
            if not idx.size:
                continue
            r = rows[idx]
            px = si[base + L.O_PX, idx]
            opp, empty = self._best_opposite(r, side)
            marketable = (opp != empty) & ((opp <= px) if side == L.SIDE_BUY else (opp >= px))
            qa = self._level_size(r, side, px)
            si[base + L.O_QA, idx] = np.where(marketable, 0, qa)
            si[base + L.O_QA0, idx] = np.where(marketable, 0, qa)
            si[base + L.O_LIVE_AT, idx] = L.LIVE
            t = idx[marketable]
            self._fill(t, side, si[base + L.O_QTY, t].astype(np.int64), opp[marketable], False, 0,
                       si[base + L.O_OID, t], 0)
            si[base + L.O_QTY, t] = 0
            self._check_closed(closed)

    # ------------------------------------------------------------- events
    def _event_fills(self, side, r0, r1, closed):
        si, ip = self.state_i, self.ip
        base = L.S_BUY_PX if side == L.SIDE_BUY else L.S_SELL_PX
        live = ~closed & (si[base + L.O_QTY] > 0) & (si[base + L.O_LIVE_AT] == L.LIVE)
        idx = self._all[live]
        if not idx.size:
            return
        ev = self.events[r1[idx]]
        t, d, s, p = (ev[:, k].astype(np.int64) for k in (L.EV_TYPE, L.EV_DIR, L.EV_SIZE, L.EV_PRICE))
        px = si[base + L.O_PX, idx].astype(np.int64)
        qty = si[base + L.O_QTY, idx].astype(np.int64)
        qa = si[base + L.O_QA, idx].astype(np.int64)
        trade = np.isin(t, L.TRADE_TYPES) & (d == side)
        through = trade & ((p < px) if side == L.SIDE_BUY else (p > px))
        at = trade & (p == px)
        excess = np.where(at, s - qa, 0)
        fill_at = np.where(excess > 0, np.minimum(excess, qty) if ip[L.IP_PARTIAL] else
                           np.where(excess >= qty, qty, 0), 0)
        qa = np.where(at, np.maximum(qa - s, 0), qa)
        if ip[L.IP_QUEUE_MODEL] == L.QUEUE_PROBABILISTIC:
            canc = np.isin(t, L.CANCEL_TYPES) & (d == side) & (p == px)
            big_s = self._level_size(r0[idx], side, px)
            draw = canc & (big_s > 0)
            k = idx[draw]
            x = xorshift32_np(self.rng[k])
            self.rng[k] = x
            ahead = (x >> np.uint32(_U24_SHIFT)).astype(np.int64) * big_s[draw] < qa[draw] * _U24_ONE
            qa[draw] = np.where(ahead, np.maximum(qa[draw] - s[draw], 0), qa[draw])
        opp, empty = self._best_opposite(r1[idx], side)
        cross = (opp != empty) & ((opp <= px) if side == L.SIDE_BUY else (opp >= px))
        fillq = np.where(through | cross, qty, fill_at)
        inv0 = si[L.S_INVENTORY, idx].astype(np.int64)
        self._fill(idx, side, fillq, px, True, 1, si[base + L.O_OID, idx], si[base + L.O_QA0, idx])
        done_q = np.abs(si[L.S_INVENTORY, idx].astype(np.int64) - inv0)
        qty = qty - done_q
        cap = self._level_cap(r1[idx], side, px)
        si[base + L.O_QA, idx] = np.minimum(qa, cap)
        si[base + L.O_QTY, idx] = qty
        self._check_closed(closed)

    # -------------------------------------------------------------- reset
    def _draw_start(self):
        x = xorshift32_np(self.rng)
        self.rng[:] = x
        return (x % np.uint32(self.span)).astype(_I32)

    def _clear_episode(self, done):
        si, sf = self.state_i, self.state_f
        for r in (L.S_STEP_IN_EP, L.S_INVENTORY, L.S_WAS_OPEN, L.S_TRADE_STEPS, L.S_BOUGHT, L.S_SOLD,
                  L.S_BUY_PX, L.S_BUY_QTY, L.S_BUY_QA, L.S_BUY_QA0, L.S_BUY_OID,
                  L.S_SELL_PX, L.S_SELL_QTY, L.S_SELL_QA, L.S_SELL_QA0, L.S_SELL_OID,
                  L.S_MKT_QTY, L.S_MKT_FLAT, L.S_MKT_OID):
            si[r] = np.where(done, 0, si[r])
        for r in (L.S_BUY_LIVE_AT, L.S_SELL_LIVE_AT, L.S_MKT_LIVE_AT):
            si[r] = np.where(done, L.LIVE, si[r])
        sf[:] = np.where(done[None, :], 0.0, sf)

    # --------------------------------------------------------- observation
    def _write_obs(self, rows):
        si, sf, p = self.state_i, self.state_f, self.params
        o = self.obs_buf
        f32 = np.float32
        half = f32(0.5)
        m = self._mid2(rows).astype(np.int64)
        bk = self.book[rows].astype(np.int64)
        nl = self.levels
        depth_a = np.zeros(self.B, np.int64)
        depth_b = np.zeros(self.B, np.int64)
        for lv in range(nl):
            a, az = bk[:, self._col(lv, ASK_PRICE)], bk[:, self._col(lv, ASK_SIZE)]
            bd, bz = bk[:, self._col(lv, BID_PRICE)], bk[:, self._col(lv, BID_SIZE)]
            ha, hb = a != L.ASK_EMPTY, bd != L.BID_EMPTY
            k = lv * L.OBS_PER_LEVEL
            o[:, k + L.OBS_LEVEL_ASK_OFF] = np.where(ha, (2 * a - m).astype(f32) * half, f32(0))
            o[:, k + L.OBS_LEVEL_ASK_LOGSZ] = np.where(ha, np.log1p(az.astype(f32)), f32(0))
            o[:, k + L.OBS_LEVEL_BID_OFF] = np.where(hb, (m - 2 * bd).astype(f32) * half, f32(0))
            o[:, k + L.OBS_LEVEL_BID_LOGSZ] = np.where(hb, np.log1p(bz.astype(f32)), f32(0))
            depth_a += np.where(ha, az, 0)
            depth_b += np.where(hb, bz, 0)
        x = L.OBS_PER_LEVEL * nl
        a1, b1 = bk[:, ASK_PRICE], bk[:, BID_PRICE]
        as1, bs1 = bk[:, ASK_SIZE], bk[:, BID_SIZE]
        both = (a1 != L.ASK_EMPTY) & (b1 != L.BID_EMPTY)
        o[:, x + L.OBX_SPREAD] = np.where(both, (a1 - b1).astype(f32), f32(0))
        o[:, x + L.OBX_IMB1] = _ratio(bs1 - as1, bs1 + as1)
        o[:, x + L.OBX_IMB_DEPTH] = _ratio(depth_b - depth_a, depth_b + depth_a)
        for k, lag in enumerate(L.RETURN_LAGS):
            d = si[L.S_MID_HIST].astype(np.int64) - si[L.S_MID_HIST + lag]
            o[:, x + L.OBX_RET + k] = d.astype(f32) * half
        inv = si[L.S_INVENTORY]
        o[:, x + L.OBX_POSITION] = inv.astype(f32) / f32(p.max_position)
        mid_d = m.astype(np.float64) * (0.5 * self.tick_dollars)
        upnl = inv * (mid_d - sf[L.F_AVG_PX]) / (p.lot_size * self.tick_dollars)
        o[:, x + L.OBX_UPNL] = np.where(inv != 0, upnl, 0.0).astype(f32)
        for base, flag, sgn in ((L.S_BUY_PX, L.OBX_BUY_FLAG, -1), (L.S_SELL_PX, L.OBX_SELL_FLAG, 1)):
            has = si[base + L.O_QTY] > 0
            live = has & (si[base + L.O_LIVE_AT] == L.LIVE)
            o[:, x + flag] = np.where(live, f32(1), np.where(has, half, f32(0)))
            o[:, x + flag + 1] = np.where(live, np.log1p(si[base + L.O_QA].astype(f32)), f32(0))
            off = sgn * (2 * si[base + L.O_PX].astype(np.int64) - m)
            o[:, x + flag + 2] = np.where(has, off.astype(f32) * half, f32(0))
        steps = f32(p.episode_steps)
        o[:, x + L.OBX_TIME_IN_TRADE] = si[L.S_TRADE_STEPS].astype(f32) / steps
        o[:, x + L.OBX_TIME_LEFT] = (p.episode_steps - si[L.S_STEP_IN_EP]).astype(f32) / steps


def _ratio(num, den):
    """num / den in float32, 0 where den is 0."""
    f32 = np.float32
    safe = np.where(den != 0, den, 1).astype(f32)
    return np.where(den != 0, num.astype(f32) / safe, f32(0))


class _ReferenceSynth:
    """NumPy twin of the synthetic order-flow kernels (see alpharl.cuda_kernels.lobsim.synthetic)."""

    def __init__(self, market: SyntheticMarket, B: int, E: int, seed: int):
        self.sp = L.pack_synth(market.params)
        self.levels = market.levels
        self.B, self.E, self.seed = B, E, int(seed)
        self.rows_per = E + 1
        self.events = np.zeros((B * self.rows_per, L.N_EV_COLS), _I32)
        self.book = np.zeros((B * self.rows_per, BOOK_COLS_PER_LEVEL * self.levels), _I32)
        self.syn_i = np.zeros((L.n_syn_rows(self.levels), B), _I32)
        self.rng = seed_states(self.seed, B, STREAM_SYNTH)

    def state_dict(self):
        return {"syn_i": self.syn_i.copy(), "syn_rng": self.rng.copy(), "syn_events": self.events.copy(),
                "syn_book": self.book.copy()}

    def load_state_dict(self, d):
        self.syn_i[...] = d["syn_i"]
        self.rng[...] = d["syn_rng"]
        self.events[...] = d["syn_events"]
        self.book[...] = d["syn_book"]

    def reset(self):
        sp, nl = self.sp, self.levels
        self.rng = seed_states(self.seed, self.B, STREAM_SYNTH)
        self.syn_i[L.SY_BID0] = sp[L.SP_START_PRICE]
        self.syn_i[L.SY_ASK0] = sp[L.SP_START_PRICE] + sp[L.SP_START_SPREAD]
        self.syn_i[L.SY_SIZES:L.SY_SIZES + 2 * nl] = sp[L.SP_START_UNITS] * sp[L.SP_SIZE_UNIT]
        base = np.arange(self.B) * self.rows_per
        self.events[:] = 0
        self._write_book(base)
        self._write_book(base + self.E)

    def _write_book(self, rows):
        s, nl = self.syn_i, self.levels
        for lv in range(nl):
            c = lv * BOOK_COLS_PER_LEVEL
            self.book[rows, c + ASK_PRICE] = s[L.SY_ASK0] + lv
            self.book[rows, c + ASK_SIZE] = s[L.SY_SIZES + lv]
            self.book[rows, c + BID_PRICE] = s[L.SY_BID0] - lv
            self.book[rows, c + BID_SIZE] = s[L.SY_SIZES + nl + lv]

    def generate(self):
        """Write this step's rows: row 0 = the current book, rows 1..E = each event and the book after it."""
        sp, nl, s = self.sp, self.levels, self.syn_i
        base = np.arange(self.B) * self.rows_per
        self._write_book(base)
        self.events[base] = 0
        unit = np.int64(sp[L.SP_SIZE_UNIT])
        rates = sp[L.SP_LIMIT_RATE:L.SP_LIMIT_RATE + nl].astype(np.int64)
        refill = sp[L.SP_START_UNITS] * sp[L.SP_SIZE_UNIT]
        all_b = np.arange(self.B)
        for j in range(1, self.E + 1):
            sizes = s[L.SY_SIZES:L.SY_SIZES + 2 * nl].astype(np.int64)            # [2L, B]: asks then bids
            spread = s[L.SY_ASK0].astype(np.int64) - s[L.SY_BID0]
            cancelable = sizes.copy()
            cancelable[1:nl] -= L.SYN_KEEP_DEEP
            cancelable[nl + 1:] -= L.SYN_KEEP_DEEP
            w = np.concatenate([
                np.broadcast_to(np.concatenate([rates, rates])[:, None], (2 * nl, self.B)),
                np.where(spread > 1, sp[L.SP_INSIDE_RATE], 0)[None, :].repeat(2, axis=0),
                sp[L.SP_CANCEL_RATE] * ((cancelable + unit - 1) // unit),
                np.full((2, self.B), sp[L.SP_MARKET_RATE], np.int64)])       # [4L + 4, B]
            total = w.sum(axis=0)
            x = xorshift32_np(self.rng)
            y = xorshift32_np(x)
            self.rng[:] = y
            pick = (x % total.astype(np.uint32)).astype(np.int64)
            cat = (np.cumsum(w, axis=0) <= pick[None, :]).sum(axis=0)         # first category whose cumsum > pick
            size = (1 + (y % np.uint32(sp[L.SP_MAX_UNITS])).astype(np.int64)) * unit
            ev = np.zeros((self.B, L.N_EV_COLS), np.int64)
            for bb in all_b:
                ev[bb] = self._apply(bb, int(cat[bb]), int(size[bb]), refill)
            rows = base + j
            self.events[rows] = ev
            self._write_book(rows)

    def _apply(self, b, cat, size, refill):
        """Apply event category ``cat`` to backtest b's book; return (type, dir, size, price)."""
        nl, s = self.levels, self.syn_i
        side_ask = True
        if cat < 2 * nl:                                     # limit arrival at a level
            side_ask, lv = cat < nl, cat % nl
            r = L.SY_SIZES + (0 if side_ask else nl) + lv
            s[r, b] += size
            px = s[L.SY_ASK0, b] + lv if side_ask else s[L.SY_BID0, b] - lv
            return EV_NEW, (L.SIDE_SELL if side_ask else L.SIDE_BUY), size, px
        cat -= 2 * nl
        if cat < 2:                                          # limit order inside the spread
            side_ask = cat == 0
            r0 = L.SY_SIZES + (0 if side_ask else nl)
            s[r0 + 1:r0 + nl, b] = s[r0:r0 + nl - 1, b].copy()
            s[r0, b] = size
            if side_ask:
                s[L.SY_ASK0, b] -= 1
                return EV_NEW, L.SIDE_SELL, size, s[L.SY_ASK0, b]
            s[L.SY_BID0, b] += 1
            return EV_NEW, L.SIDE_BUY, size, s[L.SY_BID0, b]
        cat -= 2
        if cat < 2 * nl:                                     # cancellation at a level
            side_ask, lv = cat < nl, cat % nl
            r = L.SY_SIZES + (0 if side_ask else nl) + lv
            c = min(size, int(s[r, b]) - (L.SYN_KEEP_DEEP if lv > 0 else 0))
            s[r, b] -= c
            px = s[L.SY_ASK0, b] + lv if side_ask else s[L.SY_BID0, b] - lv
            etype = EV_CANCEL if s[r, b] > 0 else EV_DELETE
            out = (etype, (L.SIDE_SELL if side_ask else L.SIDE_BUY), c, px)
        else:                                                # market order against the best level
            side_ask = cat == 2 * nl                         # a market buy hits the asks
            r = L.SY_SIZES + (0 if side_ask else nl)
            c = min(size, int(s[r, b]))
            s[r, b] -= c
            px = s[L.SY_ASK0, b] if side_ask else s[L.SY_BID0, b]
            out = (EV_EXEC, (L.SIDE_SELL if side_ask else L.SIDE_BUY), c, px)
        r0 = L.SY_SIZES + (0 if side_ask else nl)
        if s[r0, b] == 0:                                    # best level emptied: the side steps back a tick
            s[r0:r0 + nl - 1, b] = s[r0 + 1:r0 + nl, b].copy()
            s[r0 + nl - 1, b] = refill
            if side_ask:
                s[L.SY_ASK0, b] += 1
            else:
                s[L.SY_BID0, b] -= 1
        return out
