"""Arrow cache of validated LOBSTER data, in the user cache directory.

A source (a zip, or a message + orderbook CSV pair) is parsed and validated
once and written as an Arrow IPC file in the cache directory ``cache_dir()``:
``$ALPHARL_CACHE_DIR``, else ``$XDG_CACHE_HOME/alpharl``, else
``~/.cache/alpharl``; never beside the data (a data folder may be shared,
read-only or backed up, and a cache is many times its zip).

An entry is named ``<source name>.<key hash><SUFFIX>``; the key is the cache
format version and each source file's name, size and full sha256 (hashing runs
at about 1 GB/s, a few tens of ms for the largest sample), so an unchanged
source is found whatever its path or mtime and any change of content makes
another entry. The entry records the key and a sha256 of its own arrays and
metadata, written after validation: an entry whose key, layout or digest does
not check out is ignored and rewritten, never trusted. Writes are atomic
(alpharl.atomic).

Columns are zstd-compressed: measured on the embedded sample, 5.7 MB
uncompressed, 0.97 MB with lz4, 0.47 MB with zstd (about the size of the zip),
and reading back stays a small part of a parse. The directory is capped at
``$ALPHARL_CACHE_MAX_MB`` (default ``DEFAULT_MAX_MB``): after each write the
least recently used entries (by mtime, refreshed on every hit) are evicted
beyond it. ``alpharl data cache`` shows the directory and its size, ``--clear``
empties it.
"""
from __future__ import annotations

import contextlib
import hashlib
import json
import os
from pathlib import Path

import numpy as np
import pyarrow as pa

from alpharl.atomic import atomic_writer, remove_stale_temps
from alpharl.lobster.format import BOOK_COLS_PER_LEVEL
from alpharl.lobster.market import FIELD_DTYPES, MarketData

#: Bump when the cached layout or the validation rules change: older caches are then rebuilt.
FORMAT_VERSION = 3
SUFFIX = ".arrow.cache"
#: Environment variables: the cache directory, and its size cap in MB.
CACHE_DIR_ENV, MAX_MB_ENV = "ALPHARL_CACHE_DIR", "ALPHARL_CACHE_MAX_MB"
#: Default size cap of the cache directory, in MB (a few dozen trading days of the largest samples).
DEFAULT_MAX_MB = 2048
#: Column compression of the entries (see the module doc for the measurement).
COMPRESSION = "zstd"
#: Hex digits of the key's sha256 in an entry's name.
_KEY_DIGITS = 16
_META = b"alpharl.lobster"
_HASH_CHUNK = 1 << 22
_COLUMNS = tuple(name for name in FIELD_DTYPES if name != "book")


def cache_dir() -> Path:
    """Where entries go: $ALPHARL_CACHE_DIR, else $XDG_CACHE_HOME/alpharl, else ~/.cache/alpharl."""
    if os.environ.get(CACHE_DIR_ENV):
        return Path(os.environ[CACHE_DIR_ENV]).expanduser()
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "alpharl"


def _folder(folder: Path | None) -> Path:
    """``folder``, or the cache directory when None."""
    return Path(folder) if folder is not None else cache_dir()


def max_bytes() -> int:
    """The size cap of the cache directory ($ALPHARL_CACHE_MAX_MB, else DEFAULT_MAX_MB)."""
    raw = os.environ.get(MAX_MB_ENV, "")
    try:
        mb = float(raw) if raw else DEFAULT_MAX_MB
    except ValueError:
        mb = DEFAULT_MAX_MB
    return int(mb * 1e6) if mb == mb and mb >= 0 else int(DEFAULT_MAX_MB * 1e6)


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


def entry_path(primary: Path, key: dict, folder: Path | None = None) -> Path:
    """The entry of source ``primary`` with ``key``, in ``folder`` (None: ``cache_dir()``)."""
    tag = hashlib.sha256(json.dumps(key, sort_keys=True).encode()).hexdigest()[:_KEY_DIGITS]
    return _folder(folder) / f"{primary.name}.{tag}{SUFFIX}"


def lookup(primary: Path, key: dict, folder: Path | None = None) -> MarketData | None:
    """The cached data of ``primary`` when an entry matching ``key`` exists and checks out, else None."""
    path = entry_path(primary, key, folder)
    md = read(path, key, source=str(primary)) if path.is_file() else None
    if md is not None:
        with contextlib.suppress(OSError):
            os.utime(path)   # recently used: evicted last
    return md


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


def write(md: MarketData, key: dict, primary: Path, folder: Path | None = None) -> Path | None:
    """Write the entry of ``md``, then keep the folder under its cap; None when it cannot be
    written (not writable, disk full: the cache is optional, and no temporary is left)."""
    meta = {"key": key, "ticker": md.ticker, "date": md.date, "levels": md.levels, "tick": md.tick,
            "source": key["files"][0]["name"]}
    meta["digest"] = _digest(meta, {name: getattr(md, name) for name in FIELD_DTYPES})
    schema = _schema(md.levels).with_metadata({_META: json.dumps(meta).encode()})
    book = pa.FixedSizeListArray.from_arrays(pa.array(md.book.reshape(-1)), BOOK_COLS_PER_LEVEL * md.levels)
    table = pa.Table.from_arrays([pa.array(getattr(md, name)) for name in _COLUMNS] + [book], schema=schema)
    path = entry_path(primary, key, folder)
    options = pa.ipc.IpcWriteOptions(compression=COMPRESSION)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        with atomic_writer(path) as fh, pa.ipc.new_file(fh, schema, options=options) as writer:
            writer.write_table(table)
    except OSError:
        return None
    evict(path.parent, max_bytes(), keep=path)
    return path


def entries(folder: Path | None = None) -> list[Path]:
    """The cache entries in ``folder`` (None: ``cache_dir()``), least recently used first."""
    folder = _folder(folder)
    if not folder.is_dir():
        return []
    found = []
    for p in folder.iterdir():
        with contextlib.suppress(OSError):
            if p.name.endswith(SUFFIX) and p.is_file():
                found.append((p.stat().st_mtime_ns, p))
    return [p for _, p in sorted(found)]


def _size(p: Path) -> int:
    try:
        return p.stat().st_size
    except OSError:
        return 0


def usage(folder: Path | None = None) -> dict:
    """Where the cache is and how much it holds (for ``alpharl data cache``)."""
    found = entries(folder)
    return {"dir": str(_folder(folder)), "entries": len(found),
            "bytes": sum(_size(p) for p in found), "max_bytes": max_bytes(),
            "files": [{"name": p.name, "bytes": _size(p)} for p in found]}


def evict(folder: Path, limit: int, keep: Path | None = None) -> list[str]:
    """Remove the least recently used entries until the folder's entries total at most ``limit``
    bytes (``keep``, the entry just written, stays even if it alone is larger); the names removed."""
    found = entries(folder)
    total = sum(_size(p) for p in found)
    removed = []
    for p in found:
        if total <= limit:
            break
        if keep is not None and p == keep:
            continue
        total -= _size(p)
        with contextlib.suppress(FileNotFoundError):
            p.unlink()
            removed.append(p.name)
    return removed


def clear(folder: Path | None = None) -> int:
    """Remove every entry (and a killed writer's temporaries) from the cache folder; the bytes freed."""
    folder = _folder(folder)
    freed = sum(_size(p) for p in entries(folder))
    evict(folder, 0)
    remove_stale_temps(folder)
    return freed


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


__all__ = ["FORMAT_VERSION", "SUFFIX", "source_key", "entry_path", "lookup", "read", "write", "cache_dir",
           "entries", "usage", "evict", "clear", "max_bytes"]
