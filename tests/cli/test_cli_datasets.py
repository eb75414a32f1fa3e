"""Datasets and held-out windows through the CLI, with the real trainer (``--backend numpy``, tiny runs on
the 3,000-event cuts): training reads only its window and records it; eval defaults to the held-out
complement, refuses overlap unless told, and marks it; several files train side by side (round robin,
per-file metrics, holdout, bit-identical resume); every bad input is one line."""
import json
import shutil

import numpy as np
import pytest
from typer.testing import CliRunner

from alpharl.checkpoint import load_checkpoint
from alpharl.cli.app import app
from alpharl.config import TrainConfig
from alpharl.diag import read_diagnostics
from alpharl.lobster.load import load_lobster
from alpharl.lobster.sample import embedded_sample_path
from alpharl.run import load_data
from alpharl.rundir import DATASET_FILE
from alpharl.trainer import IntegratedTrainer
from cli_helpers import assert_one_line_error
from support import AMZN1, AMZN5, GOOG5, GOOG10, cut_path

runner = CliRunner()
TINY = ["--backend", "numpy", "--b", "2", "--minibatch", "4", "--replay-capacity", "64", "--diag-every", "2",
        "--quiet"]
AMZN5_CUT, GOOG5_CUT, AMZN1_CUT = str(cut_path(AMZN5)), str(cut_path(GOOG5)), str(cut_path(AMZN1))
EVAL = ["--steps", "4", "--b", "2", "--json"]


def train(run, *args, ok=True):
    r = runner.invoke(app, ["train", *TINY, "--run-dir", str(run), *args])
    if ok:
        assert r.exit_code == 0, r.output
    return r


def evaluate(run, *args):
    r = runner.invoke(app, ["eval", str(run), *EVAL, *args])
    assert r.exit_code == 0, r.output
    return json.loads(r.output)


@pytest.fixture
def two_days(tmp_path):
    d = tmp_path / "data"
    d.mkdir()
    shutil.copy(AMZN5_CUT, d)
    shutil.copy(GOOG5_CUT, d)
    return d


# ------------------------------------------------------------------ one file
def test_train_window_is_recorded_and_is_all_training_reads(tmp_path):
    run = tmp_path / "run"
    train(run, "--steps", "3", "--data", AMZN5_CUT, "--train-window", "0.25:0.75")
    assert 'train_window = "0.25:0.75"' in (run / "config.toml").read_text()
    rec = json.loads((run / DATASET_FILE).read_text())
    (f,) = rec["files"]
    assert (f["label"], f["train_rows"], f["events"], f["held_out"]) == ("AMZN_2012-06-21_5", [750, 2250], 3000, False)
    assert len(f["sha256"]) == 64 and rec["train_window"] == "0.25:0.75"
    assert json.loads((run / "summary.json").read_text())["dataset"] == rec
    assert load_checkpoint(run)[1]["dataset"] == rec
    # the trainer was handed those rows and nothing else: the same run on the cut window by hand
    cfg = TrainConfig.from_toml(run / "config.toml")
    _, market = load_data(cfg)
    full = load_lobster(AMZN5_CUT)
    assert market.n_events == 1500 and np.array_equal(market.book, full.book[750:2250])
    by_hand = IntegratedTrainer(cfg, full.window(750, 2250))
    by_hand.run(3)
    got, _ = load_checkpoint(run)
    for k, v in by_hand.state_dict().items():
        np.testing.assert_array_equal(got[k], v, err_msg=k)


def test_the_whole_stream_is_todays_path(tmp_path):
    """--train-window 0:1 on one file: bit-identical to the trainer on the whole market."""
    run = tmp_path / "run"
    train(run, "--steps", "3", "--train-window", "0:1")
    cfg = TrainConfig.from_toml(run / "config.toml")
    from alpharl.lobster.sample import load_embedded

    straight = IntegratedTrainer(cfg, load_embedded())
    straight.run(3)
    got, _ = load_checkpoint(run)
    assert set(got) == set(straight.state_dict())          # one file: no per-file state
    for k, v in straight.state_dict().items():
        np.testing.assert_array_equal(got[k], v, err_msg=k)


