"""Loading real LOBSTER data: every source form, identical arrays, MarketData helpers."""
import shutil
import zipfile

import numpy as np
import pytest

from alpharl.lobster.errors import LobsterFormatError
from alpharl.lobster.format import ASK_PAD_PRICE, BID_PAD_PRICE, EV_DELETE, EV_HALT
from alpharl.lobster.load import load_lobster
from alpharl.lobster.market import FIELD_DTYPES, MarketData
from alpharl.lobster.sample import embedded_sample_path, load_embedded
from alpharl.lobster.stats import unknown_order_fraction
from alpharl.lobster.validate import infer_tick, validate_arrays
from support import AMZN1, AMZN5, REAL_SAMPLES, real_sample


def assert_same(a: MarketData, b: MarketData):
    assert (a.ticker, a.date, a.levels, a.tick) == (b.ticker, b.date, b.levels, b.tick)
    for name in FIELD_DTYPES:
        x, y = getattr(a, name), getattr(b, name)
        assert x.dtype == y.dtype and np.array_equal(x, y), name


@pytest.mark.parametrize("name", REAL_SAMPLES, ids=[name[19:-4] for name in REAL_SAMPLES])
def test_real_zips_load_with_documented_row_counts(name):
    """The whole sample (or its cut in the repository) has the documented rows and levels."""
    path, rows = real_sample(name)
    levels = REAL_SAMPLES[name][0]
    md = load_lobster(path, cache=False)
    assert md.n_events == rows and md.levels == levels
    assert md.ticker == name.split("_")[2] and md.date == "2012-06-21"
    assert md.tick == 100  # $0.01
    assert md.book.shape == (rows, 4 * levels) and md.book.flags.c_contiguous
    for field, dtype in FIELD_DTYPES.items():
        assert getattr(md, field).dtype == dtype, field
    assert (np.diff(md.time) >= 0).all() and (md.best_bid() < md.best_ask()).all()
    assert md.source.endswith(path.name)


def test_zip_csv_pair_and_directory_give_identical_arrays(tmp_path):
    source, _ = real_sample(AMZN1)
    with zipfile.ZipFile(source) as zf:
        zf.extractall(tmp_path)
    from_zip = load_lobster(source, cache=False)
    message = next(tmp_path.glob("*_message_1.csv"))
    orderbook = next(tmp_path.glob("*_orderbook_1.csv"))
    for path in (message, orderbook, tmp_path):
        assert_same(load_lobster(path, cache=False), from_zip)


def test_embedded_sample_is_the_first_30000_events_of_amzn_level_5():
    """Against the whole file when it is beside the repository, else against its cut (first events)."""
    assert embedded_sample_path().is_file()
    sample = load_embedded(cache=False)
    assert (sample.ticker, sample.levels, sample.n_events) == ("AMZN", 5, 30_000)
    path, rows = real_sample(AMZN5)
    n = min(rows, sample.n_events)
    assert_same(sample.window(0, n), load_lobster(path, cache=False).window(0, n))


def test_marketdata_helpers(small_pair, tmp_path):
    md = load_lobster(small_pair.write(tmp_path), cache=False)
    ask, bid = md.best_ask(), md.best_bid()
    assert ask.dtype == np.int64 and np.array_equal(ask, md.book[:, 0]) and np.array_equal(bid, md.book[:, 2])
    assert np.allclose(md.mid(), (ask + bid) / 2.0)
    w = md.window(5, 12)
    assert w.n_events == 7 and np.array_equal(w.book, md.book[5:12]) and w.time[0] == md.time[5]
    assert w.levels == md.levels and w.tick == md.tick
    with pytest.raises(ValueError):
        md.time[0] = 0.0  # shared read-only stream
    top2 = md.with_levels(2)
    assert top2.book.shape == (md.n_events, 8) and np.array_equal(top2.book, md.book[:, :8])


