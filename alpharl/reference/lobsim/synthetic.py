"""NumPy twin of cuda_kernels/lobsim/synthetic.py: the Poisson order flow (rules in that module's
docstring), one backtest at a time for the book updates."""
from __future__ import annotations

import numpy as np

from alpharl.lobster.format import ASK_PRICE, ASK_SIZE, BID_PRICE, BID_SIZE, BOOK_COLS_PER_LEVEL, EV_CANCEL, \
    EV_DELETE, EV_EXEC, EV_NEW
from alpharl.prng import STREAM_SYNTH, seed_states, xorshift32_np
from alpharl.sim import layout as L
from alpharl.sim.market import SyntheticMarket

_I32 = np.int32


class ReferenceSynth:
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
