"""alpharl.study without running trials: statistics on known inputs, option parsing, the trials'
command lines, the table and the summary."""
import math
import shutil
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest

from alpharl import isv as S
from alpharl import study as St
from alpharl.config import ConfigError
from alpharl.dataset import DatasetError
from alpharl.evaluate import ALL, BASELINES, POLICIES
from alpharl.signals import TRADE_TOTALS

CUTS = Path(__file__).parent / "data" / "lobster"


# ------------------------------------------------------------------ statistics
def test_bootstrap_ci_of_two_values_is_their_range():
    # Resample means of [0, 1]: 0 (p 1/4), 0.5 (1/2), 1 (1/4): the 2.5% and 97.5% quantiles are 0 and 1.
    assert St.bootstrap_ci([0.0, 1.0]) == (0.0, 1.0)


def test_bootstrap_ci_constant_single_and_deterministic(rng):
    assert St.bootstrap_ci([2.5, 2.5, 2.5]) == (2.5, 2.5)
    assert St.bootstrap_ci([4.0]) is None and St.bootstrap_ci([]) is None
    x = rng.normal(10.0, 3.0, size=7)
    lo, hi = St.bootstrap_ci(x)
    assert lo < x.mean() < hi
    assert St.bootstrap_ci(x) == (lo, hi)                       # fixed seed: the same interval
    assert St.bootstrap_ci(x, seed=St.BOOTSTRAP_SEED + 1) != (lo, hi)


def test_bootstrap_ci_matches_the_normal_interval_for_many_values(rng):
    x = rng.normal(-5.0, 2.0, size=400)
    lo, hi = St.bootstrap_ci(x)
    half = 1.96 * x.std(ddof=1) / math.sqrt(x.size)
    assert (hi - lo) / 2 == pytest.approx(half, rel=0.1)
    assert (lo + hi) / 2 == pytest.approx(x.mean(), abs=0.1 * half)


def test_mean_std():
    mean, std = St.mean_std([1.0, 2.0, 3.0, 4.0])
    assert mean == 2.5 and std == pytest.approx(math.sqrt(5 / 3))
    assert St.mean_std([7.0]) == (7.0, None) and St.mean_std([]) == (None, None)


def test_paired_comparison():
    c = St.paired_comparison([3.0, 1.0, 2.0], [1.0, 1.0, 5.0])
    assert (c["n"], c["wins"], c["ties"], c["losses"]) == (3, 1, 1, 1)
    assert c["mean_diff"] == pytest.approx(-1 / 3)
    lo, hi = c["diff_ci"]
    assert -3.0 <= lo <= c["mean_diff"] <= hi <= 2.0
    with pytest.raises(ValueError):
        St.paired_comparison([1.0], [1.0, 2.0])
    empty = St.paired_comparison([], [])
    assert empty["n"] == 0 and empty["mean_diff"] is None and empty["diff_ci"] is None


def test_ranks_share_ties_and_skip_missing():
    assert St.ranks({"a": 3.0, "b": 5.0, "c": 5.0, "d": None, "e": 1.0}) == {"a": 3, "b": 1, "c": 1, "d": None, "e": 4}


def _result(dataset, variant, seed, pnl, status=St.OK):
    policies = {p: {"pnl": v, "trades": 1} for p, v in pnl.items()} if status == St.OK else {}
    trial = f"/s/trials/{dataset}/{variant}/s{seed}"
    error = None if status == St.OK else {"stage": "train", "message": "boom", "exit_code": 2, "log": "train.log"}
    return {"dataset": dataset, "variant": variant, "seed": seed, "status": status, "policies": policies,
            "trial_dir": trial, "run_dir": f"{trial}/run", "error": error,
            "steps": 5, "b": 4, "backend": "numpy", "wall_seconds": 1.0}


def _pnls(greedy, hold=0.0, k=0.0):
    return {"sampled": -1.0 + k, "greedy": greedy, "hold": hold, "random": -3.0 + k, "periodic": -2.0 + k,
            "join": 1.0 + k, "improve": 0.5 + k}


