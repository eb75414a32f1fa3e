"""Finding a LOBSTER message + orderbook pair: in a zip, as two CSVs, or in a directory."""
from __future__ import annotations

import re
import zipfile
import zlib
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from alpharl.lobster.errors import LobsterFormatError, at
from alpharl.lobster.format import FILE_NAME_PATTERN, MESSAGE, ORDERBOOK

_NAME = re.compile(FILE_NAME_PATTERN)
#: Suffixes of an Arrow file given directly (the cache's own suffix included).
ARROW_SUFFIXES = (".arrow", ".arrow.cache", ".feather")
NAMING_HINT = "<TICKER>_<DATE>_<start>_<end>_message_<L>.csv"
#: What reading a zip can raise besides OSError: a damaged archive or member
#: (BadZipFile, e.g. a bad CRC-32; zlib.error, a corrupt deflate stream;
#: EOFError, a member cut short), an encrypted member (RuntimeError) or an
#: unsupported compression method (NotImplementedError).
_ZIP_FAILURES = (zipfile.BadZipFile, zlib.error, EOFError, RuntimeError, NotImplementedError)


@contextmanager
def reading(label: str):
    """The one way LOBSTER files are read: any failure of the file system, the
    zip container or its decompression becomes one LobsterFormatError line
    naming ``label`` (a path, or ``archive.zip:member``)."""
    try:
        yield
    except OSError as exc:
        raise at(label, None, f"cannot read ({exc.strerror or exc})") from None
    except _ZIP_FAILURES as exc:
        raise at(label, None, f"damaged zip archive ({type(exc).__name__}: {exc})") from None


@dataclass(frozen=True)
class LobsterName:
    """What LOBSTER's file name says: <TICKER>_<DATE>_<start ms>_<end ms>_<kind>_<L>.csv."""

    ticker: str
    date: str
    start_ms: int
    end_ms: int
    kind: str
    levels: int

    def sibling(self, name: str) -> str:
        """The other file of the pair: ``_message_`` <-> ``_orderbook_`` in ``name``."""
        other = ORDERBOOK if self.kind == MESSAGE else MESSAGE
        head, _, tail = name.rpartition(f"_{self.kind}_")
        return f"{head}_{other}_{tail}"


def parse_name(name: str) -> LobsterName | None:
    """LOBSTER's fields of a file name (the last path component of ``name``), or None."""
    m = _NAME.fullmatch(PurePosixPath(name).name)
    if m is None:
        return None
    return LobsterName(m["ticker"], m["date"], int(m["start"]), int(m["end"]), m["kind"], int(m["levels"]))


@dataclass(frozen=True)
class Pair:
    """One message + orderbook pair: members of ``archive`` or, without one, CSV paths."""

    archive: Path | None
    message: str
    orderbook: str
    name: LobsterName

    @property
    def files(self) -> list[Path]:
        """The files on disk the pair is read from (what the cache key covers)."""
        return [self.archive] if self.archive else [Path(self.message), Path(self.orderbook)]

    @property
    def primary(self) -> Path:
        """The file that names the source: the zip, or the message CSV."""
        return self.archive if self.archive else Path(self.message)

    def label(self, member: str) -> str:
        """How errors name a file of the pair."""
        return f"{self.archive.name}:{member}" if self.archive else member

    def read(self, member: str) -> bytes:
        """The bytes of ``member``; LobsterFormatError naming it when they cannot be read."""
        with reading(self.label(member)):
            if self.archive is None:
                return Path(member).read_bytes()
            with zipfile.ZipFile(self.archive) as zf:
                return zf.read(member)


def is_arrow(path: Path) -> bool:
    return path.name.endswith(ARROW_SUFFIXES)


def resolve(path: Path, levels: int | None = None) -> Pair:
    """The pair that ``path`` (zip, message or orderbook CSV, or directory) designates.

    ``levels`` picks a pair where a zip or directory holds pairs of several level counts.
    """
    if not path.exists():
        raise at(str(path), None, "no such file or directory")
    if path.is_dir():
        return _in_directory(path, levels)
    if zipfile.is_zipfile(path):
        return _in_zip(path, levels)
    if path.suffix.lower() == ".zip":
        raise at(str(path), None, "not a readable zip archive")
    return _csv_pair(path)


def _csv_pair(path: Path) -> Pair:
    name = parse_name(path.name)
    if name is None:
        raise at(str(path), None, f"not a LOBSTER file name ({NAMING_HINT}, or a .zip)")
    other = path.with_name(name.sibling(path.name))
    if not other.is_file():
        raise at(str(other), None, f"no such file (the {ORDERBOOK if name.kind == MESSAGE else MESSAGE} "
                                   f"file of {path.name})")
    message, orderbook = (path, other) if name.kind == MESSAGE else (other, path)
    return Pair(None, str(message), str(orderbook), parse_name(message.name))


def _pick(candidates: list[LobsterName], where: str, levels: int | None) -> int:
    """Index of the pair to use among ``candidates`` (the message files found in ``where``)."""
    if levels is not None:
        exact = [i for i, c in enumerate(candidates) if c.levels == levels]
        if len(exact) == 1:
            return exact[0]
        deeper = [i for i, c in enumerate(candidates) if c.levels > levels]
        if not exact and len(deeper) == 1:
            return deeper[0]
    if len(candidates) == 1:
        return 0
    found = ", ".join(f"{c.ticker} {c.date} L={c.levels}" for c in candidates)
    raise LobsterFormatError(f"{where}: holds {len(candidates)} LOBSTER pairs ({found}); name one file "
                             f"or pass the level count")


def _in_zip(path: Path, levels: int | None) -> Pair:
    with reading(str(path)), zipfile.ZipFile(path) as zf:
        members = [m for m in zf.namelist() if not m.endswith("/")]
    named = {m: parse_name(m) for m in members}
    messages = [m for m, n in named.items() if n and n.kind == MESSAGE]
    if not messages:
        orderbooks = [m for m, n in named.items() if n and n.kind == ORDERBOOK]
        if orderbooks:
            raise at(f"{path.name}:{named[orderbooks[0]].sibling(orderbooks[0])}", None,
                     f"no such file in the zip (the message file of {orderbooks[0]})")
        raise at(str(path), None, f"no LOBSTER message file ({NAMING_HINT}) in the zip")
    message = messages[_pick([named[m] for m in messages], str(path), levels)]
    orderbook = named[message].sibling(message)
    if orderbook not in named:
        raise at(f"{path.name}:{orderbook}", None, f"no such file in the zip (the orderbook file of {message})")
    return Pair(path, message, orderbook, named[message])


def _in_directory(path: Path, levels: int | None) -> Pair:
    files = sorted(p for p in path.iterdir() if p.is_file())
    messages = [p for p in files if (n := parse_name(p.name)) and n.kind == MESSAGE]
    if messages:
        return _csv_pair(messages[_pick([parse_name(p.name) for p in messages], str(path), levels)])
    orderbooks = [p for p in files if (n := parse_name(p.name)) and n.kind == ORDERBOOK]
    if orderbooks:
        return _csv_pair(orderbooks[0])  # names the missing message file
    zips = [p for p in files if p.suffix.lower() == ".zip"]
    if len(zips) == 1:
        return _in_zip(zips[0], levels)
    raise at(str(path), None, f"no LOBSTER pair ({NAMING_HINT} and its orderbook file, or one .zip) "
                              f"in the directory")
