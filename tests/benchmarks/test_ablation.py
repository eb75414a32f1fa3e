"""benchmarks/studies/ablation.py: the ablation table from real (small) studies, two variants, with the
in-sample targets read from the trials' diagnostics."""
import json
from pathlib import Path

import numpy as np
import pytest
from support import load_benchmark
from typer.testing import CliRunner

from alpharl.cli.app import app

ROOT = Path(__file__).resolve().parents[2]
CUT = ROOT / "tests" / "data" / "lobster" / "AMZN_2012-06-21_5_cut.zip"


def _ablation():
    return load_benchmark("studies/ablation")


@pytest.fixture(scope="module")
def small_study(tmp_path_factory):
    root = tmp_path_factory.mktemp("abl")
    horizon = root / "horizon.toml"
    horizon.write_text('diag_every = 2\n[sim]\nepisode_end = "horizon"\n')
    out = root / "study"
    res = CliRunner().invoke(app, ["study", "--data", str(CUT), "--out", str(out), "--seeds", "2", "--steps", "8",
                                   "--b", "4", "--backend", "numpy", "--eval-steps", "12", "--no-png",
                                   "--variant", "plain", "--variant", f"horizon={horizon}"])
    assert res.exit_code == 0, res.output
    return out


def test_table_rows_and_targets(small_study, tmp_path):
    ab = _ablation()
    md = tmp_path / "a.md"
    assert ab.main([str(small_study), "--policy", "greedy", "--out", str(md)]) == 0
    text = md.read_text()
    rows = [line for line in text.splitlines() if line.startswith("| AMZN_2012-06-21_5_cut |")]
    # held-out rows (2 variants) and in-sample rows (the horizon variant kept 4 diagnostic rows a run)
    assert sum(" plain " in r for r in rows) >= 1 and sum(" horizon " in r for r in rows) == 2
    study = json.loads((small_study / "study.json").read_text())
    held = ab.held_out_rows(study, "greedy")
    assert {r["variant"] for r in held} == {"plain", "horizon"} and all(r["n"] == 2 for r in held)
    for r in held:
        assert r["diff"] == pytest.approx(r["policy"] - r["join"])   # paired by seed: the means' difference
        assert r["improve"] is not None and 0 <= r["above_improve"] <= r["n"]
    # a study from before the improve baseline: its columns read "-"
    def without_improve(policies):
        return {k: dict(v, vs={b: c for b, c in v.get("vs", {}).items() if b != "improve"})
                for k, v in policies.items() if k != "improve"}
    old = dict(study, summary=[dict(s, policies=without_improve(s["policies"])) for s in study["summary"]])
    rows_old = ab.held_out_rows(old, "greedy")
    assert all(r["improve"] is None and r["above_improve"] is None for r in rows_old)
    assert all("| - | - |" in line for line in ab.markdown(rows_old, [], "greedy").splitlines()
               if line.startswith("| AMZN_2012-06-21_5_cut |"))
    targets = {r["variant"]: r for r in ab.target_rows(small_study, study)}
    assert targets["horizon"]["runs"] == 2 and 0.0 <= targets["horizon"]["lr_q_off"] <= 1.0


def test_targets_from_the_trials_traces_once_the_run_folders_are_gone(small_study, tmp_path):
    """A study copied without its run folders (result.json only) gives the same in-sample targets, read
    from the traces each result.json keeps."""
    import shutil
    ab = _ablation()
    study = json.loads((small_study / "study.json").read_text())
    before = {r["variant"]: r for r in ab.target_rows(small_study, study)}
    copy = tmp_path / "copy"
    shutil.copytree(small_study, copy, ignore=shutil.ignore_patterns("run"))
    assert not list(copy.rglob("diagnostics.arrows"))
    moved = dict(study, trials=[dict(t, run_dir=str(tmp_path / "gone" / t["variant"] / str(t["seed"])))
                                for t in study["trials"]])
    after = {r["variant"]: r for r in ab.target_rows(copy, moved)}
    assert after.keys() == before.keys() and after["horizon"]["runs"] == 2
    for v in before:
        for key, x in before[v].items():
            assert after[v][key] == pytest.approx(x), (v, key)


def test_missing_study_is_one_line(tmp_path, capsys):
    assert _ablation().main([str(tmp_path)]) == 2
    assert "no study.json" in capsys.readouterr().err


