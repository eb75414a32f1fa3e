"""``alpharl diag``: summary table, slot selection, terminal charts, JSON, PNG, two-run comparison."""
import json

from typer.testing import CliRunner

from alpharl import isv as S
from alpharl.cli.app import app
from alpharl.rundir import DIAG_FILE
from cli_helpers import make_run

runner = CliRunner()
WIDE = {"COLUMNS": "220"}


def test_summary_table_default_columns(tmp_path, rng):
    run = make_run(tmp_path / "run", rows=6, rng=rng)
    r = runner.invoke(app, ["diag", str(run)], env=WIDE)
    assert r.exit_code == 0, r.output
    for text in ("lr_q", "loss_q", "v_blend_alpha", "steps_per_s", "pnl/total", "trades/win_rate", "first", "trend",
                 "6 rows, steps 10..60"):
        assert text in r.output, text
    assert "obs_kl" not in r.output          # raw observations are left out by default


def test_json_summary_and_trends(tmp_path, rng):
    run = make_run(tmp_path / "run", rows=6, rng=rng)
    r = runner.invoke(app, ["diag", str(run), "--json"])
    assert r.exit_code == 0, r.output
    d = json.loads(r.output)
    (one,) = d["runs"]
    assert (one["rows"], one["first_step"], one["last_step"], one["b"]) == (6, 10, 60, 2)
    cols = one["columns"]
    assert cols["loss_q"]["trend"] == "↓" and cols["loss_q"]["first"] == 3.0
    assert abs(cols["loss_q"]["last"] - 2.5) < 1e-6 and abs(cols["loss_q"]["slope"] - (-10.0)) < 1e-4
    assert cols["lr_q"]["trend"] == "↑" and cols["pnl/total"]["max"] == 60.0
    assert "compare" not in d
    assert {c for c in cols} == {c for c in cols if not c.startswith("obs_")}


def test_slots_selection_and_charts(tmp_path, rng):
    run = make_run(tmp_path / "run", rows=12, rng=rng)
    r = runner.invoke(app, ["diag", str(run), "--slots", "lr_*,v_blend,pnl", "--json"])
    cols = set(json.loads(r.output)["runs"][0]["columns"])
    assert cols == {"lr_q", "lr_pi", "lr_v", "lr_bce", "lr_aux", "lr_enc",
                    "v_blend_alpha", "v_track_err_ema", "v_scalar_mag_ema", "pnl/mean", "pnl/total"}
    r = runner.invoke(app, ["diag", str(run), "--slots", "loss_q", "--width", "20", "--height", "4"], env=WIDE)
    assert r.exit_code == 0, r.output
    assert "█" in r.output and "└" + "─" * 12 in r.output   # 12 rows fit in 20 columns: one column per row
    r = runner.invoke(app, ["diag", str(run), "--slots", "isv.obs_kl", "--json"])
    assert set(json.loads(r.output)["runs"][0]["columns"]) == {"obs_kl"}
    # a metric by its name after the prefix
    r = runner.invoke(app, ["diag", str(run), "--slots", "win_rate,tot*", "--json"])
    assert set(json.loads(r.output)["runs"][0]["columns"]) == {"trades/win_rate", "pnl/total"}


def test_compare_two_runs(tmp_path, rng):
    a = make_run(tmp_path / "a", rows=4, rng=rng)
    b = make_run(tmp_path / "b", rows=8, rng=rng)
    r = runner.invoke(app, ["diag", str(a), str(b), "--slots", "pnl/total,loss_q", "--json"])
    assert r.exit_code == 0, r.output
    d = json.loads(r.output)
    assert [x["rows"] for x in d["runs"]] == [4, 8]
    c = d["compare"]["pnl/total"]
    assert (c["a"], c["b"], c["delta"], c["rel"]) == (40.0, 80.0, 40.0, 1.0)
    r = runner.invoke(app, ["diag", str(a), str(b), "--slots", "pnl/total"], env=WIDE)
    assert r.exit_code == 0 and "B - A" in r.output and "+100.0%" in r.output


