"""LOBSTER data: loading, validation and the Arrow cache of real NASDAQ order-book replays.

    md = load_lobster("LOBSTER_SampleFile_AMZN_2012-06-21_5.zip")   # or load_embedded()
    md.book[i]          # the L-level book after message i (LOBSTER column order)
    md.window(a, b)     # rows a:b

File format facts live in alpharl.lobster.format.
"""
from alpharl.lobster.errors import LobsterFormatError
from alpharl.lobster.load import load_lobster
from alpharl.lobster.market import MarketData
from alpharl.lobster.sample import embedded_sample_path, load_embedded
from alpharl.lobster.validate import infer_tick, validate_arrays

__all__ = ["MarketData", "LobsterFormatError", "load_lobster", "embedded_sample_path", "load_embedded",
           "validate_arrays", "infer_tick"]