def test_block_trend_is_the_least_squares_change_with_a_t_interval(rng):
    ab = _ablation()
    t = np.arange(10, dtype=np.float64)
    exact = ab.block_trend(3.0 + 0.5 * t, np.ones(10))
    assert exact == pytest.approx((5.0, 5.0, 5.0))            # slope 0.5 a block x 10 blocks; no scatter
    noisy = 3.0 + 0.5 * t + rng.normal(0.0, 2.0, 10)
    change, lo, hi = ab.block_trend(noisy, np.ones(10))
    assert change == pytest.approx(np.polyfit(t, noisy, 1)[0] * 10)
    assert lo < change < hi and hi - lo == pytest.approx(2 * (change - lo))
    assert ab.block_trend(noisy[:2], np.ones(2)) is None
    assert ab.block_trend(noisy, np.r_[np.ones(9), 0.0]) is None


def test_realised_trends_from_the_run_totals(rng):
    """Cumulative totals whose blocks close trades at a known PnL a trade: the per-trade trend falls while the
    PnL a step rises (more trades, each earning less), each as the blocks say."""
    ab = _ablation()
    blocks, rows_per_block = ab.TREND_BLOCKS, 7
    per_trade = 100.0 - 4.0 * np.arange(blocks)                   # $ a trade, falling 40 over the half
    trades = 10.0 + 2.0 * np.arange(blocks)                       # trades a block, rising
    steps = np.arange(blocks * rows_per_block + 1) * 50.0
    d_pnl = np.repeat(per_trade * trades / rows_per_block, rows_per_block)
    d_n = np.repeat(trades / rows_per_block, rows_per_block)
    pnl_total, n_total = np.r_[0.0, np.cumsum(d_pnl)] + 1e4, np.r_[0.0, np.cumsum(d_n)] + 123
    r = ab.realised_trends(steps, pnl_total, n_total)
    assert r["pnl_per_trade_trend"] == pytest.approx(-40.0) and r["pnl_per_trade_trend_ci"] == pytest.approx([-40.0, -40.0])
    step_pnl = per_trade * trades / (rows_per_block * 50.0)
    assert r["pnl_per_step_trend"] == pytest.approx(np.polyfit(np.arange(blocks), step_pnl, 1)[0] * blocks)
    assert r["pnl_per_step_trend"] > 0 and r["pnl_per_trade"] == pytest.approx((d_pnl.sum()) / d_n.sum())
    flat = n_total.copy()
    flat[rows_per_block:2 * rows_per_block + 1] = flat[rows_per_block]   # the second block closes no trade
    assert ab.realised_trends(steps, pnl_total, flat) is None


def test_trade_totals_reach_the_targets_table(small_study):
    """The trials' diagnostics hold the closed trades' run totals, so every run's targets carry the realised
    trends' entry (None where the half's blocks closed no trade), and the table has their columns."""
    ab = _ablation()
    study = json.loads((small_study / "study.json").read_text())
    for trial in study["trials"]:
        t = ab.run_targets(small_study / trial["run_dir"])
        if t is not None:
            assert "realised" in t
    rows = ab.target_rows(small_study, study)
    text = ab.markdown([], rows, "sampled")
    assert "realised $ a trade: trend (runs falling)" in text
    for r in rows:
        assert 0 <= r["pnl_per_trade_falling"] <= r["realised_runs"] <= r["runs"]


def test_against_a_variant_is_paired_by_dataset_and_seed(small_study, tmp_path, capsys):
    """--against plain: horizon's held-out PnL minus plain's, seed by seed, with the study's paired bootstrap;
    a seed only one variant ran is left out; an unknown variant is a one-line error."""
    from alpharl.study import paired_comparison
    ab = _ablation()
    study = json.loads((small_study / "study.json").read_text())
    values = ab.trial_values(study, "sampled")
    key = ("AMZN_2012-06-21_5_cut", "horizon")
    ref = ("AMZN_2012-06-21_5_cut", "plain")
    assert set(values[key]) == set(values[ref]) == {0, 1}
    want = paired_comparison([values[key][0], values[key][1]], [values[ref][0], values[ref][1]])
    (row,) = ab.against_rows(values, "plain")
    assert row["variant"] == "horizon" and row["seeds"] == [0, 1]
    assert row["diff"] == pytest.approx(want["mean_diff"]) and row["diff_ci"] == pytest.approx(want["diff_ci"])
    assert row["wins"] == want["wins"] and row["ties"] == want["ties"]
    shifted = {key: {0: values[key][0] + 7.0, 1: values[key][1] + 7.0, 5: 1e9}, ref: values[ref]}
    (moved,) = ab.against_rows(shifted, "plain")
    assert moved["seeds"] == [0, 1] and moved["diff"] == pytest.approx(row["diff"] + 7.0)
    md = tmp_path / "a.md"
    runs = tmp_path / "runs.json"
    assert ab.main([str(small_study), "--against", "plain", "--runs", str(runs), "--out", str(md)]) == 0
    assert "each variant against `plain`" in md.read_text()
    per_run = json.loads(runs.read_text())
    assert {(r["variant"], r["seed"]) for r in per_run} == {("horizon", 0), ("horizon", 1)}
    assert all(0.0 <= r["k_above_1_run"] <= 1.0 for r in per_run)
    assert ab.main([str(small_study), "--against", "nosuch"]) == 2
    assert "--against nosuch" in capsys.readouterr().err


