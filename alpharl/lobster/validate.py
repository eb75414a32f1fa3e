"""Validation of a LOBSTER message + orderbook pair, vectorised with numpy.

Every check finds its first failing row; the error reported is the earliest
failing row over all checks, so fixing a file top to bottom meets them in order.
"""
from __future__ import annotations

import numpy as np

from alpharl.lobster.errors import LobsterFormatError, at
from alpharl.lobster.format import (ASK_PAD_PRICE, ASK_PRICE, ASK_SIZE, BID_PAD_PRICE, BID_PRICE, BID_SIZE,
                                    BOOK_COLS_PER_LEVEL, DIR_BUY, DIR_SELL, EV_HALT, HALT_PRICES,
                                    KNOWN_EVENT_TYPES, MSG_COLUMNS, MSG_DIRECTION, MSG_ORDER_ID, MSG_PRICE,
                                    MSG_SIZE, MSG_TIME, MSG_TYPE, book_column_name)

_INT32_MAX = int(np.iinfo(np.int32).max)
# (side name, price column, size column, padding price, +1 when deeper levels must rise)
_SIDES = (("ask", ASK_PRICE, ASK_SIZE, ASK_PAD_PRICE, 1), ("bid", BID_PRICE, BID_SIZE, BID_PAD_PRICE, -1))


class _Failures:
    """Collects (row, file, what, column) for the first failing row of each check."""

    def __init__(self):
        self.found: list[tuple[int, str, str, str | None]] = []

    def add(self, mask: np.ndarray, file: str, what, column=None) -> None:
        """``mask``: bool[n] of failing rows; ``what``/``column``: text, or a function of the row."""
        row = int(mask.argmax()) if mask.size else 0
        if mask.size and mask[row]:
            self.found.append((row, file, what(row) if callable(what) else what,
                               column(row) if callable(column) else column))

    def add_cells(self, mask: np.ndarray, file: str, what, column) -> None:
        """``mask``: bool[n, L] of failing (row, level) cells; ``what``/``column`` are functions of (row, level)."""
        rows = mask.any(axis=1)
        row = int(rows.argmax()) if rows.size else 0
        if rows.size and rows[row]:
            level = int(mask[row].argmax())
            self.found.append((row, file, what(row, level), column(row, level)))

    def raise_first(self) -> None:
        if self.found:
            row, file, what, column = min(self.found, key=lambda f: f[0])
            raise at(file, row + 1, what, column)


def _col(index: int) -> str:
    return f"{index + 1} ({MSG_COLUMNS[index]})"


def validate_arrays(time, event_type, order_id, size, price, direction, book, levels: int,
                    message_file: str = "message", orderbook_file: str = "orderbook") -> None:
    """Check a parsed pair; raise LobsterFormatError for the earliest bad row.

    Integer inputs may be any width (the CSV reader hands over int64, so values
    that would not fit the narrow MarketData dtypes are caught here).
    """
    n, n_book = len(time), len(book)
    if n != n_book:
        short, long_, n_short, n_long = ((orderbook_file, message_file, n_book, n) if n_book < n
                                         else (message_file, orderbook_file, n, n_book))
        raise at(short, n_short + 1, f"missing: {short} has {n_short} rows but {long_} has {n_long}")
    if book.ndim != 2 or book.shape[1] != BOOK_COLS_PER_LEVEL * levels:
        raise at(orderbook_file, 1, f"{book.shape[-1]} columns, expected {BOOK_COLS_PER_LEVEL * levels} "
                                    f"for {levels} levels")
    fails = _Failures()
    _check_messages(fails, message_file, time, event_type, order_id, size, price, direction)
    _check_book(fails, orderbook_file, book, levels)
    fails.raise_first()


