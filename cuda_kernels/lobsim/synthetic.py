"""Synthetic order flow: a Poisson (zero-intelligence) limit/market/cancel generator,
one L-level book and one xorshift32 lane per backtest.

Each backtest's book has L levels per side one tick apart from its best price
(sizes in ``syn_i``, see alpharl.sim.layout SY_*). One event is drawn from the
embedded jump chain of the competing Poisson clocks (alpharl.sim.params.
SynthParams): categories in the order

    limit ask 0..L-1 | limit bid 0..L-1 | inside ask | inside bid |
    cancel ask 0..L-1 | cancel bid 0..L-1 | market buy | market sell

with integer weights (inside: only while the spread is wider than one tick;
cancel at level i: rate x ceil(cancelable / size_unit), where the best level
may be cancelled whole and deeper levels keep one share, so every listed level
stays occupied). Two PRNG steps per event: x picks the category (x mod total
weight), the next state y the size (1 + y mod max_units lots). A best level
emptied by a market order or a cancel makes that side step back one tick (the
levels shift up, a fresh level appears at the back); a limit order inside the
spread steps it forward (the deepest level drops out of view).

``lobsim_synth_flow`` writes the step's tables in the replay layout: for
backtest b, rows b(E+1) .. b(E+1)+E of ``events`` / ``book``; row b(E+1) holds
the book before the step (its event row is zero), row b(E+1)+j event j and the
book after it. Launch both kernels as [sim_grid(B), SIM_BLOCK].
"""
from __future__ import annotations

from numba import cuda, int32, uint32

from alpharl.cuda_kernels.registry import kernel
from alpharl.lobster.format import (ASK_PRICE, ASK_SIZE, BID_PRICE, BID_SIZE, BOOK_COLS_PER_LEVEL, EV_CANCEL,
                                    EV_DELETE, EV_EXEC, EV_NEW)
from alpharl.prng import xorshift32
from alpharl.sim.layout import (EV_DIR, EV_PRICE, EV_SIZE, EV_TYPE, N_EV_COLS, SIDE_BUY, SIDE_SELL, SP_CANCEL_RATE,
                                SP_INSIDE_RATE, SP_LEVELS, SP_LIMIT_RATE, SP_MARKET_RATE, SP_MAX_UNITS,
                                SP_SIZE_UNIT, SP_START_PRICE, SP_START_SPREAD, SP_START_UNITS, SY_ASK0, SY_BID0,
                                SY_SIZES, SYN_KEEP_DEEP)

#: Categories per side outside the per-level ones: inside-spread limit, market order.
N_SIDE_EXTRA = 2


@cuda.jit(device=True)
def size_row(nl, ask, lv):
    """syn_i row of the size of level lv on the ask (True) or bid side."""
    return SY_SIZES + lv if ask else SY_SIZES + nl + lv