def test_eval_default_complement_overlap_and_allow_overlap(tmp_path):
    run = tmp_path / "run"
    train(run, "--steps", "2", "--data", AMZN5_CUT)
    d = evaluate(run)
    assert (d["window"]["first_row"], d["window"]["stop_row"], d["in_sample"]) == (2400, 3000, False)
    (f,) = d["files"]
    assert f["trained_rows"] == [0, 2400] and f["in_sample"] is False and f["label"] == "AMZN_2012-06-21_5"
    assert f["policies"] == d["policies"] and set(d["policies"]) >= {"sampled", "greedy", "hold"}
    assert evaluate(run, "--window", "0.8:1")["policies"] == d["policies"]
    assert evaluate(run, "--start", "0.8")["policies"] == d["policies"]
    r = runner.invoke(app, ["eval", str(run), *EVAL, "--window", "0.5:1"])
    assert_one_line_error(r, "--window 0.5:1", "overlaps", "--allow-overlap", "AMZN_2012-06-21_5")
    assert_one_line_error(runner.invoke(app, ["eval", str(run), *EVAL, "--end", "0.9", "--start", "0.7"]), "overlaps")
    d = evaluate(run, "--window", "0.5:1", "--allow-overlap")
    assert d["in_sample"] is True and d["files"][0]["in_sample"] is True and d["window"]["first_row"] == 1500
    r = runner.invoke(app, ["eval", str(run), "--steps", "4", "--b", "2", "--window", "0.5:1", "--allow-overlap",
                            "--policy", "hold"], env={"COLUMNS": "200"})
    assert r.exit_code == 0 and "IN-SAMPLE" in r.output, r.output
    r = runner.invoke(app, ["eval", str(run), "--steps", "4", "--b", "2", "--policy", "hold"], env={"COLUMNS": "200"})
    assert r.exit_code == 0 and "IN-SAMPLE" not in r.output and "2,400..3,000" in r.output
    # the same content under another path and container is the same file: still refused
    other = tmp_path / "copy.zip"
    shutil.copy(AMZN5_CUT, other)
    assert_one_line_error(runner.invoke(app, ["eval", str(run), *EVAL, "--data", str(other), "--window", "0:1"]),
                          "overlaps")
    # data the run never trained on is held out whole
    d = evaluate(run, "--data", GOOG5_CUT, "--policy", "hold")
    assert d["files"][0]["window"]["first_row"] == 0 and d["files"][0]["window"]["stop_row"] == 3000
    assert d["files"][0]["trained_rows"] is None and d["in_sample"] is False


def test_eval_of_a_run_that_trained_on_everything(tmp_path):
    run = tmp_path / "run"
    train(run, "--steps", "1", "--data", AMZN5_CUT, "--train-window", "0:1")
    assert_one_line_error(runner.invoke(app, ["eval", str(run), *EVAL]), "nothing held out", "--allow-overlap")
    d = evaluate(run, "--window", "0.9:1", "--allow-overlap", "--policy", "hold")
    assert d["in_sample"] is True
    # a run recorded before train windows (no train_window in its config, no dataset.json) read everything
    (run / DATASET_FILE).unlink()
    cfg = (run / "config.toml").read_text().replace('train_window = "0:1"\n', "")
    (run / "config.toml").write_text(cfg)
    assert_one_line_error(runner.invoke(app, ["eval", str(run), *EVAL]), "nothing held out")


