"""A corpus of bad LOBSTER inputs, generated from the embedded sample: each one
either loads (where LOBSTER's format allows it) or ends in one line
``alpharl: error: ...`` naming the file (and row) and what is wrong, exit code 2,
no traceback.

Every case is loaded in-process; a representative subset also runs
``alpharl data info`` in a subprocess, which is where a traceback or an abort
at exit would show.
"""
from __future__ import annotations

import subprocess
import sys
import zipfile
from pathlib import Path

import numpy as np
import pytest

from alpharl.lobster.errors import LobsterFormatError
from alpharl.lobster.load import load_lobster
from alpharl.lobster.sample import embedded_sample_path

ROWS = 3000
BASE = "AMZN_2012-06-21_34200000_37746842"
MSG, BOOK = f"{BASE}_message_5.csv", f"{BASE}_orderbook_5.csv"


def _sample_lines() -> tuple[list[str], list[str]]:
    with zipfile.ZipFile(embedded_sample_path()) as zf:
        texts = [zf.read(name).decode() for name in (MSG, BOOK)]
    return tuple(text.splitlines()[:ROWS] for text in texts)


_MSG_LINES, _BOOK_LINES = _sample_lines()


def _text(lines: list[str], eol: str = "\n") -> bytes:
    return "".join(line + eol for line in lines).encode()


def _zip(path: Path, members: dict[str, bytes], compression=zipfile.ZIP_DEFLATED) -> Path:
    with zipfile.ZipFile(path, "w", compression) as zf:
        for name, data in members.items():
            zf.writestr(name, data)
    return path


def _edit(lines: list[str], row: int, col: int, value) -> list[str]:
    """``lines`` with cell (0-based ``row``, ``col``) set to ``value`` (a function of the old cell, or text)."""
    out = list(lines)
    cells = out[row].split(",")
    cells[col] = str(value(cells[col]) if callable(value) else value)
    out[row] = ",".join(cells)
    return out


def _pair(path: Path, msg=None, book=None, **kw) -> Path:
    """A zip of the sample's first ROWS rows, with either file's bytes replaced."""
    return _zip(path, {MSG: _text(_MSG_LINES) if msg is None else msg,
                       BOOK: _text(_BOOK_LINES) if book is None else book}, **kw)


def _damage_member(archive: Path, member: str) -> Path:
    """Flip bytes in the middle of ``member``'s stored data (the zip's directory stays intact)."""
    data = bytearray(archive.read_bytes())
    with zipfile.ZipFile(archive) as zf:
        info = zf.getinfo(member)
    start = info.header_offset + 30 + len(info.filename.encode()) + len(info.extra)
    middle = start + info.compress_size // 2
    data[middle:middle + 8] = bytes(b ^ 0xFF for b in data[middle:middle + 8])
    archive.write_bytes(bytes(data))
    return archive


def _halts() -> tuple[bytes, bytes]:
    """Halt, resume quoting and resume trading after row 100, each with the book repeated (the ReadMe's form)."""
    t = _MSG_LINES[100].split(",")[0]
    msg = _MSG_LINES[:101] + [f"{t},7,0,0,{p},-1" for p in (-1, 0, 1)] + _MSG_LINES[101:]
    book = _BOOK_LINES[:101] + [_BOOK_LINES[100]] * 3 + _BOOK_LINES[101:]
    return _text(msg), _text(book)


def _first_row(lines: list[str], event_type: int) -> int:
    return next(i for i, line in enumerate(lines) if line.split(",")[1] == str(event_type))


def _crossed() -> bytes:
    ask = _BOOK_LINES[500].split(",")[0]
    return _text(_edit(_BOOK_LINES, 500, 2, ask))  # bid1 = ask1: locked, i.e. not bid < ask


