"""``alpharl train --gpus G``: the spawned launcher on the CPU (numpy backend, host all-reduce between
processes), rank-0-only writing, the checkpoint of every rank, and the one-line refusals."""
import json
import re

import numpy as np
import pytest
from typer.testing import CliRunner

from alpharl import run
from alpharl.checkpoint import CheckpointError, load_checkpoint
from alpharl.cli.app import app
from alpharl.config import ConfigError, TrainConfig
from alpharl.launch import check_gpus, launch, visible_gpus
from alpharl.ranks import rank_prefix
from alpharl.rundir import CHECKPOINT_FILE, SUMMARY_FILE
from alpharl.trainer import IntegratedTrainer

runner = CliRunner()


def _cfg(run_dir, **kw):
    return TrainConfig(**(dict(b=4, backend="numpy", minibatch=16, replay_capacity=256, seed=3, steps=4,
                               diag_every=2, checkpoint_every=0, run_dir=str(run_dir)) | kw))


def _one_line_exit_2(r, *needles):
    assert r.exit_code == 2, r.output
    lines = r.output.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("alpharl: error:"), r.output
    for n in needles:
        assert n in lines[0], r.output


def test_spawned_launcher_g1_runs_end_to_end(tmp_path):
    run_dir = tmp_path / "runs" / "g1"
    summary = launch(_cfg(run_dir, gpus=1), backend="numpy")
    assert summary["step"] == 4 and summary["gpus"] == 1
    assert [p.name for p in (tmp_path / "runs").iterdir()] == ["g1"]
    assert json.loads((run_dir / SUMMARY_FILE).read_text())["step"] == 4


def test_two_ranks_rank0_writes_one_run_and_every_ranks_state(tmp_path):
    run_dir = tmp_path / "runs" / "g2"
    summary = launch(_cfg(run_dir, gpus=2), backend="numpy")
    assert summary["gpus"] == 2 and summary["b"] == 4
    assert [p.name for p in tmp_path.rglob("*") if p.is_dir()] == ["runs", "g2"]
    arrays, meta = load_checkpoint(run_dir / CHECKPOINT_FILE)
    assert meta["gpus"] == 2 and meta["step"] == 4
    p1 = rank_prefix(1)
    # identical weights on both ranks, different backtests
    np.testing.assert_array_equal(arrays["nets.params"], arrays[p1 + "nets.params"])
    np.testing.assert_array_equal(arrays["isv"], arrays[p1 + "isv"])
    assert not np.array_equal(arrays["prng"], arrays[p1 + "prng"])
    assert arrays["prng"].shape == (2,)  # B/G backtests a rank


def test_resume_with_another_g_is_refused(tmp_path):
    run_dir = tmp_path / "r"
    launch(_cfg(run_dir, gpus=2), backend="numpy")
    r = runner.invoke(app, ["train", "--resume", str(run_dir), "--gpus", "1", "--steps", "6"])
    _one_line_exit_2(r, "gpus")
    # the checkpoint's own record refuses it too, whatever the config says
    cfg = _cfg(run_dir, gpus=1)
    with pytest.raises(CheckpointError, match="2 rank"):
        run._load_resumed(IntegratedTrainer(cfg, run.load_market(cfg)), run_dir, cfg)


def test_resume_two_ranks_continues(tmp_path):
    run_dir = tmp_path / "r"
    launch(_cfg(run_dir, gpus=2, steps=2), backend="numpy")
    summary = launch(_cfg(run_dir, gpus=2, steps=4), resume=str(run_dir), backend="numpy")
    assert summary["started_at_step"] == 2 and summary["step"] == 4


@pytest.mark.parametrize("args, needles", [
    (["--gpus", "3", "--b", "4", "--backend", "numpy"], ["--b 4 does not divide by --gpus 3"]),
    (["--gpus", "0"], ["--gpus 0"]),
])
def test_bad_gpus_options_end_in_one_line(tmp_path, args, needles):
    r = runner.invoke(app, ["train", "--steps", "1", "--run-dir", str(tmp_path / "x"), *args])
    _one_line_exit_2(r, *needles)
    assert not (tmp_path / "x").exists()


def _more_than_visible() -> tuple[int, str]:
    """A rank count this machine cannot hold, and the line that refuses it (no GPU, or too few)."""
    seen = visible_gpus()
    g = max(2, seen + 1)
    return g, (f"--gpus {g}: no GPU here" if seen == 0 else f"--gpus {g}: this machine sees {seen} GPU(s)")


def test_more_gpus_than_visible_ends_in_one_line(tmp_path):
    g, line = _more_than_visible()
    r = runner.invoke(app, ["train", "--steps", "1", "--run-dir", str(tmp_path / "x"), "--gpus", str(g), "--b", str(2 * g)])
    _one_line_exit_2(r, line)
    assert not (tmp_path / "x").exists()


def test_more_gpus_than_visible_is_refused():
    seen = visible_gpus()
    g = max(2, seen + 1)
    with pytest.raises(ConfigError, match=re.escape(f"--gpus {g}: this machine sees {seen} GPU(s)")):
        check_gpus(TrainConfig(b=2 * g, gpus=g, backend="cuda"), "cuda")


def test_bench_gpus_without_enough_gpus_says_so():
    r = runner.invoke(app, ["bench", "--gpus", "2"])
    _one_line_exit_2(r, "GPU")
