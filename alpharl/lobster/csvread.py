"""Headerless numeric CSV -> numpy columns, with errors that name the file and row.

pyarrow's CSV reader does the work (multithreaded, exact float parsing). Its
errors name neither the row nor (for a wrong column count) the column, so on
failure a second, pure-Python pass over the text finds the first bad row; that
pass runs only on bad input.

The text is handed to Arrow as a buffer Arrow owns (one copy), never as a
view of a Python object: Arrow's reader threads may drop their last
reference to the input a moment after read_csv returns, and releasing a
Python-owned buffer takes the GIL; when that happens while the interpreter
is finalizing (a one-line error exits at once) the thread is torn down
mid-destructor and the process aborts ("terminate called without an
active exception", exit 134).
"""
from __future__ import annotations

import re

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pcsv

from alpharl.lobster.errors import at

_INT = re.compile(r"[+-]?\d+")
_FLOAT = re.compile(r"[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?|[+-]?(nan|inf|infinity)", re.IGNORECASE)
_INT64_MAX = int(np.iinfo(np.int64).max)
# pyarrow names the failing column of a conversion error as "In CSV column #k" (0-based).
_ARROW_COLUMN = re.compile(r"CSV column #(\d+)")
_WHITESPACE = b" \t\r\n"


def read_columns(data: bytes, file: str, names: list[str], types: list[pa.DataType],
                 width_note: str = "") -> list[np.ndarray]:
    """Parse ``data`` (a headerless CSV with one column per name) into numpy arrays.

    ``types`` holds pa.float64() or pa.int64() per column. Raises
    LobsterFormatError naming ``file`` and the first bad row for: an empty file,
    a wrong column count, an empty line or field, a non-numeric cell.
    ``width_note`` explains the expected column count in that error.
    """
    view = memoryview(data)
    end = len(view)
    while end and view[end - 1] in _WHITESPACE:  # a trailing newline (or several) is not a row
        end -= 1
    if end == 0:
        raise at(file, None, "file is empty")
    view = view[:end]
    _check_first_row_width(view, file, len(names), width_note)
    try:
        table = pcsv.read_csv(
            _arrow_owned(view),
            read_options=pcsv.ReadOptions(column_names=names),
            # Keep empty lines as all-null rows so row numbers stay file line numbers.
            parse_options=pcsv.ParseOptions(ignore_empty_lines=False),
            convert_options=pcsv.ConvertOptions(column_types=dict(zip(names, types)), null_values=[""],
                                                strings_can_be_null=False, quoted_strings_can_be_null=False),
        )
    except pa.ArrowInvalid as exc:
        _locate_bad_row(view, file, names, types, str(exc))
        raise at(file, None, f"unreadable CSV: {exc}") from None
    _check_nulls(table, file, names)
    return [table.column(i).to_numpy() for i in range(len(names))]


def _arrow_owned(view: memoryview) -> pa.Buffer:
    """A copy of ``view`` in memory Arrow allocated: freeing it needs no GIL (module docstring)."""
    sink = pa.BufferOutputStream()
    sink.write(view)
    return sink.getvalue()


def _check_first_row_width(view: memoryview, file: str, width: int, note: str) -> None:
    """A wrong column count on row 1 is usually the wrong level count: say so early."""
    head = bytes(view[:1 << 16])
    first = head.split(b"\n", 1)[0].rstrip(b"\r")
    got = first.count(b",") + 1
    if got != width:
        raise at(file, 1, f"{got} columns, expected {width}{note}")


def _check_nulls(table: pa.Table, file: str, names: list[str]) -> None:
    if not any(table.column(i).null_count for i in range(len(names))):
        return
    nulls = np.stack([pc.is_null(table.column(i)).to_numpy(zero_copy_only=False) for i in range(len(names))], axis=1)
    row = int(np.flatnonzero(nulls.any(axis=1))[0])
    if nulls[row].all():
        raise at(file, row + 1, "empty line")
    col = int(np.flatnonzero(nulls[row])[0])
    raise at(file, row + 1, "empty field", column=f"{col + 1} ({names[col]})")


def _locate_bad_row(view: memoryview, file: str, names: list[str], types: list[pa.DataType],
                    arrow_message: str) -> None:
    """Raise the error for the first row that is not ``len(names)`` numeric cells.

    Returns without raising when no such row is found (the caller then reports
    pyarrow's own message)."""
    lines = bytes(view).decode("latin-1").split("\n")
    width = len(names)
    for i, line in enumerate(lines):
        got = line.count(",") + 1
        if got != width:
            raise at(file, i + 1, "empty line" if not line.strip() else f"{got} columns, expected {width}")
    hint = _ARROW_COLUMN.search(arrow_message)
    columns = [int(hint.group(1))] if hint and int(hint.group(1)) < width else range(width)
    for i, line in enumerate(lines):
        cells = line.split(",")
        for j in columns:
            problem = _cell_problem(cells[j].strip(), types[j])
            if problem:
                raise at(file, i + 1, problem, column=f"{j + 1} ({names[j]})")


def _cell_problem(cell: str, dtype: pa.DataType) -> str | None:
    if not cell:
        return "empty field"
    if pa.types.is_integer(dtype):
        if not _INT.fullmatch(cell):
            return f"{cell[:40]!r} is not an integer"
        if abs(int(cell)) > _INT64_MAX:
            return f"{cell[:40]} is out of the 64-bit integer range"
        return None
    if not _FLOAT.fullmatch(cell):
        return f"{cell[:40]!r} is not a number"
    return None