# ------------------------------------------------------------------ several files
def test_three_files_round_robin_per_file_metrics_and_eval(tmp_path):
    run = tmp_path / "run"
    train(run, "--steps", "4", "--b", "5", "--data", AMZN5_CUT, "--data", GOOG5_CUT,
          "--data", str(embedded_sample_path()))
    rec = json.loads((run / DATASET_FILE).read_text())
    labels = [f["label"] for f in rec["files"]]
    assert labels == ["AMZN_2012-06-21_5", "GOOG_2012-06-21_5", "AMZN_2012-06-21_5#2"]
    assert [f["stream"] for f in rec["files"]] == [0, 1, 2] and [f["backtests"] for f in rec["files"]] == [2, 2, 1]
    assert [f["train_rows"] for f in rec["files"]] == [[0, 2400], [0, 2400], [0, 24000]]
    arrays, meta = load_checkpoint(run)
    assert arrays["sim.backtest_stream"].tolist() == [0, 1, 2, 0, 1] and arrays["acc_streams"].shape == (3, 4)
    diag = read_diagnostics(run)
    last = {k: v[-1] for k, v in diag.to_pydict().items()}
    for name in ("trades/closed", "pnl/total_reward", "pnl/total_trade_pnl"):
        per_file = [last[f"{name}@{lab}"] for lab in labels]
        assert sum(per_file) == pytest.approx(last[name], rel=1e-9, abs=1e-9), name
    summary = json.loads((run / "summary.json").read_text())
    assert [f["label"] for f in summary["file_metrics"]] == labels
    d = evaluate(run, "--policy", "greedy")
    assert [f["label"] for f in d["files"]] == labels and d["in_sample"] is False
    assert [(f["window"]["first_row"], f["window"]["stop_row"]) for f in d["files"]] == \
        [(2400, 3000), (2400, 3000), (24000, 30000)]
    assert d["steps"] == sum(f["steps"] for f in d["files"])
    assert d["policies"]["greedy"]["trades"] == sum(f["policies"]["greedy"]["trades"] for f in d["files"])
    assert d["policies"]["greedy"]["pnl"] == pytest.approx(sum(f["policies"]["greedy"]["pnl"] for f in d["files"]))
    for act, share in d["policies"]["greedy"]["action_share"].items():   # pooled over the files' steps
        per_file = sum(f["policies"]["greedy"]["action_share"][act] * f["steps"] for f in d["files"])
        assert share == pytest.approx(per_file / d["steps"]), act
    r = runner.invoke(app, ["eval", str(run), "--steps", "4", "--b", "2", "--policy", "hold"], env={"COLUMNS": "200"})
    text = " ".join(r.output.split())       # the titles wrap at the table's width
    assert r.exit_code == 0 and text.count("eval ") == 4, r.output       # three files, then all of them
    assert "GOOG_2012-06-21_5 rows" in text and "AMZN_2012-06-21_5#2 rows" in text and "3 files" in text


def test_files_of_different_depths_train_together(tmp_path):
    # the observation has obs_levels levels whatever a file's depth: 5-, 1- and 10-level files share one network
    run = tmp_path / "run"
    train(run, "--steps", "3", "--b", "3", "--data", AMZN5_CUT, "--data", AMZN1_CUT, "--data", str(cut_path(GOOG10)))
    rec = json.loads((run / DATASET_FILE).read_text())
    assert [f["levels"] for f in rec["files"]] == [5, 1, 10]
    d = evaluate(run, "--policy", "greedy")
    assert [f["label"] for f in d["files"]] == [f["label"] for f in rec["files"]]


def test_holdout_files(two_days, tmp_path):
    run = tmp_path / "run"
    train(run, "--steps", "2", "--data", str(two_days), "--holdout-files", "GOOG*")
    rec = json.loads((run / DATASET_FILE).read_text())
    assert [(f["label"], f["held_out"], f["train_rows"]) for f in rec["files"]] == \
        [("AMZN_2012-06-21_5", False, [0, 2400]), ("GOOG_2012-06-21_5", True, None)]
    assert rec["holdout_files"] == "GOOG*" and 'holdout_files = "GOOG*"' in (run / "config.toml").read_text()
    assert not any("@" in c for c in read_diagnostics(run).column_names)   # one training file: today's path
    d = evaluate(run, "--policy", "hold")
    assert [(f["label"], f["window"]["first_row"], f["window"]["stop_row"], f["trained_rows"]) for f in d["files"]] \
        == [("AMZN_2012-06-21_5", 2400, 3000, [0, 2400]), ("GOOG_2012-06-21_5", 0, 3000, None)]
    d = evaluate(run, "--policy", "hold", "--window", "0.9:1")
    assert d["in_sample"] is False