def test_runs_pinned_at_k_max_are_counted(small_study):
    """A run counts as pinned when K is at K_MAX in at least K_PINNED_SHARE of its second half's rows."""
    ab = _ablation()
    study = json.loads((small_study / "study.json").read_text())
    runs = ab.per_run_targets(small_study, study)
    assert runs and all(r["k_at_max"] == 0.0 for r in runs)   # 8 steps: K never leaves 1
    runs[0] = dict(runs[0], k_at_max=ab.K_PINNED_SHARE)
    (row,) = ab.group_targets(runs)
    assert row["k_pinned"] == 1 and row["runs"] == len(runs)
    assert " (1) |" in ab.markdown([], [row], "sampled")


def test_against_a_variant_alone_says_so(small_study, tmp_path):
    """--against a variant no other variant shares a day and seed with: the section says so instead of
    leaving out its table."""
    ab = _ablation()
    study = json.loads((small_study / "study.json").read_text())
    alone = dict(study, trials=[t for t in study["trials"] if t["variant"] == "plain"])
    (tmp_path / "alone").mkdir()
    (tmp_path / "alone" / "study.json").write_text(json.dumps(alone))
    md = tmp_path / "a.md"
    assert ab.main([str(tmp_path / "alone"), "--against", "plain", "--out", str(md)]) == 0
    assert "no other variant ran a day and seed that `plain` ran" in md.read_text()


def test_one_sided_seeds_from_eval_action_shares(small_study):
    """The larger side's quoting share (join + improve) of each seed's held-out steps; a seed counts as
    one-sided at ONE_SIDED_SHARE or above; an evaluation without action shares counts in no column."""
    ab = _ablation()
    share = {"hold": 0.02, "join_bid": 0.05, "improve_bid": 0.83, "join_ask": 0.04, "improve_ask": 0.06}
    assert ab.one_side_share(share) == pytest.approx(0.88)
    assert ab.one_side_share(dict(share, improve_bid=0.30, improve_ask=0.59)) == pytest.approx(0.63)
    assert ab.one_side_share(None) is None and ab.one_side_share({}) is None
    study = json.loads((small_study / "study.json").read_text())
    counts = ab.one_sided_seeds(study, "sampled")
    assert set(counts) == {("AMZN_2012-06-21_5_cut", "plain"), ("AMZN_2012-06-21_5_cut", "horizon")}
    for n, k in counts.values():
        assert k == 2 and 0 <= n <= 2
    lopsided = json.loads(json.dumps(study))
    for t in lopsided["trials"]:
        if t["variant"] == "plain" and t["seed"] == 0:
            t["policies"]["sampled"]["action_share"] = share
        if t["variant"] == "plain" and t["seed"] == 1:
            del t["policies"]["sampled"]["action_share"]
    assert ab.one_sided_seeds(lopsided, "sampled")[("AMZN_2012-06-21_5_cut", "plain")] == (1, 1)
    rows = {r["variant"]: r for r in ab.held_out_rows(lopsided, "sampled")}
    assert rows["plain"]["one_sided"] == (1, 1)
    line = next(l for l in ab.markdown(list(rows.values()), [], "sampled").splitlines() if "| plain |" in l)
    assert "| 1/1 | " in line