def test_summarize_known_results():
    results = [_result("d", "v", 0, _pnls(2.0)), _result("d", "v", 1, _pnls(-1.0, k=1.0)),
               _result("d", "v", 2, _pnls(0.0), status=St.FAILED), _result("e", "v", 0, _pnls(5.0))]
    groups = St.summarize(results)
    assert [(g["dataset"], g["variant"], g["seeds"]) for g in groups] == [("d", "v", [0, 1]), ("e", "v", [0])]
    d = groups[0]["policies"]
    assert set(d) == set(ALL)
    assert d["greedy"]["n"] == 2 and d["greedy"]["mean"] == 0.5 and d["greedy"]["std"] == pytest.approx(math.sqrt(4.5))
    assert d["greedy"]["ci"] == (-1.0, 2.0)
    # means: sampled -0.5, greedy 0.5, hold 0, random -2.5, periodic -1.5, join 1.5, improve 1.0
    assert {p: d[p]["rank"] for p in ALL} == {"join": 1, "improve": 2, "greedy": 3, "hold": 4, "sampled": 5,
                                              "periodic": 6, "random": 7}
    vs = d["greedy"]["vs"]["join"]                      # greedy - join per seed: 1, -3
    assert (vs["wins"], vs["losses"], vs["mean_diff"]) == (1, 1, -1.0)
    assert d["greedy"]["vs"]["hold"]["wins"] == 1 and d["greedy"]["vs"]["random"]["wins"] == 2
    assert "vs" not in d["hold"] and set(d["sampled"]["vs"]) == set(BASELINES)
    e = groups[1]["policies"]
    assert e["greedy"]["mean"] == 5.0 and e["greedy"]["std"] is None and e["greedy"]["ci"] is None


def test_results_of_before_a_baseline_existed_still_summarise():
    """Trials evaluated before ``improve`` was a baseline (their result.json lacks it): n = 0 there, no pairs,
    the others as before; a study.json whose summary lacks the policy still prints."""
    old = [{k: v for k, v in _pnls(2.0).items() if k != "improve"}, {k: v for k, v in _pnls(1.0).items()
                                                                      if k != "improve"}]
    groups = St.summarize([_result("d", "v", s, p) for s, p in enumerate(old)])
    d = groups[0]["policies"]
    assert d["improve"]["n"] == 0 and d["greedy"]["vs"]["improve"]["n"] == 0 and d["greedy"]["n"] == 2
    assert d["greedy"]["vs"]["join"]["n"] == 2
    for g in groups:
        g["policies"].pop("improve")
    assert len(St.summary_tables({"summary": groups}, width=200)) == 1


# ------------------------------------------------------------------ options
def test_eval_window_and_seeds():
    assert St.eval_window_for((0.0, 0.8), None) == (0.8, 1.0)       # eval's held-out complement
    assert St.eval_window_for((0.2, 1.0), None) == (0.0, 0.2)
    assert St.eval_window_for((0.0, 0.6), (0.9, 1.0)) == (0.9, 1.0)
    with pytest.raises(St.StudyError, match="nothing held out"):
        St.eval_window_for((0.0, 1.0), None)
    with pytest.raises(St.StudyError, match="overlaps --train-window 0:0.8"):
        St.eval_window_for((0.0, 0.8), (0.7, 0.9))
    assert St.parse_seeds(None, None) == list(range(St.DEFAULT_SEEDS)) and St.parse_seeds(2, None) == [0, 1]
    assert St.parse_seeds(None, "3, 5,9") == [3, 5, 9]
    for n, lst, msg in ((0, None, "--seeds 0"), (2, "1", "exclude"), (None, "1,x", "integers"),
                        (None, "1,1", "repeated"), (None, "-1", ">= 0")):
        with pytest.raises(St.StudyError, match=msg):
            St.parse_seeds(n, lst)