def _check_messages(fails, file, time, event_type, order_id, size, price, direction):
    fails.add(~np.isfinite(time) | (time < 0), file,
              lambda r: f"time {time[r]} is not a time of day in seconds", _col(MSG_TIME))
    back = np.zeros(len(time), dtype=bool)
    back[1:] = time[1:] < time[:-1]
    fails.add(back, file, lambda r: f"time {time[r]!r} is before the previous row's {time[r - 1]!r}", _col(MSG_TIME))
    known = np.isin(event_type, KNOWN_EVENT_TYPES)
    fails.add(~known, file, lambda r: f"unknown event type {event_type[r]} "
                                      f"(known: {', '.join(map(str, KNOWN_EVENT_TYPES))})", _col(MSG_TYPE))
    fails.add(order_id < 0, file, lambda r: f"order id {order_id[r]} is negative", _col(MSG_ORDER_ID))
    halt = event_type == EV_HALT
    fails.add(~halt & known & ((size < 1) | (size > _INT32_MAX)), file,
              lambda r: f"size {size[r]} is not in 1..{_INT32_MAX}", _col(MSG_SIZE))
    fails.add(halt & ((size < 0) | (size > _INT32_MAX)), file,
              lambda r: f"size {size[r]} is not in 0..{_INT32_MAX}", _col(MSG_SIZE))
    fails.add(~halt & known & ((price <= 0) | (price >= ASK_PAD_PRICE)), file,
              lambda r: f"price {price[r]} is not a price", _col(MSG_PRICE))
    fails.add(halt & ~np.isin(price, HALT_PRICES), file,
              lambda r: f"halt price {price[r]} is not one of {HALT_PRICES}", _col(MSG_PRICE))
    fails.add(~np.isin(direction, (DIR_SELL, DIR_BUY)), file,
              lambda r: f"direction {direction[r]} is not {DIR_SELL} (sell) or {DIR_BUY} (buy)", _col(MSG_DIRECTION))


def _check_book(fails, file, book, levels):
    def name(col):
        return f"{col + 1} ({book_column_name(col)})"

    for side, price_col, size_col, pad, rising in _SIDES:
        p = book[:, price_col::BOOK_COLS_PER_LEVEL]
        s = book[:, size_col::BOOK_COLS_PER_LEVEL]
        empty = p == pad
        occupied = ~empty
        pcol = lambda r, k, price_col=price_col: name(price_col + k * BOOK_COLS_PER_LEVEL)  # noqa: E731
        scol = lambda r, k, size_col=size_col: name(size_col + k * BOOK_COLS_PER_LEVEL)  # noqa: E731
        fails.add_cells(occupied & ((p <= 0) | (p >= ASK_PAD_PRICE)), file,
                        lambda r, k, p=p, side=side, pad=pad: f"{p[r, k]} is neither a price nor the {side} "
                                                              f"padding {pad}", pcol)
        fails.add_cells(empty & (s != 0), file,
                        lambda r, k, s=s, side=side, pad=pad: f"empty {side} level {k + 1} (price {pad}) has size "
                                                              f"{s[r, k]}; padding size is 0", scol)
        fails.add_cells(occupied & (s <= 0), file,
                        lambda r, k, p=p, s=s, side=side: f"{side} level {k + 1} at price {p[r, k]} has size "
                                                          f"{s[r, k]}", scol)
        if levels > 1:
            gap = empty[:, :-1] & occupied[:, 1:]
            fails.add_cells(gap, file, lambda r, k, side=side: f"{side} level {k + 1} is empty but level {k + 2} "
                                                               f"is not", lambda r, k, pcol=pcol: pcol(r, k + 1))
            step = (p[:, 1:] - p[:, :-1]) * rising
            disorder = occupied[:, :-1] & occupied[:, 1:] & (step <= 0)
            fails.add_cells(disorder, file,
                            lambda r, k, p=p, side=side: f"{side} level {k + 2} price {p[r, k + 1]} is not "
                                                         f"{'above' if side == 'ask' else 'below'} level {k + 1}'s "
                                                         f"{p[r, k]}", lambda r, k, pcol=pcol: pcol(r, k + 1))
    ask, bid = book[:, ASK_PRICE], book[:, BID_PRICE]
    fails.add((ask != ASK_PAD_PRICE) & (bid != BID_PAD_PRICE) & (bid >= ask), file,
              lambda r: f"book crossed (bid {bid[r]} >= ask {ask[r]})")


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


__all__ = ["validate_arrays", "infer_tick", "LobsterFormatError"]