@cuda.jit(device=True)
def cat_weight(sp, syn, b, k):
    """Integer rate of event category k (order in the module docstring) for backtest b."""
    nl = sp[SP_LEVELS]
    if k < 2 * nl:
        return sp[SP_LIMIT_RATE + k % nl]
    k -= 2 * nl
    if k < N_SIDE_EXTRA:
        return sp[SP_INSIDE_RATE] if syn[SY_ASK0, b] - syn[SY_BID0, b] > 1 else 0
    k -= N_SIDE_EXTRA
    if k < 2 * nl:
        lv = k % nl
        c = syn[size_row(nl, k < nl, lv), b] - (SYN_KEEP_DEEP if lv > 0 else 0)
        unit = sp[SP_SIZE_UNIT]
        return sp[SP_CANCEL_RATE] * ((c + unit - 1) // unit)
    return sp[SP_MARKET_RATE]


@cuda.jit(device=True)
def write_book(syn, b, nl, book, row):
    for lv in range(nl):
        c = lv * BOOK_COLS_PER_LEVEL
        book[row, c + ASK_PRICE] = syn[SY_ASK0, b] + lv
        book[row, c + ASK_SIZE] = syn[SY_SIZES + lv, b]
        book[row, c + BID_PRICE] = syn[SY_BID0, b] - lv
        book[row, c + BID_SIZE] = syn[SY_SIZES + nl + lv, b]


@cuda.jit(device=True)
def shift_back(syn, b, nl, ask, refill):
    """The side's best level is empty: levels move up one, a fresh level appears at the back."""
    r0 = size_row(nl, ask, 0)
    for lv in range(nl - 1):
        syn[r0 + lv, b] = syn[r0 + lv + 1, b]
    syn[r0 + nl - 1, b] = refill
    if ask:
        syn[SY_ASK0, b] += 1
    else:
        syn[SY_BID0, b] -= 1


@cuda.jit(device=True)
def apply_event(sp, syn, b, cat, size, events, row):
    """Apply category ``cat`` with ``size`` shares to backtest b's book; write its event row."""
    nl = sp[SP_LEVELS]
    refill = sp[SP_START_UNITS] * sp[SP_SIZE_UNIT]
    etype = EV_NEW
    if cat < 2 * nl:                                   # limit order at a level
        ask = cat < nl
        lv = cat % nl
        syn[size_row(nl, ask, lv), b] += size
        px = syn[SY_ASK0, b] + lv if ask else syn[SY_BID0, b] - lv
        q = size
    elif cat < 2 * nl + N_SIDE_EXTRA:                  # limit order one tick inside the spread
        ask = cat == 2 * nl
        r0 = size_row(nl, ask, 0)
        for lv in range(nl - 1, 0, -1):
            syn[r0 + lv, b] = syn[r0 + lv - 1, b]
        syn[r0, b] = size
        if ask:
            syn[SY_ASK0, b] -= 1
            px = syn[SY_ASK0, b]
        else:
            syn[SY_BID0, b] += 1
            px = syn[SY_BID0, b]
        q = size
    else:
        k = cat - 2 * nl - N_SIDE_EXTRA
        if k < 2 * nl:                                 # cancellation at a level
            ask = k < nl
            lv = k % nl
            r = size_row(nl, ask, lv)
            q = min(size, syn[r, b] - (SYN_KEEP_DEEP if lv > 0 else 0))
            syn[r, b] -= q
            px = syn[SY_ASK0, b] + lv if ask else syn[SY_BID0, b] - lv
            etype = EV_CANCEL if syn[r, b] > 0 else EV_DELETE
        else:                                          # market order against the best level
            ask = k == 2 * nl                          # a market buy takes the asks
            r = size_row(nl, ask, 0)
            q = min(size, syn[r, b])
            syn[r, b] -= q
            px = syn[SY_ASK0, b] if ask else syn[SY_BID0, b]
            etype = EV_EXEC
        if syn[size_row(nl, ask, 0), b] == 0:
            shift_back(syn, b, nl, ask, refill)
    events[row, EV_TYPE] = etype
    events[row, EV_DIR] = SIDE_SELL if ask else SIDE_BUY
    events[row, EV_SIZE] = q
    events[row, EV_PRICE] = px


@kernel("void(int32[::1], int32[:, ::1], int32[:, ::1], int32[:, ::1], int32)")
def lobsim_synth_reset(sp, syn, events, book, n_ev):
    """Fresh synthetic books (start price and spread, every level start_units lots); zero
    event rows; the book written at rows b(E+1) and b(E+1)+E (what lobsim_reset observes).
    sp int32[N_SP_FIXED + L], syn int32[n_syn_rows(L), B]. Launch [sim_grid(B), SIM_BLOCK]."""
    b = cuda.grid(1)
    if b >= syn.shape[1]:
        return
    nl = sp[SP_LEVELS]
    syn[SY_BID0, b] = sp[SP_START_PRICE]
    syn[SY_ASK0, b] = sp[SP_START_PRICE] + sp[SP_START_SPREAD]
    for r in range(2 * nl):
        syn[SY_SIZES + r, b] = sp[SP_START_UNITS] * sp[SP_SIZE_UNIT]
    base = b * (n_ev + 1)
    for j in range(n_ev + 1):
        for c in range(N_EV_COLS):
            events[base + j, c] = 0
    write_book(syn, b, nl, book, base)
    write_book(syn, b, nl, book, base + n_ev)


@kernel("void(int32[::1], int32[:, ::1], uint32[::1], int32[:, ::1], int32[:, ::1], int32)")
def lobsim_synth_flow(sp, syn, rng, events, book, n_ev):
    """Generate n_ev events per backtest into its block of the step tables (module docstring).
    rng uint32[B] is the synthetic stream (updated). Launch [sim_grid(B), SIM_BLOCK]."""
    b = cuda.grid(1)
    if b >= syn.shape[1]:
        return
    nl = sp[SP_LEVELS]
    n_cat = 4 * nl + 2 * N_SIDE_EXTRA
    base = b * (n_ev + 1)
    write_book(syn, b, nl, book, base)
    for c in range(N_EV_COLS):
        events[base, c] = 0
    s = rng[b]
    for j in range(1, n_ev + 1):
        total = 0
        for k in range(n_cat):
            total += cat_weight(sp, syn, b, k)
        x = xorshift32(s)
        s = xorshift32(x)
        pick = int32(x % uint32(total))
        cat = 0
        acc = cat_weight(sp, syn, b, 0)
        while acc <= pick:
            cat += 1
            acc += cat_weight(sp, syn, b, cat)
        size = (1 + int32(s % uint32(sp[SP_MAX_UNITS]))) * sp[SP_SIZE_UNIT]
        apply_event(sp, syn, b, cat, size, events, base + j)
        write_book(syn, b, nl, book, base + j)
    rng[b] = s
