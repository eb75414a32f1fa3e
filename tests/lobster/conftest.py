"""Fixtures of the LOBSTER tests: small editable pairs (the real samples: support.real_sample)."""
from __future__ import annotations

import copy
import zipfile
from dataclasses import dataclass
from pathlib import Path

import pytest

from alpharl.lobster.sample import embedded_sample_path

SMALL_ROWS = 40
BASE = "AMZN_2012-06-21_34200000_57600000"


@dataclass
class SmallPair:
    """The first rows of the embedded sample as cells, to edit and write as a CSV pair."""

    msg: list[list[str]]
    book: list[list[str]]
    levels: int = 5

    @property
    def message_name(self) -> str:
        return f"{BASE}_message_{self.levels}.csv"

    @property
    def orderbook_name(self) -> str:
        return f"{BASE}_orderbook_{self.levels}.csv"

    def write(self, folder: Path, msg_text: str | None = None, book_text: str | None = None) -> Path:
        """Write both CSVs into ``folder`` (text overrides the cells); returns the message path."""
        folder.mkdir(parents=True, exist_ok=True)
        (folder / self.message_name).write_text(msg_text if msg_text is not None else _csv(self.msg))
        (folder / self.orderbook_name).write_text(book_text if book_text is not None else _csv(self.book))
        return folder / self.message_name

    def zip(self, path: Path, members: tuple[str, ...] = ("message", "orderbook")) -> Path:
        with zipfile.ZipFile(path, "w") as zf:
            if "message" in members:
                zf.writestr(self.message_name, _csv(self.msg))
            if "orderbook" in members:
                zf.writestr(self.orderbook_name, _csv(self.book))
        return path


def _csv(rows: list[list[str]]) -> str:
    return "".join(",".join(r) + "\n" for r in rows)


def _first_rows(rows: int) -> tuple[list[list[str]], list[list[str]]]:
    with zipfile.ZipFile(embedded_sample_path()) as zf:
        names = zf.namelist()
        texts = [zf.read(next(n for n in names if f"_{kind}_" in n)).decode() for kind in ("message", "orderbook")]
    return tuple([line.split(",") for line in text.splitlines()[:rows]] for text in texts)


_SMALL = _first_rows(SMALL_ROWS)


@pytest.fixture
def small_pair() -> SmallPair:
    """A fresh valid 5-level pair of SMALL_ROWS rows (real AMZN data) to corrupt."""
    return SmallPair(*copy.deepcopy(_SMALL))
