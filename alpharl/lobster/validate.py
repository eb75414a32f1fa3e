"""Validation of a LOBSTER message + orderbook pair, vectorised with numpy.

Every check finds its first failing row; the error reported is the earliest
failing row over all checks, so fixing a file top to bottom meets them in order.
"""
from __future__ import annotations

from pathlib import PurePosixPath

import numpy as np

from alpharl.lobster.errors import at
from alpharl.lobster.format import (ASK_PAD_PRICE, ASK_PRICE, ASK_SIZE, BID_PAD_PRICE, BID_PRICE, BID_SIZE,
                                    BOOK_COLS_PER_LEVEL, DIR_BUY, DIR_SELL, EV_HALT, HALT_PRICES,
                                    KNOWN_EVENT_TYPES, MSG_COLUMNS, MSG_DIRECTION, MSG_ORDER_ID, MSG_PRICE,
                                    MSG_SIZE, MSG_TIME, MSG_TYPE, book_column_name)

_INT32_MAX = int(np.iinfo(np.int32).max)
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
                    message_file: str = "message", orderbook_file: str = "orderbook") -> None:
    """Check a parsed pair; raise LobsterFormatError for the earliest bad row.

    Checked: equal row counts and 4*levels book columns; times finite and
    non-decreasing; event types in {1..5, 7}; direction -1/+1; order ids >= 0;
    sizes >= 1 and prices > 0 on order events (halts: zeros, price -1/0/1);
    book levels either exactly the padding (price sentinel, size 0) or a real
    price with size > 0, padding only below occupied levels, asks rising and
    bids falling with depth, best bid < best ask where both sides exist.
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
    fails.raise_first()


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


def infer_tick(book: np.ndarray) -> int:
    """Tick size in price units: the gcd of every occupied book price.

    Book levels hold displayed limit orders, which sit on the tick grid; message
    prices are not used because hidden executions (type 5) can print between
    ticks (at the midpoint). 1 when the book is empty throughout.
    """
    prices = [book[:, c::BOOK_COLS_PER_LEVEL] for c in (ASK_PRICE, BID_PRICE)]
    occupied = np.concatenate([p[(p != ASK_PAD_PRICE) & (p != BID_PAD_PRICE)] for p in prices])
    if occupied.size == 0:
        return 1
    return int(np.gcd.reduce(occupied))


__all__ = ["validate_arrays", "infer_tick"]