def test_parse_variants(tmp_path):
    assert St.parse_variants([]) == [St.Variant("default", None)]
    good = tmp_path / "big.toml"
    good.write_text("minibatch = 128\n[sim]\ntaker_fee = 0.001\n")
    v = St.parse_variants(["base", f"big={good}"])
    assert v[0] == St.Variant("base", None) and v[1].name == "big" and v[1].config == str(good.resolve())
    assert len(v[1].sha256) == 64
    (tmp_path / "data.toml").write_text('data = "x.zip"\n')
    (tmp_path / "bad.toml").write_text("minibatch = 0\n")
    cases = ((["a b=x.toml"], "NAME"), (["a", "a"], "twice"), ([f"a={tmp_path / 'no.toml'}"], "no such config"),
             ([f"a={tmp_path / 'data.toml'}"], "'data'"))
    for values, msg in cases:
        with pytest.raises(St.StudyError, match=msg):
            St.parse_variants(values)
    with pytest.raises(ConfigError, match="--minibatch 0"):
        St.parse_variants([f"a={tmp_path / 'bad.toml'}"])


def test_data_files_and_datasets(tmp_path, monkeypatch):
    folder = tmp_path / "day"
    folder.mkdir()
    for name in ("AMZN_2012-06-21_1_cut.zip", "GOOG_2012-06-21_1_cut.zip"):
        shutil.copy(CUTS / name, folder / name)
    (folder / "notes.txt").write_text("not data")
    (folder / "AMZN_2012-06-21_34200000_57600000_message_1.csv").write_text("")
    (folder / "AMZN_2012-06-21_34200000_57600000_orderbook_1.csv").write_text("")
    files = [f.name for f in St.data_files(str(folder))]
    assert files == ["AMZN_2012-06-21_1_cut.zip", "AMZN_2012-06-21_34200000_57600000_message_1.csv",
                     "GOOG_2012-06-21_1_cut.zip"]
    assert [f.name for f in St.data_files(str(folder / "*.zip"))] == [files[0], files[2]]
    whole = St.parse_datasets([str(folder)], each_file=False)
    assert whole == [St.Dataset("day", str(folder.resolve()))]
    pattern = str(folder / "*.zip")
    assert St.parse_datasets([pattern], each_file=False)[0].data == pattern   # train --data gets the pattern
    monkeypatch.chdir(tmp_path)
    assert St.parse_datasets(["day/*.zip"], each_file=False)[0].data == pattern   # made absolute
    each = St.parse_datasets([str(folder / "*.zip"), str(CUTS / "GOOG_2012-06-21_1_cut.zip")], each_file=True)
    assert [d.name for d in each] == ["AMZN_2012-06-21_1_cut", "GOOG_2012-06-21_1_cut", "GOOG_2012-06-21_1_cut-2"]
    assert St.parse_datasets([], each_file=False) == [St.Dataset(St.EMBEDDED, None)]
    with pytest.raises(DatasetError, match="matches no LOBSTER file"):
        St.parse_datasets([str(folder / "*.parquet")], each_file=False)
    with pytest.raises(St.StudyError, match="no such file"):
        St.parse_datasets([str(tmp_path / "missing.zip")], each_file=False)


def test_trace_slots_are_isv_slots_and_the_trade_totals():
    names = {s.name for s in S.SLOTS}
    assert St.PLOT_SLOTS == ("lr_q", "lr_pi", "ppo_clip_eps", "v_blend_alpha")
    assert St.TRACE_SLOTS[:4] == St.PLOT_SLOTS and set(St.TRACE_SLOTS) <= names | set(TRADE_TOTALS)
    assert set(TRADE_TOTALS) <= set(St.TRACE_SLOTS)
    assert len(set(St.TRACE_SLOTS)) == len(St.TRACE_SLOTS)


# ------------------------------------------------------------------ the trials' command lines
def _plan(tmp_path, **kw):
    ds = [St.Dataset("amzn", str(CUTS / "AMZN_2012-06-21_1_cut.zip")), St.Dataset(St.EMBEDDED, None)]
    vs = [St.Variant("default", None), St.Variant("big", "/cfg/big.toml", "0" * 64)]
    return St.plan_study(tmp_path / "out", ds, vs, [0, 7], **kw)


def _flags(argv):
    return {a: argv[i + 1] if i + 1 < len(argv) and not argv[i + 1].startswith("--") else True
            for i, a in enumerate(argv) if a.startswith("--")}


