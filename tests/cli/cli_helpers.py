"""Shared helpers of the CLI tests: synthetic run directories and a stand-in trainer."""
import json
import sys
import time
import types
from pathlib import Path

import numpy as np

from alpharl import isv as S
from alpharl.checkpoint import save_checkpoint
from alpharl.diag import DiagnosticsWriter
from alpharl.lobster.load import load_lobster
from alpharl.rundir import CHECKPOINT_FILE

METRICS = ["losses/q", "losses/pi", "pnl/mean", "pnl/total", "trades/count", "trades/win_rate"]


def make_run(run_dir: Path, rows: int, rng, start_step: int = 0, every: int = 10) -> Path:
    """A run directory as a trainer leaves it: config, diagnostics rows, checkpoint, summary.

    Values move with the step (so trends are known) plus noise from ``rng``.
    """
    run_dir = Path(run_dir)
    run_dir.mkdir(parents=True, exist_ok=True)
    (run_dir / "config.toml").write_text(f"steps = {start_step + rows * every}\nb = 2\nseed = 0\nbackend = \"numpy\"\n")
    w = DiagnosticsWriter(run_dir, METRICS)
    isv = S.bootstrap_vector()
    for i in range(rows):
        step = start_step + (i + 1) * every
        isv = isv + rng.uniform(0.01, 0.02, size=isv.shape).astype(np.float32)
        isv[S.RL_LOSS_Q] = 3.0 - 0.1 * i        # falls
        isv[S.RL_LR_Q] = 1e-3 * (1 + i)        # rises
        metrics = {m: float(rng.uniform(0.5, 1.5)) for m in METRICS}
        metrics["pnl/total"] = 10.0 * (i + 1)
        w.write(step, 0.1 * (i + 1), time.time(), 100.0, 200.0, isv, metrics)
    w.close()
    save_checkpoint(run_dir / CHECKPOINT_FILE, {"isv": isv, "step": np.array(start_step + rows * every)},
                    {"step": start_step + rows * every})
    (run_dir / "summary.json").write_text(json.dumps({"steps": start_step + rows * every}))
    return run_dir


class FakeTrainer:
    """Stands in for ``alpharl.run.train`` (same signature and dashboard use); records the calls it got."""

    def __init__(self, rng):
        self.rng = rng
        self.calls = []
        self.raise_exc = None

    def train(self, config, *, resume, dashboard):
        self.calls.append((config, resume))
        if self.raise_exc is not None:
            raise self.raise_exc
        if config.data is not None:
            load_lobster(config.data, cache=False)   # the real loader: its errors are what train must report
        run_dir = Path(config.run_dir)
        with dashboard:           # as the real trainer: enters, updates and finishes the dashboard
            dashboard.start(config, run_dir)
            make_run(run_dir, rows=max(1, config.steps // config.diag_every), rng=self.rng, every=config.diag_every)
            for i in range(3):
                dashboard.update((i + 1) * config.diag_every, S.bootstrap_vector(),
                                 {"pnl/mean": 1.0, "losses/q": 2.0}, 10.0, 10.0 * config.b)
            summary = {"run_dir": str(run_dir), "step": config.steps, "wall_seconds": 0.5, "interrupted": False,
                       "losses": {"loss_q": 2.0}}
            dashboard.finish(summary)
        return summary


def assert_one_line_error(r, *names, alone: bool = True):
    """Exit 2, exactly one line on stderr ``alpharl: error: ...`` naming ``names``, no traceback.

    ``alone``: the error is all the output (it came before anything started);
    otherwise progress lines printed earlier on stdout may precede it.
    """
    assert r.exit_code == 2, r.output
    err = r.stderr.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("alpharl: error: "), r.output
    if alone:
        assert r.output.strip().splitlines() == err, r.output
    assert "Traceback" not in r.output
    assert r.exception is None or isinstance(r.exception, SystemExit), repr(r.exception)
    for name in names:
        assert name in err[0], err[0]
