"""Book reads shared by the simulator kernels: mid price, visible size at a
price, the queue-ahead cap, the opposite side's best price.

``book`` is a book table read flat: snapshot rows of 4L words in LOBSTER
column order with prices in ticks and empty levels at ``ASK_EMPTY`` /
``BID_EMPTY`` (alpharl.sim.layout); ``at`` is the word offset of a snapshot
(its row x 4L), in the global table or in a block's shared-memory copy.

The level scans read every visible level without an early exit: a scan that
stops at the first match makes each level's load wait on the previous
comparison (one memory round trip per level), while a scan over all levels
has only independent loads, which the compiler batches.

Every read goes through ``word``: an index typed unsigned, so numba emits no
negative-index wraparound test (offsets are never negative), and the address
is base + 4 x offset in plain 64-bit arithmetic, so constant parts of an offset
fold into the load's immediate. Level loops are ``while`` loops on a uint64
running offset (a ``range`` loop costs a second counter and its guards)."""
from __future__ import annotations

from numba import cuda, uint64

from alpharl.lobster.format import ASK_PRICE, ASK_SIZE, BID_PRICE, BID_SIZE, BOOK_COLS_PER_LEVEL
from alpharl.sim.layout import ASK_EMPTY, BID_EMPTY, CAP_UNKNOWN, SIDE_BUY


@cuda.jit(device=True)
def word(a, i):
    """a[i] of a flat table at a non-negative offset i (see the module docstring)."""
    return a[uint64(i)]


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
    return mid2_of(word(book, at + ASK_PRICE), word(book, at + BID_PRICE))


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
    c = uint64(at)
    end = uint64(at + levels * BOOK_COLS_PER_LEVEL)
    while c < end:
        p = word(book, c + uint64(pc))
        z = word(book, c + uint64(zc))
        c += uint64(BOOK_COLS_PER_LEVEL)
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
def beyond_view(book, at, side, px, levels):
    """True when px lies beyond a full visible depth on the resting side of ``side`` orders: out
    of view, not known to be empty (level_caps' CAP_UNKNOWN case)."""
    pc, _, empty = side_cols(side)
    deepest = word(book, at + (levels - 1) * BOOK_COLS_PER_LEVEL + pc)
    return deepest != empty and (px < deepest if side == SIDE_BUY else px > deepest)


@cuda.jit(device=True)
def cap_step(p, z, px, found, size):
    """One level of a first-hit scan for px: (found, size) after the level (p, z)."""
    hit = p == px and not found
    return found or hit, z if hit else size


@cuda.jit(device=True)
def level_caps(book, at, px_buy, px_sell, levels):
    """(cap of a buy order at px_buy, cap of a sell order at px_sell) in the snapshot at ``at``,
    both sides in one scan: the upper bound of a queue ahead at a price is the visible size
    there; 0 when the price lies within the visible range (or the side shows fewer than L
    levels) but is not listed, i.e. the level is empty; CAP_UNKNOWN when it lies beyond a full
    visible depth. Straight-line code: a price of no live order gives a cap nobody reads.
    Two levels a pass, the second clamped to the deepest (a repeat of it changes nothing), so
    eight independent loads are in flight before the comparisons."""
    found_b = False
    found_s = False
    size_b = 0
    size_s = 0
    bp = BID_EMPTY                        # after the loop: the deepest level's prices
    ap = ASK_EMPTY
    c = uint64(at)
    last = uint64(at + (levels - 1) * BOOK_COLS_PER_LEVEL)
    while c <= last:
        c2 = min(c + uint64(BOOK_COLS_PER_LEVEL), last)
        bp1 = word(book, c + uint64(BID_PRICE))
        bz1 = word(book, c + uint64(BID_SIZE))
        ap1 = word(book, c + uint64(ASK_PRICE))
        az1 = word(book, c + uint64(ASK_SIZE))
        bp = word(book, c2 + uint64(BID_PRICE))
        bz2 = word(book, c2 + uint64(BID_SIZE))
        ap = word(book, c2 + uint64(ASK_PRICE))
        az2 = word(book, c2 + uint64(ASK_SIZE))
        c += uint64(2 * BOOK_COLS_PER_LEVEL)
        found_b, size_b = cap_step(bp1, bz1, px_buy, found_b, size_b)
        found_s, size_s = cap_step(ap1, az1, px_sell, found_s, size_s)
        found_b, size_b = cap_step(bp, bz2, px_buy, found_b, size_b)
        found_s, size_s = cap_step(ap, az2, px_sell, found_s, size_s)
    cap_b = size_b if found_b else (CAP_UNKNOWN if bp != BID_EMPTY and px_buy < bp else 0)
    cap_s = size_s if found_s else (CAP_UNKNOWN if ap != ASK_EMPTY and px_sell > ap else 0)
    return cap_b, cap_s


@cuda.jit(device=True)
def crosses(side, opp, px):
    """True when an opposite best price ``opp`` reaches a ``side`` limit price px."""
    if side == SIDE_BUY:
        return opp <= px
    return opp >= px
