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
    path.write_bytes(full[:-cut])          # killed in the middle of row 4
    assert read_diagnostics(tmp_path).num_rows == 3
    assert complete_length(path) < len(full) - cut + 1
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
    assert len(calls) == 1                 # the schema's write; rows wait for the interval
    w.close()
    assert len(calls) == 2                 # close syncs
    calls.clear()
    w = DiagnosticsWriter(tmp_path / ".." / tmp_path.name, METRICS, fsync_interval_s=0.0)
    for s in range(3):
        _row(w, s, rng)
    assert len(calls) == 4
    w.close()


def test_append_refuses_another_schema(tmp_path, rng):
    w = DiagnosticsWriter(tmp_path, METRICS)
    _row(w, 1, rng)
    w.close()
    with pytest.raises(ValueError, match="another schema"):
        DiagnosticsWriter(tmp_path, ["other/metric"], append=True)
