"""Validation of a LOBSTER message + orderbook pair, vectorised with numpy.

Every check finds its first failing row; the error reported is the earliest
failing row over all checks, so fixing a file top to bottom meets them in order.
"""
from __future__ import annotations

import math
from pathlib import PurePosixPath

import numpy as np

from alpharl.lobster.errors import at
from alpharl.lobster.format import (ASK_PAD_PRICE, ASK_PRICE, ASK_SIZE, BID_PAD_PRICE, BID_PRICE, BID_SIZE,
                                    BOOK_COLS_PER_LEVEL, DIR_BUY, DIR_SELL, EV_CANCEL, EV_DELETE, EV_EXEC,
                                    EV_HALT, EV_NEW, HALT_PRICES,
                                    KNOWN_EVENT_TYPES, MSG_COLUMNS, MSG_DIRECTION, MSG_ORDER_ID, MSG_PRICE,
                                    MSG_SIZE, MSG_TIME, MSG_TYPE, PRICE_SCALE, book_column_name)

_INT32_MAX = int(np.iinfo(np.int32).max)
#: Share of the distinct book prices, and of their occurrences, that must lie on
#: a grid for it to be the tick's (infer_tick): a damaged file has a few prices
#: off its grid, a finer-ticked one about half of them off any coarser grid.
_GRID_SHARE = 0.9
#: Events of displayed orders, whose prices lie on the tick grid (hidden executions
#: may print at the midpoint; halts carry a code, not a price).
_ON_GRID_EVENTS = (EV_NEW, EV_CANCEL, EV_DELETE, EV_EXEC)
# (side, price field, size field, padding price, +1 where deeper levels rise (asks) / -1 where they fall (bids))
_SIDES = (("ask", ASK_PRICE, ASK_SIZE, ASK_PAD_PRICE, 1), ("bid", BID_PRICE, BID_SIZE, BID_PAD_PRICE, -1))


class _Failures:
    """Collects (row, file, what, column) for the first failing row of each check."""

    def __init__(self):
        self.found: list[tuple[int, str, str, str | None]] = []

    def add(self, mask: np.ndarray, file: str, column: str | None, what) -> None:
        """``mask``: bool[n] of failing rows; ``what(row)`` says what is wrong there."""
        row = int(mask.argmax()) if mask.size else 0
        if mask.size and mask[row]:
            self.found.append((row, file, what(row), column))

    def add_cells(self, mask: np.ndarray, file: str, what) -> None:
        """``mask``: bool[n, L] of failing (row, level) cells; ``what(row, level)`` gives (column, text)."""
        rows = mask.any(axis=1)
        row = int(rows.argmax()) if rows.size else 0
        if rows.size and rows[row]:
            column, text = what(row, int(mask[row].argmax()))
            self.found.append((row, file, text, column))

    def raise_first(self) -> None:
        if self.found:
            row, file, what, column = min(self.found, key=lambda f: f[0])
            raise at(file, row + 1, what, column)


def _msg_col(index: int) -> str:
    return f"{index + 1} ({MSG_COLUMNS[index]})"


def _book_col(first: int, level: int) -> str:
    """Column name of field ``first`` (e.g. ASK_PRICE) at 0-based ``level``."""
    col = first + level * BOOK_COLS_PER_LEVEL
    return f"{col + 1} ({book_column_name(col)})"