def test_resume_of_several_files_is_bit_identical(two_days, tmp_path):
    args = ["--b", "3", "--data", str(two_days / "*.zip"), "--seed", "4"]
    train(tmp_path / "straight", "--steps", "6", *args)
    train(tmp_path / "split", "--steps", "3", *args)
    r = runner.invoke(app, ["train", "--resume", str(tmp_path / "split"), "--steps", "6", "--quiet"])
    assert r.exit_code == 0, r.output
    a, meta_a = load_checkpoint(tmp_path / "straight")
    b, meta_b = load_checkpoint(tmp_path / "split")
    assert meta_a["step"] == meta_b["step"] == 6 and set(a) == set(b) and "sim.s1.state_i" in a
    for k in a:
        np.testing.assert_array_equal(a[k], b[k], err_msg=k)
    assert read_diagnostics(tmp_path / "split").column("step").to_pylist() == [2, 3, 4, 6]   # 3: the first end
    # the data changed under the run: refused in one line
    shutil.copy(AMZN5_CUT, two_days / "GOOG_2012-06-21_5_cut.zip")
    r = runner.invoke(app, ["train", "--resume", str(tmp_path / "split"), "--steps", "8", "--quiet"])
    assert_one_line_error(r, "changed since it started", "GOOG_2012-06-21_5_cut.zip", alone=False)


# ------------------------------------------------------------------ bad input
@pytest.mark.parametrize("args,words", [
    (["--train-window", "0.8"], ["--train-window", "A:B"]),
    (["--train-window", "0.9:0.1"], ["--train-window 0.9:0.1", "0 <= A < B <= 1"]),
    (["--train-window", "0:1.5"], ["--train-window"]),
    (["--train-window", "0:0.001", "--data", AMZN5_CUT], ["too few for one step", "AMZN_2012-06-21_5"]),
    (["--data", "nowhere/*.zip"], ["--data nowhere/*.zip", "matches no LOBSTER file"]),
    (["--data", "missing.zip"], ["--data missing.zip", "no such file"]),
    (["--data", AMZN5_CUT, "--data", GOOG5_CUT, "--holdout-files", "MSFT*"],
     ["--holdout-files MSFT*", "matches no file"]),
    (["--data", AMZN5_CUT, "--data", GOOG5_CUT, "--holdout-files", "*"], ["holds out every file"]),
    (["--data", AMZN5_CUT, "--data", GOOG5_CUT, "--b", "1"], ["--b 1", "fewer backtests"]),
])
def test_bad_dataset_input_is_one_line(tmp_path, args, words):
    r = train(tmp_path / "run", "--steps", "1", *args, ok=False)
    assert_one_line_error(r, *words, alone=False)
    assert not (tmp_path / "run" / "checkpoint.npz").exists()


def test_empty_folder_and_eval_window_errors(tmp_path):
    (tmp_path / "empty").mkdir()
    assert_one_line_error(train(tmp_path / "run", "--steps", "1", "--data", str(tmp_path / "empty"), ok=False),
                          "no LOBSTER file", alone=False)
    assert_one_line_error(runner.invoke(app, ["eval", "--window", "1:0"]), "--window 1:0")
    assert_one_line_error(runner.invoke(app, ["eval", "--window", "0:1", "--start", "0.2"]), "exclude each other")
    assert_one_line_error(runner.invoke(app, ["eval", "--data", str(tmp_path / "empty")]), "no LOBSTER file")


def test_data_info_on_a_folder(two_days):
    r = runner.invoke(app, ["data", "info", str(two_days), "--json"])
    assert r.exit_code == 0, r.output
    files = json.loads(r.output)["files"]
    assert [(f["label"], f["events"], f["levels"]) for f in files] == \
        [("AMZN_2012-06-21_5", 3000, 5), ("GOOG_2012-06-21_5", 3000, 5)]
    r = runner.invoke(app, ["data", "info", str(two_days / "*.zip")], env={"COLUMNS": "120"})
    text = " ".join(r.output.split())   # the title wraps where the temporary folder's path is long
    assert r.exit_code == 0 and "2 LOBSTER files" in text and "GOOG_2012-06-21_5" in text
    assert "09:30:00" in r.output
    assert_one_line_error(runner.invoke(app, ["data", "info", str(two_days / "*.csv")]), "matches no LOBSTER file")
