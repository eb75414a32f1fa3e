"""``alpharl study``: small real studies (train + eval subprocesses) locally and through Ray, resuming,
failed trials, bad input."""
import json
import sys
from pathlib import Path

import pandas as pd
import pytest
from typer.testing import CliRunner

from alpharl import study as St
from alpharl.cli.app import app
from alpharl.evaluate import ALL
from alpharl.report import load_run
from cli_helpers import assert_one_line_error

runner = CliRunner()
CUTS = Path(__file__).resolve().parent.parent / "data" / "lobster"
#: The smallest study that trains and evaluates for real: 5 steps at B = 4, 12 eval steps a policy.
SMALL = ["--steps", "5", "--b", "4", "--backend", "numpy", "--eval-steps", "12", "--seeds", "2"]
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def study(*args):
    return runner.invoke(app, ["study", *map(str, args)])


def _mtimes(out: Path, name: str) -> dict:
    return {p: p.stat().st_mtime_ns for p in sorted(out.rglob(name))}


def check_study(out: Path, datasets: list[str], seeds: list[int]) -> dict:
    """The files of a finished small study are there and agree with each other."""
    content = json.loads((out / St.STUDY_FILE).read_text())
    trials = content["trials"]
    assert [(t["dataset"], t["seed"]) for t in trials] == [(d, s) for d in datasets for s in seeds]
    for t in trials:
        assert t["status"] == St.OK and t["error"] is None and t["variant"] == St.DEFAULT_VARIANT
        assert list(t["policies"]) == list(ALL) and t["steps"] == 5 and t["b"] == 4 and t["wall_seconds"] > 0
        assert all(p["steps"] == 12 and p["backtests"] == 4 for p in t["policies"].values())
        assert t["policies"]["hold"]["pnl"] == 0.0
        run = load_run(out / t["run_dir"])                       # what alpharl diag opens
        assert run.rows >= 1 and run.summary["step"] == 5
        result = json.loads((out / t["trial_dir"] / St.RESULT_FILE).read_text())
        assert result["policies"] == t["policies"] and set(St.TRACE_SLOTS) <= set(result["trace"])
    assert [(g["dataset"], g["seeds"]) for g in content["summary"]] == [(d, seeds) for d in datasets]
    for g in content["summary"]:
        for p in ALL:
            s = g["policies"][p]
            vals = [t["policies"][p]["pnl"] for t in trials if t["dataset"] == g["dataset"]]
            assert s["n"] == len(seeds) and s["mean"] == pytest.approx(sum(vals) / len(vals))
            assert min(vals) <= s["ci"][0] <= s["mean"] <= s["ci"][1] <= max(vals)
    table = pd.read_parquet(out / St.TABLE_FILE)
    assert len(table) == len(trials) * len(ALL) and set(table["policy"]) == set(ALL)
    assert (table["status"] == St.OK).all() and table["pnl"].notna().all()
    png = (out / St.PNG_FILE).read_bytes()
    assert png[:8] == PNG_MAGIC and len(png) > 20_000
    return content


@pytest.mark.slow   # about 20 s alone on two cores; first in the schedule to overlap the rest
def test_local_study_and_rerun_skips_finished_trials(tmp_path):
    out = tmp_path / "study"
    args = ["--out", out, "--data", CUTS / "*_1_cut.zip", "--each-file", *SMALL, "--jobs", 2]
    r = study(*args)
    assert r.exit_code == 0, r.output
    assert "trial 4/4" in r.output and "vs hold" in r.output and f"wrote {out / St.STUDY_FILE}" in r.output
    names = ["AMZN_2012-06-21_1_cut", "GOOG_2012-06-21_1_cut"]
    check_study(out, names, [0, 1])
    results, logs = _mtimes(out, St.RESULT_FILE), _mtimes(out, St.TRAIN_LOG)
    assert len(results) == 4

    r = study(*args, "--json")
    assert r.exit_code == 0, r.output
    d = json.loads(r.stdout)
    assert d["trials_ok"] == 4 and d["trials_failed"] == 0 and d["summary"][0]["dataset"] == names[0]
    assert "4 of 4 trials already done" in r.stderr
    assert _mtimes(out, St.RESULT_FILE) == results and _mtimes(out, St.TRAIN_LOG) == logs
    check_study(out, names, [0, 1])

    # the same folder asked for another study: refused before anything runs
    assert_one_line_error(study(*args[:-2], "--steps", 6), "steps = 5, now 6")


