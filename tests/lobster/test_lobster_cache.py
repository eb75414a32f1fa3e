"""The Arrow cache: in the user cache directory (never beside the data), created once, reused while the
source is unchanged, rebuilt when stale or corrupt, compressed, capped, and cleared on request."""
import os
import shutil

import numpy as np
import pytest

import alpharl.lobster.load as load_module
from alpharl.lobster import cache as lobster_cache
from alpharl.lobster.errors import LobsterFormatError
from alpharl.lobster.load import load_lobster
from alpharl.lobster.market import FIELD_DTYPES
from alpharl.lobster.sample import embedded_sample_path


@pytest.fixture(autouse=True)
def cache_dir(tmp_path, monkeypatch):
    folder = tmp_path / "user-cache"
    monkeypatch.setenv(lobster_cache.CACHE_DIR_ENV, str(folder))
    monkeypatch.delenv(lobster_cache.MAX_MB_ENV, raising=False)
    return folder


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
    (tmp_path / "data").mkdir()
    return shutil.copy(embedded_sample_path(), tmp_path / "data" / "AMZN_sample.zip")


def same_arrays(a, b):
    return all(np.array_equal(getattr(a, f), getattr(b, f)) for f in FIELD_DTYPES) and a.tick == b.tick


def the_entry(cache_dir):
    found = lobster_cache.entries(cache_dir)
    assert len(found) == 1, found
    return found[0]


def test_cache_goes_to_the_cache_dir_never_beside_the_data_and_is_reused(sample_zip, cache_dir, parses):
    first = load_lobster(sample_zip)
    assert sorted(p.name for p in sample_zip.parent.iterdir()) == [sample_zip.name]   # nothing written there
    cached = the_entry(cache_dir)
    assert cached.name.startswith(sample_zip.name + ".") and len(parses) == 1
    second = load_lobster(sample_zip)
    assert len(parses) == 1, "second load parsed the CSVs instead of reading the cache"
    assert same_arrays(first, second) and second.source == str(sample_zip.resolve())


def test_the_same_content_elsewhere_is_one_entry(sample_zip, tmp_path, cache_dir, parses):
    load_lobster(sample_zip)
    (tmp_path / "copy").mkdir()
    load_lobster(shutil.copy(sample_zip, tmp_path / "copy" / sample_zip.name))
    assert len(parses) == 1 and the_entry(cache_dir)


def test_cache_dir_defaults(monkeypatch, tmp_path):
    monkeypatch.delenv(lobster_cache.CACHE_DIR_ENV)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert lobster_cache.cache_dir() == tmp_path / "xdg" / "alpharl"
    monkeypatch.delenv("XDG_CACHE_HOME")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert lobster_cache.cache_dir() == tmp_path / "home" / ".cache" / "alpharl"


def test_entries_are_compressed(sample_zip, cache_dir):
    md = load_lobster(sample_zip)
    raw = sum(getattr(md, f).nbytes for f in FIELD_DTYPES)
    assert os.path.getsize(the_entry(cache_dir)) < raw / 4


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
def test_corrupt_cache_is_rebuilt(sample_zip, cache_dir, parses, damage):
    reference = load_lobster(sample_zip)
    cached = the_entry(cache_dir)
    data = bytearray(cached.read_bytes())
    if damage == "garbage":
        data = b"not an arrow file"
    elif damage == "truncated":
        data = data[: len(data) // 2]
    else:  # inside the arrays: the file may still parse as Arrow, only the digest can tell
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


def test_unwritable_cache_dir_still_loads(sample_zip, cache_dir, parses):
    cache_dir.write_text("a file where the folder should be")   # not writable, even for root
    assert load_lobster(sample_zip).n_events > 0
    assert sorted(p.name for p in sample_zip.parent.iterdir()) == [sample_zip.name]


def test_cache_folder_option_and_no_cache(sample_zip, tmp_path, cache_dir, parses):
    folder = tmp_path / "cache_here"
    load_lobster(sample_zip, cache=folder)
    load_lobster(sample_zip, cache=folder)
    assert len(parses) == 1 and the_entry(folder)
    load_lobster(sample_zip, cache=False)
    assert len(parses) == 2 and lobster_cache.entries(cache_dir) == []


def test_size_cap_evicts_the_least_recently_used(sample_zip, tmp_path, cache_dir, small_pair, monkeypatch):
    load_lobster(sample_zip)
    big = the_entry(cache_dir)
    os.utime(big, (1, 1))                                        # long unused
    monkeypatch.setenv(lobster_cache.MAX_MB_ENV, str(os.path.getsize(big) / 1e6))   # room for about one
    load_lobster(small_pair.write(tmp_path))
    names = [p.name for p in lobster_cache.entries(cache_dir)]
    assert len(names) == 1 and not names[0].startswith(sample_zip.name)


def test_clear_and_usage(sample_zip, cache_dir):
    load_lobster(sample_zip)
    info = lobster_cache.usage()
    assert info["dir"] == str(cache_dir) and info["entries"] == 1 and info["bytes"] > 0
    assert lobster_cache.clear() == info["bytes"]
    assert lobster_cache.usage()["entries"] == 0


def test_arrow_file_loads_directly_and_a_bad_one_is_an_error(sample_zip, tmp_path, cache_dir):
    reference = load_lobster(sample_zip)
    direct = load_lobster(the_entry(cache_dir))
    assert same_arrays(direct, reference) and direct.ticker == "AMZN" and direct.levels == 5
    assert load_lobster(the_entry(cache_dir), levels=2).book.shape[1] == 8
    bad = tmp_path / "bad.arrow"
    bad.write_bytes(b"nope")
    with pytest.raises(LobsterFormatError, match="bad.arrow: not a valid alpharl LOBSTER cache"):
        load_lobster(bad)


def test_no_temporary_files_are_left(sample_zip, cache_dir):
    load_lobster(sample_zip)
    assert [p.name for p in cache_dir.iterdir()] == [the_entry(cache_dir).name]


def test_cache_file_is_readable_by_others(sample_zip, cache_dir):
    load_lobster(sample_zip)
    assert os.stat(the_entry(cache_dir)).st_mode & 0o044 == 0o044