def test_png(tmp_path, rng):
    a = make_run(tmp_path / "a", rows=5, rng=rng)
    b = make_run(tmp_path / "b", rows=5, rng=rng)
    out = tmp_path / "chart.png"
    r = runner.invoke(app, ["diag", str(a), str(b), "--slots", "lr_q,loss_q", "--png", str(out)])
    assert r.exit_code == 0, r.output
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_reads_the_diagnostics_file_itself_and_a_torn_tail(tmp_path, rng):
    run = make_run(tmp_path / "run", rows=5, rng=rng)
    path = run / DIAG_FILE
    path.write_bytes(path.read_bytes()[:-(8 + 7)])   # the last row torn (8: the end marker after it)
    r = runner.invoke(app, ["diag", str(path), "--json", "--slots", "loss_q"])
    assert r.exit_code == 0, r.output
    assert json.loads(r.output)["runs"][0]["rows"] == 4


def test_header_only_run_has_no_rows_yet(tmp_path):
    from alpharl.diag import DiagnosticsWriter

    DiagnosticsWriter(tmp_path, ["pnl/mean"]).close()
    r = runner.invoke(app, ["diag", str(tmp_path)], env=WIDE)
    assert r.exit_code == 0 and "no rows yet" in r.output
    r = runner.invoke(app, ["diag", str(tmp_path), "--json"])
    assert json.loads(r.output)["runs"][0]["rows"] == 0


def test_every_slot_reachable_by_group(tmp_path, rng):
    run = make_run(tmp_path / "run", rows=2, rng=rng)
    for group in S.GROUPS:
        r = runner.invoke(app, ["diag", str(run), "--slots", group, "--json"])
        cols = set(json.loads(r.output)["runs"][0]["columns"])
        assert {s.name for s in S.SLOTS if s.group == group} <= cols, group


def test_summary_fits_a_narrow_terminal(tmp_path, rng):
    """On 80 columns the summary leaves out group, min, max and shortens the sparkline, but shows every
    number whole and no line is wider than the terminal; on a wide one it shows every column."""
    from rich.cells import cell_len

    from alpharl import report

    run = make_run(tmp_path / "run", rows=12, rng=rng)
    r = runner.invoke(app, ["diag", str(run), "--slots", "loss_q,pnl/total,lr_q", "--no-chart"], env={"COLUMNS": "80"})
    assert r.exit_code == 0, r.output
    lines = r.output.splitlines()
    assert max(cell_len(line) for line in lines) <= 80
    header = next(line for line in lines if "first" in line)
    assert "last" in header and "slope" in header and "history" in header
    assert "min" not in header and "group" not in header
    for value in ("3", "1.9", "120"):   # loss_q first and last, pnl/total last
        assert any(f" {value} " in line for line in lines), value
    wide = report.summary_layout(["loss_q"], 220)
    assert wide["minmax"] and wide["group"] and wide["spark"] == 24
    assert report.summary_layout(["loss_q"], None) == {"name": 6, "minmax": True, "group": True, "spark": 24}
    narrow = report.summary_layout(["loss_q"], 40)
    assert not narrow["minmax"] and not narrow["group"] and narrow["spark"] == 0
    # two runs side by side: the same rule
    other = make_run(tmp_path / "other", rows=6, rng=rng)
    r = runner.invoke(app, ["diag", str(run), str(other), "--slots", "loss_q,pnl/total", "--no-chart"],
                      env={"COLUMNS": "80"})
    assert r.exit_code == 0, r.output
    lines = r.output.splitlines()
    assert max(cell_len(line) for line in lines) <= 80
    assert any(" 120 " in line and " 60 " in line and " -60 " in line for line in lines)   # A, B, B - A whole
    assert report.compare_layout(["loss_q"], 220) == {"name": 6, "group": True, "spark": 16}
    assert report.compare_layout(["loss_q"], 80)["spark"] == 0