@pytest.mark.slow   # Ray's start-up and two trials: 30-45 s on two cores
def test_ray_study(tmp_path):
    pytest.importorskip("ray", reason="Ray is not installed (the 'ray' extra): the Ray executor is not tested")
    out = tmp_path / "study"
    r = study("--out", out, "--data", CUTS / "GOOG_2012-06-21_1_cut.zip", *SMALL, "--ray", "--jobs", 2)
    assert r.exit_code == 0, r.output
    check_study(out, ["GOOG_2012-06-21_1_cut"], [0, 1])


def test_failed_trial_is_recorded_and_retried(tmp_path):
    # A held-out window of 3 events: training succeeds, eval fails in one line.
    out = tmp_path / "study"
    args = ["--out", out, "--seed-list", 4, "--steps", 5, "--b", 4, "--backend", "numpy", "--eval-window", "0.9999:1"]
    r = study(*args)
    assert r.exit_code == St.EXIT_TRIALS_FAILED, r.output
    assert "1 of 1 trials failed" in r.stderr and "FAILED in eval" in r.output
    trial = out / "trials" / St.EMBEDDED / St.DEFAULT_VARIANT / "s4"
    result = json.loads((trial / St.RESULT_FILE).read_text())
    assert result["status"] == St.FAILED and result["error"]["stage"] == "eval"
    assert "shorter than two env steps" in result["error"]["message"] and result["error"]["log"] == St.EVAL_LOG
    content = json.loads((out / St.STUDY_FILE).read_text())
    assert content["trials_failed"] == 1 and content["summary"][0]["policies"]["greedy"]["n"] == 0
    table = pd.read_parquet(out / St.TABLE_FILE)
    assert len(table) == 1 and table["policy"].isna().all() and table["error"][0].startswith("eval: ")
    checkpoint = (trial / St.RUN_DIR / "checkpoint.npz").stat().st_mtime_ns

    r = study(*args)                               # retried: the finished training is kept, eval runs again
    assert r.exit_code == St.EXIT_TRIALS_FAILED, r.output
    assert "already done" not in r.output
    assert (trial / St.RUN_DIR / "checkpoint.npz").stat().st_mtime_ns == checkpoint


def test_interrupted_training_resumes(tmp_path):
    # A run directory left by a killed training (config, no summary) continues with train --resume.
    out = tmp_path / "study"
    args = ["--out", out, "--seed-list", 1, "--steps", 3, "--b", 2, "--backend", "numpy", "--eval-steps", 4, "--no-png"]
    plan = St.plan_study(out, [St.Dataset(St.EMBEDDED, None)], [St.Variant(St.DEFAULT_VARIANT, None)], [1],
                         steps=3, b=2, backend="numpy", eval_steps=4)
    run = plan.trials[0].run_dir
    run.mkdir(parents=True)
    (run / "config.toml").write_text("steps = 3\nb = 2\nseed = 1\nbackend = \"numpy\"\ntrain_window = \"0:0.8\"\n")
    r = study(*args)
    assert r.exit_code == 0, r.output
    log = (run.parent / St.TRAIN_LOG).read_text()
    assert "starting it again from step 0" in log
    assert json.loads((run / "summary.json").read_text())["step"] == 3
    assert not (out / St.PNG_FILE).exists()


def _damaged(tmp_path):
    bad = tmp_path / "AMZN_2012-06-21_1_bad.zip"
    bad.write_bytes((CUTS / "AMZN_2012-06-21_1_cut.zip").read_bytes()[:300])
    return bad


