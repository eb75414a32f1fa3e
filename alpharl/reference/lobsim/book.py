"""NumPy twin of cuda_kernels/lobsim/book.py: reads of the book table, vectorised over backtests.

``book`` is the int32 table ``[rows, 4L]`` (LOBSTER column order, prices in
ticks, empty levels at ``ASK_EMPTY`` / ``BID_EMPTY``); ``rows`` holds one
snapshot row per backtest being read.
"""
from __future__ import annotations

import numpy as np

from alpharl.lobster.format import ASK_PRICE, ASK_SIZE, BID_PRICE, BID_SIZE, BOOK_COLS_PER_LEVEL
from alpharl.sim import layout as L

_I32 = np.int32


def col(lv, c):
    """Column of field ``c`` (ASK_PRICE, ...) of level ``lv``."""
    return lv * BOOK_COLS_PER_LEVEL + c


def mid2(book, rows):
    """Doubled mid price in ticks (ask1 + bid1); with one side empty, twice the other's best; 0 if both are."""
    a = book[rows, ASK_PRICE].astype(np.int64)
    bd = book[rows, BID_PRICE].astype(np.int64)
    ha, hb = a != L.ASK_EMPTY, bd != L.BID_EMPTY
    return np.where(ha & hb, a + bd, np.where(ha, 2 * a, np.where(hb, 2 * bd, 0))).astype(_I32)


def side_cols(side, levels):
    """(price cols, size cols, empty sentinel) of the book side where orders of ``side`` rest."""
    pc = ASK_PRICE if side == L.SIDE_SELL else BID_PRICE
    zc = ASK_SIZE if side == L.SIDE_SELL else BID_SIZE
    lv = np.arange(levels) * BOOK_COLS_PER_LEVEL
    return lv + pc, lv + zc, (L.ASK_EMPTY if side == L.SIDE_SELL else L.BID_EMPTY)


def level_size(book, rows, side, px, levels):
    """Visible size at price px on the side where ``side`` orders rest, or 0 when not listed."""
    pc, zc, _ = side_cols(side, levels)
    match = book[rows][:, pc] == px[:, None]
    return (book[rows][:, zc] * match).sum(axis=1).astype(_I32)


def level_cap(book, rows, side, px, levels):
    """Upper bound of the queue ahead at px: the visible size there; 0 when px lies
    within the visible range (or the side has fewer than L levels) but is not
    listed; CAP_UNKNOWN when px lies beyond a full visible depth."""
    pc, zc, empty = side_cols(side, levels)
    prices = book[rows][:, pc]
    match = prices == px[:, None]
    found = match.any(axis=1)
    size = (book[rows][:, zc] * match).sum(axis=1)
    deepest = prices[:, -1]
    full = deepest != empty
    beyond = (px < deepest) if side == L.SIDE_BUY else (px > deepest)
    return np.where(found, size, np.where(full & beyond, L.CAP_UNKNOWN, 0)).astype(_I32)


def best_opposite(book, rows, side):
    """Best price an order of ``side`` would trade against (ask for buys), with its empty sentinel."""
    if side == L.SIDE_BUY:
        return book[rows, ASK_PRICE], L.ASK_EMPTY
    return book[rows, BID_PRICE], L.BID_EMPTY
