"""The one error type of LOBSTER loading: a single line naming the file and row."""
from __future__ import annotations


class LobsterFormatError(ValueError):
    """A LOBSTER input that cannot be used, as ONE line naming the file, the
    1-based row and (when relevant) the column, e.g.
    ``AMZN_..._orderbook_5.csv row 1234: book crossed (bid 2231500 >= ask 2231400)``.
    Missing or empty files name the path alone.
    """

    def __init__(self, message: str):
        # Whatever the cause (an Arrow message may span lines), the report is one line.
        super().__init__(" ".join(str(message).split()))


def at(file: str, row: int | None, what: str, column: str | None = None) -> LobsterFormatError:
    """The error for ``file`` at 1-based ``row`` (None: the whole file) and ``column``."""
    where = file if row is None else f"{file} row {row}"
    if column is not None:
        where += f" column {column}"
    return LobsterFormatError(f"{where}: {what}")