def validate_arrays(time, event_type, order_id, size, price, direction, book, levels: int,
                    message_file: str = "message", orderbook_file: str = "orderbook") -> int:
    """Check a parsed pair; raise LobsterFormatError for the earliest bad row. Returns the tick.

    Checked: equal row counts and 4*levels book columns; times finite and
    non-decreasing; event types in {1..5, 7}; direction -1/+1; order ids >= 0;
    sizes >= 1 and prices > 0 on order events (halts: zeros, price -1/0/1);
    book levels either exactly the padding (price sentinel, size 0) or a real
    price with size > 0, padding only below occupied levels, asks rising and
    bids falling with depth, best bid < best ask where both sides exist; every
    book price and every displayed order's message price on the tick grid
    (infer_tick).
    Unknown order ids are accepted (files start mid-day and cut at L levels).

    Integer inputs may be any width (the CSV reader hands over int64, so values
    that would not fit the narrow MarketData dtypes are caught here).
    """
    n, n_book = len(time), len(book)
    if n != n_book:
        short, long_, n_short, n_long = ((orderbook_file, message_file, n_book, n) if n_book < n
                                         else (message_file, orderbook_file, n, n_book))
        raise at(short, n_short + 1, f"missing (this file has {n_short} rows, {PurePosixPath(long_).name} "
                                     f"has {n_long})")
    if book.ndim != 2 or book.shape[1] != BOOK_COLS_PER_LEVEL * levels:
        raise at(orderbook_file, 1, f"{book.shape[-1]} columns, expected {BOOK_COLS_PER_LEVEL * levels} "
                                    f"for {levels} levels")
    fails = _Failures()
    _check_messages(fails, message_file, time, event_type, order_id, size, price, direction)
    for side in _SIDES:
        _check_side(fails, orderbook_file, book, *side)
    ask, bid = book[:, ASK_PRICE], book[:, BID_PRICE]
    fails.add((ask != ASK_PAD_PRICE) & (bid != BID_PAD_PRICE) & (bid >= ask), orderbook_file, None,
              lambda r: f"book crossed (bid {bid[r]} >= ask {ask[r]})")
    tick = infer_tick(book)
    _check_grid(fails, message_file, orderbook_file, book, event_type, price, tick)
    fails.raise_first()
    return tick


def _check_messages(fails, file, time, event_type, order_id, size, price, direction):
    fails.add(~np.isfinite(time) | (time < 0), file, _msg_col(MSG_TIME),
              lambda r: f"time {float(time[r])!r} is not a time of day in seconds")
    back = np.zeros(len(time), dtype=bool)
    back[1:] = time[1:] < time[:-1]
    fails.add(back, file, _msg_col(MSG_TIME),
              lambda r: f"time {float(time[r])!r} is before the previous row's {float(time[r - 1])!r}")
    known = np.isin(event_type, KNOWN_EVENT_TYPES)
    fails.add(~known, file, _msg_col(MSG_TYPE),
              lambda r: f"unknown event type {event_type[r]} (known: {', '.join(map(str, KNOWN_EVENT_TYPES))})")
    fails.add(order_id < 0, file, _msg_col(MSG_ORDER_ID), lambda r: f"order id {order_id[r]} is negative")
    # Halt messages (type 7) carry zeros and a price code; every other event a real order.
    halt = event_type == EV_HALT
    order = known & ~halt
    fails.add(order & ((size < 1) | (size > _INT32_MAX)), file, _msg_col(MSG_SIZE),
              lambda r: f"size {size[r]} is not in 1..{_INT32_MAX}")
    fails.add(halt & ((size < 0) | (size > _INT32_MAX)), file, _msg_col(MSG_SIZE),
              lambda r: f"size {size[r]} is not in 0..{_INT32_MAX}")
    fails.add(order & ((price <= 0) | (price >= ASK_PAD_PRICE)), file, _msg_col(MSG_PRICE),
              lambda r: f"price {price[r]} is not a price")
    fails.add(halt & ~np.isin(price, HALT_PRICES), file, _msg_col(MSG_PRICE),
              lambda r: f"halt price {price[r]} is not one of {HALT_PRICES}")
    fails.add(~np.isin(direction, (DIR_SELL, DIR_BUY)), file, _msg_col(MSG_DIRECTION),
              lambda r: f"direction {direction[r]} is not {DIR_SELL} (sell) or {DIR_BUY} (buy)")