def test_plan_order_and_folders(tmp_path):
    plan = _plan(tmp_path, steps=5, b=4, backend="numpy")
    assert [t.label for t in plan.trials][:3] == ["amzn/default/s0", "amzn/default/s7", "amzn/big/s0"]
    assert len(plan.trials) == 8
    assert plan.trials[0].run_dir == (tmp_path / "out").resolve() / "trials" / "amzn" / "default" / "s0" / "run"
    for bad, msg in ((dict(steps=0), "--steps 0"), (dict(b=0), "--b 0"), (dict(eval_steps=0), "--eval-steps 0")):
        with pytest.raises(St.StudyError, match=msg):
            _plan(tmp_path, **bad)


def test_trial_argv(tmp_path):
    plan = _plan(tmp_path, steps=5, b=4, backend="numpy", train_window=(0.1, 0.7), eval_window=(0.7, 0.9),
                 eval_steps=20)
    spec = plan.trials[3]            # amzn / big / seed 7
    argv = St.trial_argv(spec, "train")
    assert argv[1:4] == ["-m", "alpharl.cli", "train"]
    f = _flags(argv)
    assert f == {"--run-dir": str(spec.run_dir), "--quiet": True, "--seed": "7", "--data": spec.dataset.data,
                 "--config": "/cfg/big.toml", "--b": "4", "--train-window": "0.1:0.7", "--steps": "5",
                 "--backend": "numpy"}
    assert St.trial_argv(spec, "train") == argv                      # one spelling, every time
    resume = _flags(St.trial_argv(spec, "train", resume=True))
    assert resume == {"--resume": str(spec.run_dir), "--quiet": True, "--steps": "5", "--backend": "numpy"}
    ev = St.trial_argv(spec, "eval")
    assert ev[3:5] == ["eval", str(spec.run_dir)]
    assert _flags(ev) == {"--json": True, "--window": "0.7:0.9", "--b": "4", "--steps": "20",
                          "--backend": "numpy"}
    bare = St.plan_study(tmp_path / "o2", [St.Dataset(St.EMBEDDED, None)], [St.Variant("default", None)], [0],
                         backend="auto").trials[0]
    assert _flags(St.trial_argv(bare, "train")) == {"--run-dir": str(bare.run_dir), "--quiet": True, "--seed": "0",
                                                     "--train-window": "0:0.8", "--backend": "auto"}
    assert _flags(St.trial_argv(bare, "eval")) == {"--json": True, "--window": "0.8:1"}
    one = ([St.Dataset(St.EMBEDDED, None)], [St.Variant("default", None)], [0])
    gpu_cpu = St.plan_study(tmp_path / "o3", *one, backend="cuda", eval_backend="numpy").trials[0]
    assert _flags(St.trial_argv(gpu_cpu, "train"))["--backend"] == "cuda"
    assert _flags(St.trial_argv(gpu_cpu, "eval"))["--backend"] == "numpy"
    with pytest.raises(St.StudyError, match="--eval-backend 'gpu'"):
        St.plan_study(tmp_path / "o4", *one, eval_backend="gpu")
    with pytest.raises(ValueError):
        St.trial_argv(bare, "export")
    assert St.TrialSpec.from_dict(spec.to_dict()) == spec


