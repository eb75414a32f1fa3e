"""``load_lobster``: any LOBSTER source -> validated MarketData, through the Arrow cache."""
from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pyarrow as pa

from alpharl.lobster import cache as _cache
from alpharl.lobster.csvread import read_columns
from alpharl.lobster.errors import LobsterFormatError, at
from alpharl.lobster.format import BOOK_COLS_PER_LEVEL, MSG_COLUMNS, book_column_name
from alpharl.lobster.market import MarketData
from alpharl.lobster.source import Pair, is_arrow, resolve
from alpharl.lobster.validate import validate_arrays

_MSG_TYPES = [pa.float64()] + [pa.int64()] * (len(MSG_COLUMNS) - 1)


def load_lobster(path: str | os.PathLike, levels: int | None = None,
                 cache: bool | str | os.PathLike = True) -> MarketData:
    """Load and validate one LOBSTER message + orderbook pair.

    ``path``: a LOBSTER zip; a message (or orderbook) CSV, its partner found
    beside it by LOBSTER's naming; a directory holding one pair (or one zip);
    or an Arrow cache file. ``levels``: keep the top ``levels`` book levels
    (at most the file's L; also picks the pair where a zip or directory holds
    several). ``cache``: True reuses/writes the Arrow cache at its default
    place, a folder keeps it there instead, False neither reads nor writes one.

    Raises LobsterFormatError, one line naming the file and row, for anything
    unusable: a missing or empty file, a bad row, a pair of unequal length.
    """
    path = Path(path).expanduser()
    if levels is not None and levels < 1:
        raise LobsterFormatError(f"levels={levels}: must be at least 1")
    if is_arrow(path):
        md = _from_arrow_file(path)
    else:
        try:
            pair = resolve(path, levels)
            key = _cache.source_key(pair.files) if cache is not False else None
        except OSError as exc:  # unreadable folder or file: still one line naming it
            raise at(str(exc.filename or path), None, f"cannot read ({exc.strerror or exc})") from None
        cache_dir = None if isinstance(cache, bool) else Path(cache)
        md = _cache.lookup(pair.primary, key, cache_dir) if key else None
        if md is None:
            md = parse_pair(pair)
            if key:
                _cache.write(md, key, pair.primary, cache_dir)
        md.source = str(pair.primary.resolve())
    if levels is not None and levels != md.levels:
        if levels > md.levels:
            raise at(md.source, None, f"levels={levels}: the file has {md.levels} levels")
        md = md.with_levels(levels)
    return md


def parse_pair(pair: Pair) -> MarketData:
    """Parse and validate ``pair`` from its CSV text (no cache involved)."""
    name = pair.name
    msg_file, book_file = pair.label(pair.message), pair.label(pair.orderbook)
    msg = read_columns(pair.read(pair.message), msg_file, list(MSG_COLUMNS), _MSG_TYPES)
    width = BOOK_COLS_PER_LEVEL * name.levels
    book_cols = read_columns(pair.read(pair.orderbook), book_file, [book_column_name(j) for j in range(width)],
                             [pa.int64()] * width, width_note=f" ({name.levels} levels in the file name)")
    book = np.stack(book_cols, axis=1)
    fields = dict(zip(("time", "event_type", "order_id", "size", "price", "direction"), msg))
    tick = validate_arrays(**fields, book=book, levels=name.levels, message_file=msg_file, orderbook_file=book_file)
    return MarketData(ticker=name.ticker, date=name.date, levels=name.levels, book=book, tick=tick,
                      source=str(pair.primary), **fields)


def _from_arrow_file(path: Path) -> MarketData:
    if not path.is_file():
        raise at(str(path), None, "no such file")
    md = _cache.read(path)
    if md is None:
        raise at(str(path), None, f"not a valid alpharl LOBSTER cache (format version {_cache.FORMAT_VERSION}); "
                                  f"load the zip or CSV pair it came from")
    md.source = str(path.resolve())
    return md