def test_two_sided_means_from_eval_book(small_study):
    """The mean over seeds of eval's book.two_sided, the policy's beside improve's; a trial without a book
    counts in neither; a study without any reads "-"."""
    ab = _ablation()
    study = json.loads((small_study / "study.json").read_text())
    key = ("AMZN_2012-06-21_5_cut", "plain")
    edited = json.loads(json.dumps(study))
    for t in edited["trials"]:
        if t["variant"] == "plain":
            t["policies"]["sampled"]["book"]["two_sided"] = 0.25 if t["seed"] == 0 else 0.5
            t["policies"]["improve"]["book"]["two_sided"] = 0.375
    assert ab.two_sided_means(edited, "sampled")[key] == pytest.approx(0.375)
    rows = {r["variant"]: r for r in ab.held_out_rows(edited, "sampled")}
    assert rows["plain"]["two_sided"] == pytest.approx(0.375) and rows["plain"]["improve_two_sided"] == 0.375
    line = next(l for l in ab.markdown(list(rows.values()), [], "sampled").splitlines() if "| plain |" in l)
    assert line.endswith("| 0.38 (0.38) |")
    for t in edited["trials"]:
        if t["variant"] == "plain" and t["seed"] == 1:
            del t["policies"]["sampled"]["book"]
    assert ab.two_sided_means(edited, "sampled")[key] == pytest.approx(0.25)
    for t in edited["trials"]:
        for p in t["policies"].values():
            p.pop("book", None)
    rows = ab.held_out_rows(edited, "sampled")
    assert all(r["two_sided"] is None and r["improve_two_sided"] is None for r in rows)
    assert all(l.endswith("| - |") for l in ab.markdown(rows, [], "sampled").splitlines()
               if l.startswith("| AMZN_2012-06-21_5_cut |") and "| plain |" in l)


def test_one_seed_has_no_interval_and_excludes_no_loss(small_study):
    """A study of one seed per day has no bootstrap interval (ci None): its rows print "-" and the day
    does not count among those whose interval excludes a loss."""
    ab = _ablation()
    study = json.loads((small_study / "study.json").read_text())
    held = ab.held_out_rows(study, "greedy")
    one = [dict(r, n=1, policy=abs(r["policy"]) + 1.0, policy_ci=None) for r in held]
    text = ab.markdown(one, [], "greedy")
    line = next(l for l in text.splitlines() if l.startswith("| AMZN_2012-06-21_5_cut | plain |"))
    assert " - | " in line
    counts = next(l for l in text.splitlines() if l.startswith("| plain |"))
    assert counts.split("|")[3].strip() == "0/1"


def test_seeds_of_one_pair_in_two_folders_are_one_row(small_study, tmp_path, capsys):
    """A study extended later with more seeds (another folder): the pair's rows over all its seeds, its
    summary recomputed from the pooled trials as one study of them would have it; a pair in one folder keeps
    its stored summary; a seed in two folders is a one-line error."""
    from alpharl.study import summarize
    ab = _ablation()
    study = json.loads((small_study / "study.json").read_text())
    first = dict(study, trials=[t for t in study["trials"] if t["seed"] == 0 or t["variant"] == "plain"])
    later = dict(study, trials=[t for t in study["trials"] if t["seed"] == 1 and t["variant"] == "horizon"])
    first["summary"] = summarize(first["trials"])
    later["summary"] = summarize(later["trials"])
    merged = ab.merge_studies([first, later])
    rows = {r["variant"]: r for st in merged for r in ab.held_out_rows(st, "sampled")}
    whole = {r["variant"]: r for r in ab.held_out_rows(study, "sampled")}
    assert rows["horizon"]["n"] == 2
    for key in ("policy", "policy_ci", "join", "diff", "diff_ci", "above_join", "below_hold"):
        assert rows["horizon"][key] == pytest.approx(whole["horizon"][key])
        assert rows["plain"][key] == pytest.approx(whole["plain"][key])
    assert ab.merge_studies([study]) == [study]                       # nothing split: untouched
    for name, st in (("a", first), ("b", later)):
        (tmp_path / name).mkdir()
        (tmp_path / name / "study.json").write_text(json.dumps(st))
    md = tmp_path / "m.md"
    assert ab.main([str(tmp_path / "a"), str(tmp_path / "b"), "--out", str(md)]) == 0
    assert sum(line.startswith("| AMZN_2012-06-21_5_cut | horizon | 2 |") for line in md.read_text().splitlines()) == 1
    assert ab.main([str(tmp_path / "a"), str(tmp_path / "a")]) == 2
    assert "seed 0 is in two studies" in capsys.readouterr().err