# ------------------------------------------------------------------ files
def test_table_and_study_json(tmp_path):
    plan = St.plan_study(tmp_path, [St.Dataset("d", None)], [St.Variant("v", None)], [0, 1])
    results = [_result("d", "v", 0, _pnls(2.0)), _result("d", "v", 1, {}, status=St.FAILED)]
    for r, spec in zip(results, plan.trials):
        r["trial_dir"], r["run_dir"] = spec.trial_dir, str(spec.run_dir)
    results[0]["policies"]["join"]["book"] = {"bid": 0.5, "ask": 0.25, "two_sided": 0.125, "position": 0.3,
                                              "at_limit": 0.0}
    rows = St.table_rows(results, plan.out)
    assert len(rows) == len(ALL) + 1
    assert [r["policy"] for r in rows[:len(ALL)]] == list(ALL)
    assert {r["kind"] for r in rows[:len(ALL)] if r["policy"] in POLICIES} == {"policy"}
    failed = rows[-1]
    assert failed["policy"] is None and failed["status"] == St.FAILED and failed["error"] == "train: boom"
    St.write_table(results, plan.out)
    t = pq.read_table(plan.out / St.TABLE_FILE)
    assert t.schema == St.TABLE_SCHEMA and t.num_rows == len(rows)
    assert t.column("trial_dir").to_pylist()[0] == "trials/d/v/s0"
    join = ALL.index("join")   # eval's book presence, where the result has it (older results: null)
    assert [t.column(c)[join].as_py() for c, _ in St.BOOK_COLUMNS] == [0.5, 0.25, 0.125, 0.3, 0.0]
    assert t.column("book_two_sided")[ALL.index("hold")].as_py() is None
    content = St.study_json(plan, results, 3.0)
    assert content["trials_ok"] == 1 and content["trials_failed"] == 1
    assert content["trials"][0]["trial_dir"] == "trials/d/v/s0" and "asked" not in content["trials"][0]
    assert content["bootstrap"] == {"resamples": St.BOOTSTRAP_RESAMPLES, "seed": St.BOOTSTRAP_SEED,
                                    "level": St.CI_LEVEL, "method": "percentile bootstrap of the mean over seeds"}
    assert content["summary"][0]["policies"]["greedy"]["mean"] == 2.0
    tables = St.summary_tables(content, width=200)
    assert len(tables) == 1 and tables[0].row_count == len(ALL)


def test_prepare_refuses_a_trial_asked_differently(tmp_path):
    plan = St.plan_study(tmp_path, [St.Dataset("d", None)], [St.Variant("v", None)], [0], steps=5)
    todo, done = St.prepare(plan)
    assert todo == plan.trials and done == {}
    again = St.plan_study(tmp_path, [St.Dataset("d", None)], [St.Variant("v", None)], [0], steps=6)
    with pytest.raises(St.StudyError, match="steps = 5, now 6"):
        St.prepare(again)
    ok = dict(_result("d", "v", 0, _pnls(1.0)), asked=plan.trials[0].asked())
    St.record(dict(ok, trial_dir=plan.trials[0].trial_dir))
    todo, done = St.prepare(plan)
    assert todo == [] and list(done) == ["d/v/s0"]
    St.record(dict(ok, status=St.FAILED, trial_dir=plan.trials[0].trial_dir))
    assert St.prepare(plan)[0] == plan.trials                        # a failed trial runs again


def test_error_line():
    assert St._error_line("progress\nalpharl: error: --data x: no such file\n", 2) == "--data x: no such file"
    assert St._error_line("a\nSegmentation fault\n", -11) == "Segmentation fault (exit code -11)"
    assert St._error_line("", 1) == "no output (exit code 1)"


def test_png_without_results(tmp_path):
    pytest.importorskip("matplotlib", reason="study.png needs matplotlib (the plot extra)")
    plan = St.plan_study(tmp_path, [St.Dataset("d", None)], [St.Variant("v", None)], [0])
    results = [dict(_result("d", "v", 0, _pnls(1.0)), trace={"step": [50, 100], "lr_q": [1e-3, 2e-3],
                                                              "ppo_clip_eps": [0.2, 0.1]})]
    St.save_png(plan, results, St.summarize(results), tmp_path / "s.png")
    assert (tmp_path / "s.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    np.testing.assert_equal(St.summarize([]), [])


def test_progress_live_and_plain():
    from rich.console import Console

    ok, bad = _result("d", "v", 0, _pnls(2.0)), _result("d", "v", 1, {}, status=St.FAILED)
    for live in (True, False):
        console = Console(record=True, force_terminal=live, width=100)
        p = St.StudyProgress(console=console)
        assert p.live is live
        p.start(3, 1)
        p.trial_done(ok)
        p.trial_done(bad)
        p.stop()
        text = console.export_text()
        assert "1 of 3 trials already done" in text
        assert "d/v/s0 ok" in text and "greedy 2" in text and "d/v/s1 FAILED in train: boom" in text
        assert ("trial 3/3" in text) is not live          # plain lines count; the live bar shows the count
