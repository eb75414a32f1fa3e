"""kill -9 anywhere in ``alpharl train``: before the first checkpoint, inside a checkpoint, a Parquet
snapshot or a diagnostics row, and at a random moment. Each time the diagnostics stay readable by
pyarrow alone, the next start leaves no temporary behind, and the run, resumed, ends bit-identical
to an uninterrupted one (from its last checkpoint, or started again from step 0 when it had none).

The windows inside writes are hit deterministically by the test hook of alpharl.atomic
(``ALPHARL_TEST_PAUSE_IN``): the process sleeps inside the named write, after creating a mark file.
"""
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.ipc as ipc
import pytest

from alpharl.atomic import PAUSE_ENV, PAUSE_MARK_ENV, PAUSE_S_ENV
from alpharl.checkpoint import load_checkpoint
from alpharl.rundir import CHECKPOINT_FILE, DIAG_FILE, PARQUET_FILE

pytestmark = pytest.mark.slow

ROOT = Path(__file__).parents[2]
ARGS = ["train", "--backend", "numpy", "--b", "2", "--minibatch", "4", "--replay-capacity", "64", "--steps", "24",
        "--diag-every", "2", "--checkpoint-every", "8", "--seed", "5", "--quiet"]
WAIT_S = 90.0
TEMP = re.compile(r"^\..+\.tmp$|\.tmp$")


def alpharl(*args, env=None, wait=True):
    full_env = {**os.environ, "PYTHONPATH": str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""), **(env or {})}
    p = subprocess.Popen([sys.executable, "-m", "alpharl.cli", *map(str, args)], env=full_env, cwd=ROOT,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    if wait:
        out, err = p.communicate(timeout=WAIT_S)
        assert p.returncode == 0, err
    return p


def readable_by_pyarrow(run_dir: Path) -> list[int]:
    with pa.OSFile(str(run_dir / DIAG_FILE)) as f:
        return ipc.open_stream(f).read_all().column("step").to_pylist()


@pytest.fixture(scope="module")
def reference(tmp_path_factory):
    run = tmp_path_factory.mktemp("ref") / "run"
    alpharl(*ARGS, "--run-dir", run)
    arrays, meta = load_checkpoint(run)
    return arrays, readable_by_pyarrow(run)


def kill_when(p: subprocess.Popen, ready, may_finish: bool = False) -> None:
    deadline = time.monotonic() + WAIT_S
    while not ready():
        if may_finish and p.poll() == 0:
            return   # a random moment past the end: the resume below then has nothing left to do
        assert p.poll() is None, p.communicate()[1]
        assert time.monotonic() < deadline, "the kill window never came"
        time.sleep(0.02)
    os.kill(p.pid, signal.SIGKILL)
    p.wait()


@pytest.mark.parametrize("window", [
    "diagnostics.arrows:2",    # a row before the first checkpoint
    "checkpoint.npz:1",        # the first checkpoint, written but not yet renamed into place
    "diagnostics.parquet:1",   # the snapshot after the first checkpoint
    "diagnostics.arrows:7",    # a row after the first checkpoint (step 14)
    "checkpoint.npz:2",        # the second checkpoint
    "random",
])
def test_kill_anywhere_then_continue(tmp_path, reference, window):
    ref_arrays, ref_steps = reference
    run, mark = tmp_path / "run", tmp_path / "mark"
    if window == "random":
        p = alpharl(*ARGS, "--run-dir", run, wait=False)
        delay = np.random.default_rng().uniform(0.0, 0.5)    # counted from the first diagnostics row
        start = []
        kill_when(p, lambda: (run / DIAG_FILE).exists() and (start or start.append(time.monotonic()) or True)
                  and time.monotonic() - start[0] >= delay, may_finish=True)
    else:
        p = alpharl(*ARGS, "--run-dir", run, wait=False,
                    env={PAUSE_ENV: window, PAUSE_S_ENV: "60", PAUSE_MARK_ENV: str(mark)})
        kill_when(p, mark.exists)
    if (run / DIAG_FILE).exists():
        steps = readable_by_pyarrow(run)                 # pyarrow alone, right after the kill
        assert steps == ref_steps[: len(steps)]
    had_checkpoint = (run / CHECKPOINT_FILE).exists()
    if window.startswith("checkpoint.npz"):
        assert any(TEMP.search(n.name) for n in run.iterdir())   # the kill left the temporary
    alpharl(*ARGS, "--resume", run)
    leftovers = [n.name for n in run.iterdir() if TEMP.search(n.name)]
    assert not leftovers, leftovers
    arrays, meta = load_checkpoint(run)
    assert meta["step"] == 24
    assert sorted(arrays) == sorted(ref_arrays)
    for k in ref_arrays:
        np.testing.assert_array_equal(arrays[k], ref_arrays[k], err_msg=f"{k} (had checkpoint: {had_checkpoint})")
    assert readable_by_pyarrow(run) == ref_steps
    assert (run / PARQUET_FILE).exists()
