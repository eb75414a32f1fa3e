"""Book reads shared by the simulator kernels: mid price, visible size at a
price, the queue-ahead cap, the opposite side's best price.

``book`` is a book table read flat: snapshot rows of 4L words in LOBSTER
column order with prices in ticks and empty levels at ``ASK_EMPTY`` /
``BID_EMPTY`` (alpharl.sim.layout); ``at`` is the word offset of a snapshot
(its row x 4L), in the global table or in a block's shared-memory copy.

The level scans read every visible level without an early exit: a scan that
stops at the first match makes each level's load wait on the previous
comparison (one memory round trip per level), while a scan over all levels
has only independent loads, which the compiler batches."""
from __future__ import annotations

from numba import cuda

from alpharl.lobster.format import ASK_PRICE, ASK_SIZE, BID_PRICE, BID_SIZE, BOOK_COLS_PER_LEVEL
from alpharl.sim.layout import ASK_EMPTY, BID_EMPTY, SIDE_BUY

#: level_cap's answer when the price lies beyond a full visible depth (no cap).
CAP_UNKNOWN = 2147483647


@cuda.jit(device=True)
def mid2_of(a, b):
    """Doubled mid price in ticks from the best ask a and best bid b (ask1 + bid1); with one
    side empty, twice the other's best; 0 if both are."""
    if a != ASK_EMPTY and b != BID_EMPTY:
        return a + b
    if a != ASK_EMPTY:
        return 2 * a
    if b != BID_EMPTY:
        return 2 * b
    return 0


@cuda.jit(device=True)
def mid2(book, at):
    """Doubled mid price in ticks of the snapshot at ``at`` (see mid2_of)."""
    return mid2_of(book[at + ASK_PRICE], book[at + BID_PRICE])


@cuda.jit(device=True)
def side_cols(side):
    """(price col, size col, empty sentinel) of the book side where orders of ``side`` rest."""
    if side == SIDE_BUY:
        return BID_PRICE, BID_SIZE, BID_EMPTY
    return ASK_PRICE, ASK_SIZE, ASK_EMPTY


@cuda.jit(device=True)
def find_level(book, at, side, px, levels):
    """(whether px is listed on the resting side of ``side`` orders, the visible size at the
    first level listing it or 0). Scans all levels (independent loads, no early exit)."""
    pc, zc, _ = side_cols(side)
    found = False
    size = 0
    for lv in range(levels):
        c = lv * BOOK_COLS_PER_LEVEL
        p = book[at + c + pc]
        z = book[at + c + zc]
        hit = p == px and not found
        size = z if hit else size
        found = found or hit
    return found, size


@cuda.jit(device=True)
def level_size(book, at, side, px, levels):
    """Visible size at price px on the resting side of ``side`` orders; 0 when px is not listed."""
    _, size = find_level(book, at, side, px, levels)
    return size


@cuda.jit(device=True)
def level_cap(book, at, side, px, levels):
    """Upper bound of a queue ahead at px: the visible size there; 0 when px lies within the
    visible range (or the side shows fewer than L levels) but is not listed, i.e. the level is
    empty; CAP_UNKNOWN when px lies beyond a full visible depth."""
    pc, _, empty = side_cols(side)
    found, size = find_level(book, at, side, px, levels)
    if found:
        return size
    deepest = book[at + (levels - 1) * BOOK_COLS_PER_LEVEL + pc]
    if deepest != empty:
        if (side == SIDE_BUY and px < deepest) or (side != SIDE_BUY and px > deepest):
            return CAP_UNKNOWN
    return 0


@cuda.jit(device=True)
def crosses(side, opp, px):
    """True when an opposite best price ``opp`` reaches a ``side`` limit price px."""
    if side == SIDE_BUY:
        return opp <= px
    return opp >= px
