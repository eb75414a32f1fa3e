"""The embedded LOBSTER sample shipped in ``data/`` (package ``alpharl.data``)."""
from __future__ import annotations

from importlib import resources
from pathlib import Path

from alpharl.lobster.load import load_lobster
from alpharl.lobster.market import MarketData

#: The sample's file name (how it was cut: data/README.md and alpharl.lobster.make_sample).
SAMPLE_NAME = "AMZN_2012-06-21_5_sample.zip"


def embedded_sample_path() -> Path:
    """Path of the embedded sample zip, in an installed package or a source tree."""
    try:
        found = resources.files("alpharl.data") / SAMPLE_NAME
        if found.is_file():
            return Path(str(found))
    except (ModuleNotFoundError, TypeError):
        pass
    # A source tree without the package mapping: <root>/alpharl/lobster/sample.py -> <root>/data.
    path = Path(__file__).resolve().parents[2] / "data" / SAMPLE_NAME
    if not path.is_file():
        raise FileNotFoundError(f"embedded LOBSTER sample {SAMPLE_NAME} not found "
                                f"(looked in alpharl.data and {path.parent})")
    return path


def load_embedded(levels: int | None = None, cache: bool = True) -> MarketData:
    """The embedded sample as MarketData (see load_lobster for ``levels`` and ``cache``)."""
    return load_lobster(embedded_sample_path(), levels=levels, cache=cache)
