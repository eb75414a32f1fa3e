"""atomic_write / atomic_writer: content, old file kept on an error, no temp file left, fsyncs."""
import os
import stat

import numpy as np
import pytest

from alpharl import atomic
from alpharl.atomic import FILE_MODE, atomic_write, atomic_writer


def _fsync_counter(monkeypatch):
    """Count os.fsync calls on directories and on files."""
    calls = {"dir": 0, "file": 0}
    real = os.fsync

    def counting(fd):
        calls["dir" if stat.S_ISDIR(os.fstat(fd).st_mode) else "file"] += 1
        return real(fd)

    monkeypatch.setattr(atomic.os, "fsync", counting)
    return calls


def test_text_and_bytes_written(tmp_path, monkeypatch):
    calls = _fsync_counter(monkeypatch)
    atomic_write(tmp_path / "a.txt", "grüße\n")
    atomic_write(tmp_path / "b.bin", b"\x00\x01\xff")
    assert (tmp_path / "a.txt").read_text(encoding="utf-8") == "grüße\n"
    assert (tmp_path / "b.bin").read_bytes() == b"\x00\x01\xff"
    assert calls == {"dir": 2, "file": 2}
    assert stat.S_IMODE((tmp_path / "a.txt").stat().st_mode) == FILE_MODE
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.txt", "b.bin"]


def test_replaces_an_existing_file(tmp_path):
    path = tmp_path / "x"
    path.write_text("old")
    atomic_write(path, "new")
    assert path.read_text() == "new"
    assert [p.name for p in tmp_path.iterdir()] == ["x"]


def test_writer_through_a_file_object(tmp_path, monkeypatch):
    calls = _fsync_counter(monkeypatch)
    rng = np.random.default_rng(3)
    a = rng.standard_normal(17).astype(np.float32)
    with atomic_writer(tmp_path / "z.npz") as f:
        np.savez(f, a=a)
    with np.load(tmp_path / "z.npz") as z:
        np.testing.assert_array_equal(z["a"], a)
    assert calls == {"dir": 1, "file": 1}


def test_an_error_in_the_writer_keeps_the_old_file_and_leaves_no_temp(tmp_path, monkeypatch):
    calls = _fsync_counter(monkeypatch)
    path = tmp_path / "keep.txt"
    path.write_text("old content")
    with pytest.raises(RuntimeError, match="writer failed"):
        with atomic_writer(path) as f:
            f.write(b"half of the new")
            raise RuntimeError("writer failed")
    assert path.read_text() == "old content"
    assert [p.name for p in tmp_path.iterdir()] == ["keep.txt"]
    assert calls == {"dir": 0, "file": 0}


def test_a_failed_rename_leaves_no_temp(tmp_path):
    target = tmp_path / "d"
    target.mkdir()
    (target / "inside").write_text("x")   # os.replace cannot put a file over a non-empty directory
    with pytest.raises(OSError):
        atomic_write(target, "data")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["d"]
    assert (target / "inside").read_text() == "x"


class _FullDisk:
    """A file-object writer that gets part of its bytes out, then fails as a full disk does."""

    def __init__(self, f):
        self.f = f

    def write(self, data):
        self.f.write(bytes(data)[: len(data) // 2])
        raise OSError(28, "No space left on device")   # ENOSPC


def test_a_full_disk_part_way_leaves_no_temp_and_the_old_file(tmp_path):
    path = tmp_path / "checkpoint.npz"
    path.write_bytes(b"old checkpoint")
    with pytest.raises(OSError, match="No space"):
        with atomic_writer(path) as f:
            _FullDisk(f).write(b"new" * 1000)
    assert path.read_bytes() == b"old checkpoint"
    assert [p.name for p in tmp_path.iterdir()] == ["checkpoint.npz"]


def test_stale_temps_of_a_killed_writer_are_removed(tmp_path):
    (tmp_path / ".checkpoint.npz.ab12_z9x.tmp").write_bytes(b"half")   # what a kill -9 leaves
    (tmp_path / "config.toml").write_text("b = 2\n")
    (tmp_path / "notes.tmp").write_text("the user's")                   # not the writer's shape: kept
    (tmp_path / ".hidden.tmp").write_text("the user's")
    assert atomic.remove_stale_temps(tmp_path) == [".checkpoint.npz.ab12_z9x.tmp"]
    assert sorted(p.name for p in tmp_path.iterdir()) == [".hidden.tmp", "config.toml", "notes.tmp"]
    assert atomic.remove_stale_temps(tmp_path / "missing") == []
