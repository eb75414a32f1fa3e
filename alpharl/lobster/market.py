"""``MarketData``: one validated LOBSTER message + orderbook pair, as numpy arrays."""
from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from alpharl.lobster.format import (ASK_PAD_PRICE, ASK_PRICE, BID_PAD_PRICE, BID_PRICE,
                                    BOOK_COLS_PER_LEVEL)

#: The dtype of every array field: the one place the in-memory layout is fixed.
FIELD_DTYPES = {
    "time": np.float64,
    "event_type": np.int8,
    "order_id": np.int64,
    "size": np.int32,
    "price": np.int64,
    "direction": np.int8,
    "book": np.int64,
}


@dataclass(eq=False)
class MarketData:
    """The historical event stream of one ticker and day (row i of ``book`` is
    the book AFTER message i). Arrays are C-contiguous and read-only: the
    stream is shared by every backtest; copy an array to change it.

    Prices are integers in 1e-4 dollars (LOBSTER's unit); ``book`` keeps
    LOBSTER's column order (AskPrice1, AskSize1, BidPrice1, BidSize1, AskPrice2,
    ...) and its padding of empty levels (ask 9999999999, bid -9999999999, size 0).
    """

    ticker: str
    date: str
    #: L, the number of book levels (book has 4*L columns).
    levels: int
    #: float64[n], seconds after midnight, non-decreasing (ties are common: replay in row order).
    time: np.ndarray
    #: int8[n], 1-5 or 7 (alpharl.lobster.format.EV_*).
    event_type: np.ndarray
    #: int64[n]; 0 for hidden executions; may name an order never submitted in the file.
    order_id: np.ndarray
    #: int32[n], shares.
    size: np.ndarray
    #: int64[n], 1e-4 dollars (halt messages: -1, 0, 1).
    price: np.ndarray
    #: int8[n], side of the LIMIT order: -1 sell, +1 buy.
    direction: np.ndarray
    #: int64[n, 4*L], the book after each message.
    book: np.ndarray
    #: Tick size in price units (100 = $0.01), inferred from the book's prices.
    tick: int
    #: The file the data was read from (zip, message CSV or Arrow file).
    source: str

    def __post_init__(self):
        for name, dtype in FIELD_DTYPES.items():
            # A read-only view: the caller's own array (if one was passed in) stays writable.
            arr = np.ascontiguousarray(getattr(self, name), dtype=dtype).view()
            arr.flags.writeable = False
            setattr(self, name, arr)
        self.levels = int(self.levels)
        self.tick = int(self.tick)

    @property
    def n_events(self) -> int:
        return int(self.time.shape[0])

    def best_ask(self) -> np.ndarray:
        """int64[n]: level-1 ask price; ASK_PAD_PRICE where the ask side is empty."""
        return self.book[:, ASK_PRICE].copy()

    def best_bid(self) -> np.ndarray:
        """int64[n]: level-1 bid price; BID_PAD_PRICE where the bid side is empty."""
        return self.book[:, BID_PRICE].copy()

    def mid(self) -> np.ndarray:
        """float64[n]: (best ask + best bid) / 2 in price units; NaN where a side is empty."""
        ask, bid = self.book[:, ASK_PRICE], self.book[:, BID_PRICE]
        both = (ask != ASK_PAD_PRICE) & (bid != BID_PAD_PRICE)
        return np.where(both, (ask.astype(np.float64) + bid) * 0.5, np.nan)

    def window(self, start: int | None, stop: int | None) -> "MarketData":
        """Rows ``start:stop`` (Python slice rules) as a MarketData sharing this one's arrays."""
        rows = slice(start, stop)
        return replace(self, **{name: getattr(self, name)[rows] for name in FIELD_DTYPES})

    def with_levels(self, levels: int) -> "MarketData":
        """The top ``levels`` levels of the book (1 <= levels <= L): an L-level book
        truncated to k levels is exactly the k-level book after each message."""
        if not 1 <= levels <= self.levels:
            raise ValueError(f"levels={levels}: the data has {self.levels} levels")
        if levels == self.levels:
            return self
        return replace(self, levels=levels, book=self.book[:, :levels * BOOK_COLS_PER_LEVEL])
