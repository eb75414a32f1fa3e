"""benchmarks/studies/ablation.py: the ablation table from real (small) studies, two variants, with the
in-sample targets read from the trials' diagnostics."""
import json
from pathlib import Path

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
    assert all(line.endswith("| - | - |") for line in ab.markdown(rows_old, [], "greedy").splitlines()
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