def _check_side(fails, file, book, side, price_col, size_col, pad, rising):
    """One side of the book: padding exactly (pad, 0) and only below the occupied levels,
    occupied levels with a real price and a positive size, prices moving away from the touch."""
    p = book[:, price_col::BOOK_COLS_PER_LEVEL]
    s = book[:, size_col::BOOK_COLS_PER_LEVEL]
    empty = p == pad
    occupied = ~empty
    fails.add_cells(occupied & ((p <= 0) | (p >= ASK_PAD_PRICE)), file, lambda r, k: (
        _book_col(price_col, k), f"{p[r, k]} is neither a price nor the {side} padding {pad}"))
    fails.add_cells(empty & (s != 0), file, lambda r, k: (
        _book_col(size_col, k), f"empty {side} level {k + 1} (price {pad}) has size {s[r, k]}; padding size is 0"))
    fails.add_cells(occupied & (s <= 0), file, lambda r, k: (
        _book_col(size_col, k), f"{side} level {k + 1} at price {p[r, k]} has size {s[r, k]}"))
    if p.shape[1] < 2:
        return
    fails.add_cells(empty[:, :-1] & occupied[:, 1:], file, lambda r, k: (
        _book_col(price_col, k + 1), f"{side} level {k + 1} is empty but level {k + 2} is not"))
    away = (p[:, 1:] - p[:, :-1]) * rising > 0
    fails.add_cells(occupied[:, :-1] & occupied[:, 1:] & ~away, file, lambda r, k: (
        _book_col(price_col, k + 1), f"{side} level {k + 2} price {p[r, k + 1]} is not "
                                     f"{'above' if rising > 0 else 'below'} level {k + 1}'s {p[r, k]}"))


def _check_grid(fails, message_file, orderbook_file, book, event_type, price, tick):
    """Prices off the ``tick`` grid: in the book (the real prices, not the padding) and in
    the messages of displayed orders. The report counts the rows off the grid, so a
    user sees at once whether one row is damaged or the file has another grid."""
    if tick == 1:
        return
    is_price = (book > 0) & (book < ASK_PAD_PRICE)
    is_price[:, ASK_SIZE::BOOK_COLS_PER_LEVEL] = is_price[:, BID_SIZE::BOOK_COLS_PER_LEVEL] = False
    off_book = is_price & (book % tick != 0)
    off_msg = np.isin(event_type, _ON_GRID_EVENTS) & (price % tick != 0)
    grid = f"the ${tick / PRICE_SCALE:g} tick grid ({tick} price units) that nearly all book prices share"

    def rows(mask: np.ndarray) -> str:
        n = int(mask.sum())
        return "" if n == 1 else f"; {n} rows off the grid in this file"

    off_rows = off_book.any(axis=1)
    fails.add_cells(off_book, orderbook_file, lambda r, k: (
        f"{k + 1} ({book_column_name(k)})", f"price {book[r, k]} is not on {grid}{rows(off_rows)}"))
    fails.add(off_msg, message_file, _msg_col(MSG_PRICE),
              lambda r: f"price {price[r]} of a type {event_type[r]} event is not on {grid}{rows(off_msg)}")


def infer_tick(book: np.ndarray) -> int:
    """Tick size in price units: the coarsest grid that nearly all occupied book prices share.

    Book levels hold displayed limit orders, which sit on the tick grid; message
    prices are not used because hidden executions (type 5) can print between
    ticks (at the midpoint). The tick divides the most common price, so the
    candidates are that price's divisors, tried from the largest: the first on
    which at least _GRID_SHARE of the distinct prices and of their occurrences
    lie is the tick. A damaged price or two thus cannot re-tick a file (the
    gcd of all prices would fall to 1 unit), while a file quoted on a finer grid
    puts only about 1/k of its prices on a grid k times coarser and keeps its
    own. validate_arrays rejects the prices off the grid. 1 when the book is
    empty throughout.
    """
    occupied = np.concatenate([p[(p != ASK_PAD_PRICE) & (p != BID_PAD_PRICE)] for p in _book_prices(book)])
    occupied = occupied[occupied > 0]
    if occupied.size == 0:
        return 1
    values, counts = np.unique(occupied, return_counts=True)
    for tick in _divisors_descending(int(values[counts.argmax()])):
        on = values % tick == 0
        if on.mean() >= _GRID_SHARE and counts[on].sum() >= _GRID_SHARE * counts.sum():
            return tick
    return 1


def _book_prices(book: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    return book[:, ASK_PRICE::BOOK_COLS_PER_LEVEL], book[:, BID_PRICE::BOOK_COLS_PER_LEVEL]


def _divisors_descending(m: int) -> list[int]:
    small = np.arange(1, math.isqrt(m) + 1, dtype=np.int64)
    small = small[m % small == 0]
    return sorted(set(small.tolist()) | {m // int(d) for d in small}, reverse=True)


__all__ = ["validate_arrays", "infer_tick"]