#: Inputs the format allows: name -> builder(tmp_path) -> path.
LOADS = {
    "clean": lambda d: _pair(d / "p.zip"),
    "CRLF line ends": lambda d: _pair(d / "p.zip", _text(_MSG_LINES, "\r\n"), _text(_BOOK_LINES, "\r\n")),
    "trailing blank lines": lambda d: _pair(d / "p.zip", _text(_MSG_LINES) + b"\n\n", _text(_BOOK_LINES) + b"\n"),
    "no final newline": lambda d: _pair(d / "p.zip", _text(_MSG_LINES)[:-1], _text(_BOOK_LINES)[:-1]),
    "stored members": lambda d: _pair(d / "p.zip", compression=zipfile.ZIP_STORED),
    "type 7 halts": lambda d: _pair(d / "p.zip", *_halts()),
    # Hidden executions may print between ticks (midpoint-pegged orders): not a grid error.
    "hidden execution between ticks": lambda d: _pair(d / "p.zip", _text(_edit(
        _MSG_LINES, _first_row(_MSG_LINES, 5), 4, lambda c: int(c) + 50))),
    "equal times": lambda d: _pair(d / "p.zip", _text(_edit(_MSG_LINES, 10, 0, _MSG_LINES[9].split(",")[0]))),
    "CSV pair in a folder": lambda d: _csv_pair(d),
    # Not LOBSTER's own output, but Arrow's reader skips a UTF-8 byte order mark: the rows are the same.
    "byte order mark": lambda d: _pair(d / "p.zip", b"\xef\xbb\xbf" + _text(_MSG_LINES)),
}


def _csv_pair(folder: Path) -> Path:
    (folder / MSG).write_bytes(_text(_MSG_LINES))
    (folder / BOOK).write_bytes(_text(_BOOK_LINES))
    return folder / MSG


#: Bad inputs: name -> (builder, words the one-line error must hold).
FAILS = {
    "truncated zip": (lambda d: _truncated(_pair(d / "p.zip")), ["p.zip", "not a readable zip archive"]),
    "zero-byte zip": (lambda d: _write(d / "p.zip", b""), ["p.zip", "not a readable zip archive"]),
    "CRC damage, stored member": (lambda d: _damage_member(_pair(d / "p.zip", compression=zipfile.ZIP_STORED), MSG),
                                  [f"p.zip:{MSG}", "damaged zip archive", "CRC"]),
    "damage, deflated member": (lambda d: _damage_member(_pair(d / "p.zip"), BOOK),
                                [f"p.zip:{BOOK}", "damaged zip archive"]),
    "missing orderbook member": (lambda d: _zip(d / "p.zip", {MSG: _text(_MSG_LINES)}),
                                 [f"p.zip:{BOOK}", "no such file in the zip"]),
    "missing message member": (lambda d: _zip(d / "p.zip", {BOOK: _text(_BOOK_LINES)}),
                               [f"p.zip:{MSG}", "no such file in the zip"]),
    "empty zip": (lambda d: _zip(d / "p.zip", {}), ["p.zip", "no LOBSTER message file"]),
    "message cut mid-row": (lambda d: _pair(d / "p.zip", _text(_MSG_LINES)[:-9]),
                            [MSG, f"row {ROWS}", "columns, expected 6"]),
    "orderbook rows cut from the middle": (lambda d: _pair(d / "p.zip", book=_text(
        _BOOK_LINES[:1000] + _BOOK_LINES[2000:])), [BOOK, f"row {ROWS - 999}", "missing"]),
    "book price off the tick grid": (lambda d: _pair(d / "p.zip", book=_text(_edit(
        _BOOK_LINES, 700, 0, lambda c: int(c) + 37))), [BOOK, "row 701", "AskPrice1", "not on the $0.01 tick grid"]),
    "new order price off the tick grid": (lambda d: _pair(d / "p.zip", _text(_edit(
        _MSG_LINES, _first_row(_MSG_LINES, 1), 4, lambda c: int(c) + 37))),
        [MSG, "row 2 ", "type 1 event", "not on the $0.01 tick grid"]),
    "type 9 event": (lambda d: _pair(d / "p.zip", _text(_edit(_MSG_LINES, 300, 1, 9))),
                     [MSG, "row 301", "unknown event type 9"]),
    "time going backwards": (lambda d: _pair(d / "p.zip", _text(_edit(_MSG_LINES, 400, 0, "34000.5"))),
                             [MSG, "row 401", "before the previous row's"]),
    "crossed book": (lambda d: _pair(d / "p.zip", book=_crossed()), [BOOK, "row 501", "book crossed"]),
    "NaN time": (lambda d: _pair(d / "p.zip", _text(_edit(_MSG_LINES, 20, 0, "NaN"))), [MSG, "row 21", "time nan"]),
    "NaN price": (lambda d: _pair(d / "p.zip", _text(_edit(_MSG_LINES, 20, 4, "NaN"))),
                  [MSG, "row 21", "'NaN' is not an integer"]),
    "extra message column": (lambda d: _pair(d / "p.zip", _text([line + ",0" for line in _MSG_LINES])),
                             [MSG, "row 1", "7 columns, expected 6"]),
    "book row missing a column": (lambda d: _pair(d / "p.zip", book=_text(_edit(_BOOK_LINES, 900, 19, "")[:900] + [
        _BOOK_LINES[900].rsplit(",", 1)[0]] + _BOOK_LINES[901:])), [BOOK, "row 901", "19 columns, expected 20"]),
    "level mismatch": (lambda d: _pair(d / "p.zip", book=_text([",".join(line.split(",")[:16])
                                                                 for line in _BOOK_LINES])),
                       [BOOK, "16 columns, expected 20 (5 levels in the file name)"]),
    "header row": (lambda d: _pair(d / "p.zip", b"time,type,order_id,size,price,direction\n" + _text(_MSG_LINES)),
                   [MSG, "row 1", "is not a number"]),
    "blank line inside": (lambda d: _pair(d / "p.zip", _text(_MSG_LINES[:50] + [""] + _MSG_LINES[50:])),
                          [MSG, "row 51", "empty line"]),
    "empty message file": (lambda d: _pair(d / "p.zip", b""), [MSG, "file is empty"]),
    "empty orderbook file": (lambda d: _pair(d / "p.zip", book=b"\n"), [BOOK, "file is empty"]),
}

