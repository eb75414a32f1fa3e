"""Arrow cache of validated LOBSTER data.

A source (a zip, or a message + orderbook CSV pair) is parsed and validated
once and written as an Arrow IPC file, ``<source name>.arrow.cache`` beside
the source when that folder is writable, else in the user cache folder
(``$XDG_CACHE_HOME/alpharl`` or ``~/.cache/alpharl``).

The cache records the key of its source: the cache format version and each
source file's name, size and full sha256 (hashing runs at about 1 GB/s, a few
tens of ms for the largest sample), so an unchanged source is recognised
whatever its mtime and any change of content forces a rebuild. It also
records a sha256 of its own arrays and metadata, written after validation: a
cache whose key, layout or digest does not check out is ignored and rewritten,
never trusted. Writes are atomic (alpharl.atomic), so a reader never sees a
half-written cache.
"""
from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

import numpy as np
import pyarrow as pa

from alpharl.atomic import atomic_writer
from alpharl.lobster.format import BOOK_COLS_PER_LEVEL
from alpharl.lobster.market import FIELD_DTYPES, MarketData

#: Bump when the cached layout or the validation rules change: older caches are then rebuilt.
FORMAT_VERSION = 1
SUFFIX = ".arrow.cache"
_META = b"alpharl.lobster"
_HASH_CHUNK = 1 << 22
_COLUMNS = tuple(name for name in FIELD_DTYPES if name != "book")


def user_cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "alpharl"


def source_key(files: list[Path]) -> dict:
    """What a cache must match to stand for ``files``: format version, and name, size, sha256 of each."""
    entries = []
    for f in files:
        digest = hashlib.sha256()
        with open(f, "rb") as fh:
            while chunk := fh.read(_HASH_CHUNK):
                digest.update(chunk)
        entries.append({"name": f.name, "size": f.stat().st_size, "sha256": digest.hexdigest()})
    return {"version": FORMAT_VERSION, "files": entries}


def locations(primary: Path, cache_dir: Path | None = None) -> list[Path]:
    """Where the cache of source ``primary`` may live, in the order they are tried."""
    if cache_dir is not None:
        return [Path(cache_dir) / f"{primary.name}{SUFFIX}"]
    # The user folder holds caches of many sources: the name carries a hash of the source's path.
    tag = hashlib.sha256(str(primary.resolve()).encode()).hexdigest()[:12]
    return [primary.with_name(primary.name + SUFFIX), user_cache_dir() / f"{primary.name}.{tag}{SUFFIX}"]


def lookup(primary: Path, key: dict, cache_dir: Path | None = None) -> MarketData | None:
    """The cached data of ``primary`` when a cache matching ``key`` exists and checks out, else None."""
    for path in locations(primary, cache_dir):
        if path.is_file():
            md = read(path, key, source=str(primary))
            if md is not None:
                return md
    return None


def read(path: Path, key: dict | None = None, source: str | None = None) -> MarketData | None:
    """Load a cache file; None when it is unreadable, stale (key differs) or its data fails validation.

    ``key`` None accepts any source (an Arrow file given directly)."""
    try:
        with pa.OSFile(str(path)) as fh:
            table = pa.ipc.open_file(fh).read_all()
        meta = json.loads(table.schema.metadata[_META])
        if meta["key"]["version"] != FORMAT_VERSION or (key is not None and meta["key"] != key):
            return None
        levels = int(meta["levels"])
        if table.schema != _schema(levels).with_metadata(table.schema.metadata):
            return None
        arrays = {name: table.column(name).to_numpy() for name in _COLUMNS}
        book_list = table.column("book").combine_chunks()
        arrays["book"] = book_list.flatten().to_numpy().reshape(-1, BOOK_COLS_PER_LEVEL * levels)
        if book_list.null_count or meta.pop("digest") != _digest(meta, arrays):
            return None
    except (OSError, pa.ArrowException, KeyError, TypeError, ValueError):  # ValueError: bad JSON, bad shape
        return None
    return MarketData(ticker=meta["ticker"], date=meta["date"], levels=levels, tick=meta["tick"],
                      source=source if source is not None else str(path), **arrays)


def write(md: MarketData, key: dict, primary: Path, cache_dir: Path | None = None) -> Path | None:
    """Write the cache of ``md`` at the first writable location; None when none is (the cache is optional)."""
    meta = {"key": key, "ticker": md.ticker, "date": md.date, "levels": md.levels, "tick": md.tick,
            "source": key["files"][0]["name"]}
    meta["digest"] = _digest(meta, {name: getattr(md, name) for name in FIELD_DTYPES})
    schema = _schema(md.levels).with_metadata({_META: json.dumps(meta).encode()})
    book = pa.FixedSizeListArray.from_arrays(pa.array(md.book.reshape(-1)), BOOK_COLS_PER_LEVEL * md.levels)
    table = pa.Table.from_arrays([pa.array(getattr(md, name)) for name in _COLUMNS] + [book], schema=schema)
    for path in locations(primary, cache_dir):
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            with atomic_writer(path) as fh, pa.ipc.new_file(fh, schema) as writer:
                writer.write_table(table)
            return path
        except OSError:   # not writable (or full) here: try the next location
            continue
    return None


def _digest(meta: dict, arrays: dict[str, np.ndarray]) -> str:
    """sha256 of the metadata and every array's bytes: proves a cache is what was written."""
    digest = hashlib.sha256(json.dumps(meta, sort_keys=True).encode())
    for name in FIELD_DTYPES:
        digest.update(np.ascontiguousarray(arrays[name], dtype=FIELD_DTYPES[name]).data)
    return digest.hexdigest()


def _schema(levels: int) -> pa.Schema:
    fields = [pa.field(name, pa.from_numpy_dtype(FIELD_DTYPES[name]), nullable=False) for name in _COLUMNS]
    book = pa.list_(pa.field("level_column", pa.int64(), nullable=False), BOOK_COLS_PER_LEVEL * levels)
    return pa.schema(fields + [pa.field("book", book, nullable=False)])


__all__ = ["FORMAT_VERSION", "SUFFIX", "source_key", "locations", "lookup", "read", "write", "user_cache_dir"]
