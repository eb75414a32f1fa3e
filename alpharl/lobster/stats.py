"""Summary statistics of MarketData (``alpharl data info``)."""
from __future__ import annotations

import numpy as np

from alpharl.lobster.format import (ASK_PAD_PRICE, ASK_PRICE, ASK_SIZE, BID_PAD_PRICE, BID_PRICE, BID_SIZE,
                                    BOOK_COLS_PER_LEVEL, EV_CANCEL, EV_DELETE, EV_EXEC, EV_NEW, EVENT_NAMES,
                                    PRICE_SCALE)
from alpharl.lobster.market import MarketData

#: Events that refer to an earlier submission by order id (hidden executions carry id 0).
_REFERRING_EVENTS = (EV_CANCEL, EV_DELETE, EV_EXEC)
_MS_PER_S, _MS_PER_MIN, _MS_PER_H = 1000, 60_000, 3_600_000


def clock(seconds: float) -> str:
    """Seconds after midnight as HH:MM:SS.fff."""
    ms = int(round(seconds * _MS_PER_S))
    h, ms = divmod(ms, _MS_PER_H)
    m, ms = divmod(ms, _MS_PER_MIN)
    s, ms = divmod(ms, _MS_PER_S)
    return f"{h:02d}:{m:02d}:{s:02d}.{ms:03d}"


def unknown_order_fraction(md: MarketData) -> float:
    """Fraction of cancel/delete/execute rows whose order id has no earlier submission in the file.

    LOBSTER files only hold events touching the top L levels from 09:30 on, so
    orders placed before the open or deeper in the book appear without their
    submission; a replayer must accept them."""
    rows = np.arange(md.n_events)
    new = md.event_type == EV_NEW
    # np.unique's index is the first occurrence, i.e. the earliest submission row of each id.
    ids, first = np.unique(md.order_id[new], return_index=True)
    first_row = rows[new][first]
    refer = np.isin(md.event_type, _REFERRING_EVENTS)
    if not refer.any():
        return 0.0
    if len(ids) == 0:
        return 1.0
    ref_ids, ref_rows = md.order_id[refer], rows[refer]
    pos = np.minimum(np.searchsorted(ids, ref_ids), len(ids) - 1)
    known = (ids[pos] == ref_ids) & (first_row[pos] < ref_rows)
    return float(1.0 - known.mean())


def describe(md: MarketData) -> dict:
    """Everything ``alpharl data info`` reports, as plain JSON-ready values."""
    ask, bid = md.book[:, ASK_PRICE], md.book[:, BID_PRICE]
    both = (ask != ASK_PAD_PRICE) & (bid != BID_PAD_PRICE)
    spread = (ask[both] - bid[both]) / md.tick
    sizes = {side: md.book[:, col::BOOK_COLS_PER_LEVEL] for side, col in (("ask", ASK_SIZE), ("bid", BID_SIZE))}
    types, counts = np.unique(md.event_type, return_counts=True)
    return {
        "ticker": md.ticker,
        "date": md.date,
        "levels": md.levels,
        "events": md.n_events,
        "time_first": float(md.time[0]) if md.n_events else None,
        "time_last": float(md.time[-1]) if md.n_events else None,
        "time_span": f"{clock(md.time[0])} - {clock(md.time[-1])}" if md.n_events else None,
        "tick": md.tick,
        "tick_dollars": md.tick / PRICE_SCALE,
        "spread_ticks": None if not both.any() else {
            "mean": float(spread.mean()),
            "median": float(np.median(spread)),
            "p99": float(np.percentile(spread, 99)),
            "max": float(spread.max()),
            "rows_one_sided": int((~both).sum()),
        },
        # Sizes in shares, averaged over all rows (an empty level counts as 0).
        "depth": {
            **{f"{side}_level1_mean": float(s[:, 0].mean()) if md.n_events else None for side, s in sizes.items()},
            **{f"{side}_all_levels_mean": float(s.sum(axis=1).mean()) if md.n_events else None
               for side, s in sizes.items()},
        },
        "event_types": [{"type": int(t), "name": EVENT_NAMES[int(t)], "count": int(c)} for t, c in zip(types, counts)],
        "unknown_order_id_fraction": unknown_order_fraction(md),
        "source": md.source,
    }