def test_mid_is_nan_where_a_side_is_empty(small_pair, tmp_path):
    # Empty the bid side on row 3: every bid level padded.
    row = small_pair.book[2]
    for level in range(small_pair.levels):
        row[4 * level + 2], row[4 * level + 3] = str(BID_PAD_PRICE), "0"
    md = load_lobster(small_pair.write(tmp_path), cache=False)
    mid = md.mid()
    assert np.isnan(mid[2]) and np.isfinite(np.delete(mid, 2)).all()
    assert md.best_bid()[2] == BID_PAD_PRICE and md.best_ask()[2] != ASK_PAD_PRICE


def test_levels_option_truncates_the_book_and_rejects_more_than_the_file(small_pair, tmp_path):
    path = small_pair.write(tmp_path)
    full, top1 = load_lobster(path, cache=False), load_lobster(path, levels=1, cache=False)
    assert top1.levels == 1 and np.array_equal(top1.book, full.book[:, :4])
    with pytest.raises(LobsterFormatError, match="levels=6: the file has 5 levels"):
        load_lobster(path, levels=6, cache=False)


def test_unknown_order_ids_are_accepted(small_pair, tmp_path):
    # A deletion of an order never submitted in the file (placed before 09:30 or deeper than L).
    row = small_pair.msg[10]
    row[1], row[2] = str(EV_DELETE), "999999999"
    md = load_lobster(small_pair.write(tmp_path), cache=False)
    assert md.order_id[10] == 999999999
    assert unknown_order_fraction(md) > 0


def test_halt_messages_are_accepted(small_pair, tmp_path):
    # LOBSTER writes a halt as type 7, price -1, direction -1, other fields 0, the book row repeated.
    small_pair.msg[20][1:] = [str(EV_HALT), "0", "0", "-1", "-1"]
    small_pair.book[20] = list(small_pair.book[19])
    md = load_lobster(small_pair.write(tmp_path), cache=False)
    assert md.event_type[20] == EV_HALT and md.price[20] == -1


def test_zip_with_two_pairs_needs_the_level_count(small_pair, tmp_path):
    archive = tmp_path / "two.zip"
    small_pair.zip(archive)
    one_level = type(small_pair)([list(r) for r in small_pair.msg], [r[:4] for r in small_pair.book], levels=1)
    with zipfile.ZipFile(archive, "a") as zf:
        zf.writestr(one_level.message_name, "".join(",".join(r) + "\n" for r in one_level.msg))
        zf.writestr(one_level.orderbook_name, "".join(",".join(r) + "\n" for r in one_level.book))
    with pytest.raises(LobsterFormatError, match="holds 2 LOBSTER pairs"):
        load_lobster(archive, cache=False)
    assert load_lobster(archive, levels=1, cache=False).levels == 1
    assert load_lobster(archive, levels=5, cache=False).levels == 5


def test_directory_with_one_zip(small_pair, tmp_path):
    small_pair.zip(tmp_path / "pair.zip")
    assert load_lobster(tmp_path, cache=False).n_events == len(small_pair.msg)


def test_copy_of_sample_reads_through_the_zip_path(tmp_path):
    copy = shutil.copy(embedded_sample_path(), tmp_path / "copy.zip")
    assert load_lobster(copy, cache=False).n_events == 30_000


def test_marketdata_by_hand_casts_dtypes_and_leaves_caller_arrays_writable(rng):
    n, levels = 6, 2
    ask = 1_000_000 + 100 * rng.integers(1, 50, size=n)
    book = np.stack([ask, rng.integers(1, 9, n), ask - 300, rng.integers(1, 9, n),
                     ask + 200, rng.integers(1, 9, n), ask - 500, rng.integers(1, 9, n)], axis=1)
    time = np.sort(rng.uniform(34200, 34300, n))
    md = MarketData("TEST", "2020-01-02", levels, time, np.ones(n), np.arange(1, n + 1), np.full(n, 5),
                    ask - 100, np.ones(n), book, tick=100, source="synthetic")
    assert md.event_type.dtype == np.int8 and md.size.dtype == np.int32 and md.book.dtype == np.int64
    time[0] = 1.0  # the caller's array stays writable; md holds its own read-only view
    assert not md.book.flags.writeable
    validate_arrays(md.time, md.event_type, md.order_id, md.size, md.price, md.direction, md.book, levels)
    assert infer_tick(md.book) == 100