@pytest.mark.parametrize("args, names", [
    (["--data", "{tmp}/missing.zip"], ["--data", "no such file"]),
    (["--data", "{tmp}/*.zip"], ["matches no LOBSTER file"]),
    (["--data", "{damaged}"], ["AMZN_2012-06-21_1_bad.zip"]),
    (["--each-file"], ["--each-file"]),
    (["--seeds", "0"], ["--seeds 0"]),
    (["--seeds", "2", "--seed-list", "1"], ["--seed-list"]),
    (["--seed-list", "1,a"], ["--seed-list"]),
    (["--eval-window", "1:0.5"], ["--eval-window"]),
    (["--eval-window", "0.5:1"], ["overlaps --train-window 0:0.8"]),
    (["--train-window", "0.8"], ["--train-window"]),
    (["--variant", "x={tmp}/missing.toml"], ["no such config file"]),
    (["--variant", "x={tmp}/bad.toml"], ["bad.toml", "k_max"]),
    (["--variant", "x={tmp}/seeded.toml"], ["'seed'"]),
    (["--variant", "a=", "--variant", "a"], ["twice"]),
    (["--backend", "gpu"], ["--backend 'gpu'"]),
    (["--steps", "0"], ["--steps 0"]),
    (["--steps", "abc"], ["--steps"]),
    (["--jobs", "0"], ["--jobs 0"]),
    (["--jobs", "2", "--ray-address", "127.0.0.1:1"], ["--ray-address"]),
    (["--gpus-per-trial", "0.5"], ["--gpus-per-trial"]),
    (["--gpus-per-trial", "nan", "--ray"], ["--gpus-per-trial"]),
])
def test_bad_input_one_line(tmp_path, args, names):
    (tmp_path / "bad.toml").write_text('k_max = "many"\n')
    (tmp_path / "seeded.toml").write_text("seed = 3\n")
    fill = {"tmp": tmp_path, "damaged": _damaged(tmp_path) if "{damaged}" in args else ""}
    r = study("--out", tmp_path / "out", *[a.format(**fill) for a in args])
    assert_one_line_error(r, *names)
    assert not (tmp_path / "out").exists()


def test_out_and_optional_dependencies(tmp_path, monkeypatch):
    assert_one_line_error(study("--seeds", 1), "--out")
    (tmp_path / "file").write_text("")
    assert_one_line_error(study("--out", tmp_path / "file"), "exists and is not a directory")
    monkeypatch.setitem(sys.modules, "ray", None)                  # import ray -> ImportError
    assert_one_line_error(study("--out", tmp_path / "o", "--ray"), "Ray is not installed", "alpharl[ray]")
    monkeypatch.setitem(sys.modules, "matplotlib", None)
    assert_one_line_error(study("--out", tmp_path / "o"), "matplotlib", "--no-png")
    assert not (tmp_path / "o").exists()


def test_cuda_backend_without_gpu(tmp_path):
    from alpharl import target

    if not target.on_simulator():
        pytest.skip("a GPU is present: --backend cuda is valid here")
    assert_one_line_error(study("--out", tmp_path / "o", "--backend", "cuda"), "--backend cuda")


def test_gpu_study_reports_without_a_gpu(tmp_path):
    """A study whose trials all ended on a GPU machine reports anywhere; one with a trial left still
    asks for a GPU."""
    from alpharl import target

    if not target.on_simulator():
        pytest.skip("a GPU is present: --backend cuda would train here")
    out = tmp_path / "s"
    args = ["--data", CUTS / "AMZN_2012-06-21_5_cut.zip", "--out", out, "--steps", 5, "--b", 4,
            "--eval-steps", 12, "--no-png"]
    assert study(*args, "--seeds", 1, "--backend", "numpy").exit_code == 0
    # what the same trial records when it ran with --backend cuda
    for name in (St.TRIAL_FILE, St.RESULT_FILE):
        for path in out.rglob(name):
            record = json.loads(path.read_text())
            record["asked"]["backend"] = "cuda"
            path.write_text(json.dumps(record))
    results = _mtimes(out, St.RESULT_FILE)
    res = study(*args, "--seeds", 1, "--backend", "cuda")
    assert res.exit_code == 0, res.output
    assert _mtimes(out, St.RESULT_FILE) == results
    assert json.loads((out / St.STUDY_FILE).read_text())["trials_ok"] == 1
    assert_one_line_error(study(*args, "--seeds", 2, "--backend", "cuda"), "--backend cuda")
