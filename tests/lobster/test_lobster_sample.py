"""The sample cut (make_sample) and the statistics behind ``alpharl data info``."""
import zipfile

import numpy as np

from alpharl.lobster.format import EV_CANCEL, EV_DELETE, EV_EXEC, EV_NEW
from alpharl.lobster.load import load_lobster
from alpharl.lobster.make_sample import cut
from alpharl.lobster.sample import load_embedded
from alpharl.lobster.stats import clock, describe, unknown_order_fraction


def test_cut_keeps_the_first_rows_under_lobster_naming(small_pair, tmp_path):
    source = small_pair.zip(tmp_path / "source.zip")
    out = cut(source, tmp_path / "out", rows=12, name="cut.zip")
    with zipfile.ZipFile(out) as zf:
        names = sorted(zf.namelist())
    end_ms = int(np.ceil(float(small_pair.msg[11][0]) * 1000))
    assert names == [f"AMZN_2012-06-21_34200000_{end_ms}_message_5.csv",
                     f"AMZN_2012-06-21_34200000_{end_ms}_orderbook_5.csv"]
    md, full = load_lobster(out, cache=False), load_lobster(source, cache=False)
    assert md.n_events == 12 and np.array_equal(md.book, full.book[:12]) and np.array_equal(md.time, full.time[:12])
    again = cut(source, tmp_path, rows=12, name="again.zip")
    assert again.read_bytes() == out.read_bytes()  # same source and N, same zip


def test_clock():
    assert clock(34200.017459617) == "09:30:00.017"
    assert clock(57599.9996) == "16:00:00.000"
    assert clock(0.0) == "00:00:00.000"


def test_unknown_order_fraction_matches_a_row_by_row_replay():
    md = load_embedded(cache=False)
    submitted, unknown, referring = set(), 0, 0
    for kind, oid in zip(md.event_type.tolist(), md.order_id.tolist()):
        if kind == EV_NEW:
            submitted.add(oid)
        elif kind in (EV_CANCEL, EV_DELETE, EV_EXEC):
            referring += 1
            unknown += oid not in submitted
    assert abs(unknown_order_fraction(md) - unknown / referring) < 1e-12


def test_describe_spread_and_depth_by_hand(small_pair, tmp_path):
    md = load_lobster(small_pair.write(tmp_path), cache=False)
    d = describe(md)
    spread = (md.book[:, 0] - md.book[:, 2]) / 100
    assert d["spread_ticks"]["mean"] == spread.mean() and d["spread_ticks"]["max"] == spread.max()
    assert d["depth"]["bid_level1_mean"] == md.book[:, 3].mean()
    assert d["depth"]["ask_all_levels_mean"] == md.book[:, 1::4].sum(axis=1).mean()
    assert d["events"] == len(small_pair.msg) and d["tick_dollars"] == 0.01