#: The cases also run through ``alpharl data info`` in a subprocess.
SUBPROCESS = ("truncated zip", "CRC damage, stored member", "damage, deflated member",
              "orderbook rows cut from the middle", "book price off the tick grid", "crossed book", "type 9 event",
              "empty message file")


def _truncated(archive: Path) -> Path:
    data = archive.read_bytes()
    return _write(archive, data[:len(data) // 2])


def _write(path: Path, data: bytes) -> Path:
    path.write_bytes(data)
    return path


@pytest.mark.parametrize("case", list(LOADS))
def test_allowed_inputs_load(case, tmp_path):
    md = load_lobster(LOADS[case](tmp_path), cache=False)
    assert md.tick == 100 and md.levels == 5
    assert md.n_events == ROWS + (3 if case == "type 7 halts" else 0)
    if case != "type 7 halts":
        clean = load_lobster(_pair(tmp_path / "clean.zip"), cache=False)
        assert np.array_equal(md.book, clean.book) and np.array_equal(md.time[11:], clean.time[11:])


@pytest.mark.parametrize("case", list(FAILS))
def test_bad_inputs_are_one_line(case, tmp_path):
    build, words = FAILS[case]
    with pytest.raises(LobsterFormatError) as info:
        load_lobster(build(tmp_path), cache=False)
    message = str(info.value)
    assert "\n" not in message, message
    for word in words:
        assert word in message, (word, message)


@pytest.mark.parametrize("case", SUBPROCESS)
def test_data_info_says_one_line_and_exits_2(case, tmp_path):
    build, words = FAILS[case]
    path = build(tmp_path)
    r = subprocess.run([sys.executable, "-m", "alpharl.cli", "data", "info", str(path)], capture_output=True,
                       text=True, timeout=120, cwd=tmp_path)
    lines = r.stderr.splitlines()
    assert r.returncode == 2, r.stderr
    assert len(lines) == 1 and lines[0].startswith("alpharl: error: "), r.stderr
    assert "Traceback" not in r.stderr + r.stdout
    for word in words:
        assert word in lines[0], (word, lines[0])
    assert sorted(p.name for p in tmp_path.iterdir()) == [path.name]  # nothing written beside the data
