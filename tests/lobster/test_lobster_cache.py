"""The Arrow cache: created once, reused while the source is unchanged, rebuilt when stale or corrupt."""
import os
import shutil

import numpy as np
import pytest

import alpharl.lobster.load as load_module
from alpharl.lobster import cache as lobster_cache
from alpharl.lobster.errors import LobsterFormatError
from alpharl.lobster.load import load_lobster
from alpharl.lobster.sample import embedded_sample_path
from alpharl.lobster.market import FIELD_DTYPES
from alpharl.lobster.sample import embedded_sample_path


@pytest.fixture
def parses(monkeypatch):
    """Counts how often the CSV text is parsed (a cache hit parses nothing)."""
    calls = []
    real = load_module.parse_pair

    def counting(pair):
        calls.append(pair)
        return real(pair)

    monkeypatch.setattr(load_module, "parse_pair", counting)
    return calls


@pytest.fixture
def sample_zip(tmp_path):
    return shutil.copy(embedded_sample_path(), tmp_path / "AMZN_sample.zip")


def same_arrays(a, b):
    return all(np.array_equal(getattr(a, f), getattr(b, f)) for f in FIELD_DTYPES) and a.tick == b.tick


def test_cache_is_written_beside_the_source_and_reused(sample_zip, parses):
    first = load_lobster(sample_zip)
    cached = sample_zip.with_name(sample_zip.name + lobster_cache.SUFFIX)
    assert cached.is_file() and len(parses) == 1
    stamp = cached.stat().st_mtime_ns
    second = load_lobster(sample_zip)
    assert len(parses) == 1, "second load parsed the CSVs instead of reading the cache"
    assert cached.stat().st_mtime_ns == stamp
    assert same_arrays(first, second) and second.source == str(sample_zip.resolve())


def test_changed_source_rebuilds_the_cache(small_pair, tmp_path, parses):
    message = small_pair.write(tmp_path)
    assert load_lobster(message).n_events == len(small_pair.msg)
    small_pair.msg.pop()
    small_pair.book.pop()
    small_pair.write(tmp_path)
    assert load_lobster(message).n_events == len(small_pair.msg)
    assert len(parses) == 2
    assert load_lobster(message).n_events == len(small_pair.msg) and len(parses) == 2


@pytest.mark.parametrize("damage", ["garbage", "truncated", "flipped byte"])
def test_corrupt_cache_is_rebuilt(sample_zip, parses, damage):
    reference = load_lobster(sample_zip)
    cached = sample_zip.with_name(sample_zip.name + lobster_cache.SUFFIX)
    data = bytearray(cached.read_bytes())
    if damage == "garbage":
        data = b"not an arrow file"
    elif damage == "truncated":
        data = data[: len(data) // 2]
    else:  # inside the arrays: the file still parses as Arrow, only the digest can tell
        data[len(data) // 2] ^= 0xFF
    cached.write_bytes(bytes(data))
    rebuilt = load_lobster(sample_zip)
    assert len(parses) == 2 and same_arrays(rebuilt, reference)
    assert load_lobster(sample_zip) is not None and len(parses) == 2  # the rewritten cache is good


def test_cache_of_another_format_version_is_rebuilt(sample_zip, parses, monkeypatch):
    load_lobster(sample_zip)
    monkeypatch.setattr(lobster_cache, "FORMAT_VERSION", lobster_cache.FORMAT_VERSION + 1)
    load_lobster(sample_zip)
    assert len(parses) == 2


def test_unwritable_folder_falls_back_to_the_user_cache(sample_zip, tmp_path, monkeypatch, parses):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    # A folder where the cache file should go makes that place unwritable, even for root.
    sample_zip.with_name(sample_zip.name + lobster_cache.SUFFIX).mkdir()
    load_lobster(sample_zip)
    in_user_cache = list((tmp_path / "xdg" / "alpharl").glob(f"{sample_zip.name}.*{lobster_cache.SUFFIX}"))
    assert len(in_user_cache) == 1
    load_lobster(sample_zip)
    assert len(parses) == 1


def test_cache_folder_option_and_no_cache(sample_zip, tmp_path, parses):
    folder = tmp_path / "cache_here"
    load_lobster(sample_zip, cache=folder)
    load_lobster(sample_zip, cache=folder)
    assert len(parses) == 1 and (folder / f"{sample_zip.name}{lobster_cache.SUFFIX}").is_file()
    load_lobster(sample_zip, cache=False)
    assert len(parses) == 2
    assert not sample_zip.with_name(sample_zip.name + lobster_cache.SUFFIX).exists()


def test_arrow_file_loads_directly_and_a_bad_one_is_an_error(sample_zip, tmp_path):
    reference = load_lobster(sample_zip)
    cached = sample_zip.with_name(sample_zip.name + lobster_cache.SUFFIX)
    direct = load_lobster(cached)
    assert same_arrays(direct, reference) and direct.ticker == "AMZN" and direct.levels == 5
    assert load_lobster(cached, levels=2).book.shape[1] == 8
    bad = tmp_path / "bad.arrow"
    bad.write_bytes(b"nope")
    with pytest.raises(LobsterFormatError, match="bad.arrow: not a valid alpharl LOBSTER cache"):
        load_lobster(bad)


def test_no_temporary_files_are_left(sample_zip):
    load_lobster(sample_zip)
    assert sorted(p.name for p in sample_zip.parent.iterdir()) == sorted(
        [sample_zip.name, sample_zip.name + lobster_cache.SUFFIX])


def test_cache_file_is_readable_by_others(sample_zip):
    load_lobster(sample_zip)
    mode = os.stat(sample_zip.with_name(sample_zip.name + lobster_cache.SUFFIX)).st_mode
    assert mode & 0o044 == 0o044
