"""The diagnostics stream writer: rows readable at once, torn tails dropped, resume appends, fsync pacing."""
import time

import numpy as np
import pytest

from alpharl import isv as S
from alpharl.diag import DiagnosticsWriter, complete_length, read_diagnostics
from alpharl.rundir import DIAG_FILE

METRICS = ["losses/q", "pnl/mean"]


def _row(w, step, rng):
    isv = rng.uniform(-1, 1, S.RL_SLOTS_END).astype(np.float32)
    w.write(step, 0.5 * step, time.time(), 10.0, 20.0, isv, {"losses/q": float(step), "pnl/mean": -float(step)})
    return isv


def test_rows_readable_before_close_with_exact_values(tmp_path, rng):
    w = DiagnosticsWriter(tmp_path, METRICS)
    isvs = [_row(w, s, rng) for s in (1, 2, 3)]
    t = read_diagnostics(tmp_path)        # another reader, writer still open
    assert t.column("step").to_pylist() == [1, 2, 3]
    for s in S.SLOTS:
        assert t.column(f"isv.{s.name}").to_pylist() == [float(v[s.index]) for v in isvs]
    assert t.column("pnl/mean").to_pylist() == [-1.0, -2.0, -3.0]
    w.close()


@pytest.mark.parametrize("cut", [1, 7, 200])
def test_torn_tail_dropped_and_resume_appends(tmp_path, rng, cut):
    w = DiagnosticsWriter(tmp_path, METRICS)
    for s in range(1, 5):
        _row(w, s, rng)
    w.close()
    path = tmp_path / DIAG_FILE
    full = path.read_bytes()
    path.write_bytes(full[:-(8 + cut)])    # row 4 torn (8: the end-of-stream marker after it)
    assert read_diagnostics(tmp_path).num_rows == 3
    assert complete_length(path) < len(full) - 8 - cut
    w = DiagnosticsWriter(tmp_path, METRICS, append=True)
    _row(w, 5, rng)
    w.close()
    assert read_diagnostics(tmp_path).column("step").to_pylist() == [1, 2, 3, 5]


def test_fsync_paced(tmp_path, rng, monkeypatch):
    import alpharl.diag as D

    calls = []
    real = D.os.fsync
    monkeypatch.setattr(D.os, "fsync", lambda fd: (calls.append(fd), real(fd)))
    w = DiagnosticsWriter(tmp_path, METRICS, fsync_interval_s=3600.0)
    for s in range(10):
        _row(w, s, rng)
    assert len(calls) == 2                 # the schema's atomic write (file, folder); rows wait for the interval
    w.close()
    assert len(calls) == 3                 # close syncs
    calls.clear()
    w = DiagnosticsWriter(tmp_path / ".." / tmp_path.name, METRICS, fsync_interval_s=0.0)
    for s in range(3):
        _row(w, s, rng)
    assert len(calls) == 5
    w.close()


def test_append_refuses_another_schema(tmp_path, rng):
    w = DiagnosticsWriter(tmp_path, METRICS)
    _row(w, 1, rng)
    w.close()
    with pytest.raises(ValueError, match="another schema"):
        DiagnosticsWriter(tmp_path, ["other/metric"], append=True)


def _read_with_pyarrow_alone(path):
    import pyarrow as pa
    import pyarrow.ipc as ipc

    with pa.OSFile(str(path)) as f:
        return ipc.open_stream(f).read_all()


@pytest.mark.parametrize("fail_on", ["body", "head"])
def test_disk_full_part_way_through_a_row_leaves_a_whole_stream(tmp_path, rng, monkeypatch, fail_on):
    """A row whose write stops part-way with ENOSPC: pyarrow alone reads the earlier rows, at the
    moment of the failure and after it; the next row (space freed) appends cleanly."""
    import errno

    import alpharl.diag as D

    w = DiagnosticsWriter(tmp_path, METRICS)
    for s in (1, 2):
        _row(w, s, rng)
    real = D.os.pwrite
    seen = {}

    def full_disk(fd, data, offset):
        if (fail_on == "body") == (len(data) > 8):
            real(fd, data[: len(data) // 2], offset)        # half of it reaches the disk, then the disk is full
            seen["during"] = _read_with_pyarrow_alone(tmp_path / DIAG_FILE).num_rows
            raise OSError(errno.ENOSPC, "No space left on device")
        return real(fd, data, offset)

    monkeypatch.setattr(D.os, "pwrite", full_disk)
    with pytest.raises(OSError, match="No space"):
        _row(w, 3, rng)
    monkeypatch.setattr(D.os, "pwrite", real)
    assert seen["during"] == 2
    assert _read_with_pyarrow_alone(tmp_path / DIAG_FILE).column("step").to_pylist() == [1, 2]
    _row(w, 4, rng)
    w.close()
    assert _read_with_pyarrow_alone(tmp_path / DIAG_FILE).column("step").to_pylist() == [1, 2, 4]
    assert sorted(p.name for p in tmp_path.iterdir()) == [DIAG_FILE]


def test_readable_by_pyarrow_between_the_two_writes_of_a_row(tmp_path, rng, monkeypatch):
    """Killed after a row's body is written and before it is linked in: the stream ends before it."""
    import alpharl.diag as D

    w = DiagnosticsWriter(tmp_path, METRICS)
    _row(w, 1, rng)
    seen = []
    monkeypatch.setattr(D, "pause_for_tests", lambda label: seen.append(
        _read_with_pyarrow_alone(tmp_path / DIAG_FILE).num_rows))
    _row(w, 2, rng)
    w.close()
    assert seen == [1] and _read_with_pyarrow_alone(tmp_path / DIAG_FILE).num_rows == 2
