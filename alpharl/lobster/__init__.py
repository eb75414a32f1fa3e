"""LOBSTER data: loading, validation and the Arrow cache of real NASDAQ order-book replays.

    from alpharl.lobster.load import load_lobster
    from alpharl.lobster.sample import load_embedded
    md = load_lobster("LOBSTER_SampleFile_AMZN_2012-06-21_5.zip")   # or load_embedded()
    md.book[i]          # the L-level book after message i (LOBSTER column order)
    md.window(a, b)     # rows a:b

Import from the defining module (load, market, sample, validate, errors); this
package imports nothing, so a kernel can import the leaf
:mod:`alpharl.lobster.format` (the file format facts) without pyarrow.
"""
