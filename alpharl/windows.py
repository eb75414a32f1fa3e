"""Windows of an event stream: ``A:B``, fractions of a file's events, and the rows they name.

A window ``A:B`` (0 <= A < B <= 1) of a file of n events is the rows
``[round(A n), round(B n))``: every window of every command resolves through
``rows`` so that training and evaluation agree on which rows a fraction names
(two windows that share no fraction share no row). Training reads the rows of
its ``train_window``; evaluation's default is the *held-out complement*
(``held_out``): the larger of the two parts of the stream outside the training
window, the later one on a tie (a forward test), so the default ``0:0.8``
evaluates on ``0.8:1`` and ``0.2:1`` on ``0:0.2``. A training window of the
whole stream leaves no complement.
"""
from __future__ import annotations

import math

#: The training window of a run unless told otherwise: the first 80 % of each file.
DEFAULT_TRAIN_WINDOW = "0:0.8"


class WindowError(ValueError):
    """A window that is not ``A:B`` with 0 <= A < B <= 1 (one line naming the option)."""


def parse_window(text: str, option: str = "--train-window") -> tuple[float, float]:
    """(A, B) of ``"A:B"``; WindowError naming ``option`` unless 0 <= A < B <= 1 (finite numbers)."""
    parts = str(text).split(":")
    try:
        if len(parts) != 2:
            raise ValueError
        a, b = float(parts[0]), float(parts[1])
    except ValueError:
        raise WindowError(f"{option} {text!r}: expected A:B, two fractions of the event stream "
                          f"(e.g. {DEFAULT_TRAIN_WINDOW})") from None
    if not (math.isfinite(a) and math.isfinite(b) and 0.0 <= a < b <= 1.0):
        raise WindowError(f"{option} {text}: need 0 <= A < B <= 1")
    return a, b


def format_window(window: tuple[float, float]) -> str:
    """``"A:B"`` with the shortest exact spelling of each fraction (``0:0.8``)."""
    return ":".join(f"{x:g}" if float(f"{x:g}") == x else repr(x) for x in window)


def rows(n: int, window: tuple[float, float]) -> tuple[int, int]:
    """The rows [first, stop) of a file of ``n`` events that ``window`` names."""
    a, b = window
    return int(round(a * n)), int(round(b * n))


def overlap(x: tuple[int, int] | None, y: tuple[int, int] | None) -> bool:
    """Whether two row ranges [first, stop) share a row (None: no rows)."""
    if x is None or y is None:
        return False
    return max(x[0], y[0]) < min(x[1], y[1])


def held_out(train: tuple[float, float]) -> tuple[float, float] | None:
    """The default evaluation window of a file trained on ``train``: the larger part of the stream
    outside it, the later part on a tie; None when training took the whole stream."""
    a, b = train
    after, before = 1.0 - b, a
    if after <= 0.0 and before <= 0.0:
        return None
    return (b, 1.0) if after >= before else (0.0, a)
