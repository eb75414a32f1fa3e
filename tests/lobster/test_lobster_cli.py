"""``alpharl data info``: the embedded sample by default, --json, and one-line errors with exit code 2."""
import json
import zipfile

from typer.testing import CliRunner

from alpharl.cli.app import app

runner = CliRunner()


def test_info_on_the_embedded_sample():
    r = runner.invoke(app, ["data", "info", "--no-cache"], env={"COLUMNS": "160"})
    assert r.exit_code == 0, r.output
    for text in ("AMZN", "2012-06-21", "30,000", "09:30:00.017 - 10:29:06.842", "$0.01", "spread (ticks)",
                 "depth level 1", "new limit order", "hidden execution", "unknown order ids"):
        assert text in r.output, text


def test_info_json():
    r = runner.invoke(app, ["data", "info", "--json", "--no-cache"])
    assert r.exit_code == 0, r.output
    d = json.loads(r.output)
    assert (d["ticker"], d["levels"], d["events"], d["tick"]) == ("AMZN", 5, 30_000, 100)
    assert sum(e["count"] for e in d["event_types"]) == d["events"]
    assert {e["type"] for e in d["event_types"]} <= {1, 2, 3, 4, 5, 7}
    spread = d["spread_ticks"]
    assert 1 <= spread["median"] <= spread["p99"] <= spread["max"] and spread["mean"] >= 1
    assert d["depth"]["ask_all_levels_mean"] >= d["depth"]["ask_level1_mean"] > 0
    assert 0 <= d["unknown_order_id_fraction"] < 1
    assert d["time_first"] < d["time_last"]


def test_info_on_a_path_with_levels(small_pair, tmp_path):
    archive = small_pair.zip(tmp_path / "pair.zip")
    r = runner.invoke(app, ["data", "info", str(archive), "--levels", "2", "--json", "--no-cache"])
    assert r.exit_code == 0, r.output
    assert json.loads(r.output)["levels"] == 2


def assert_one_line_error(r, *names):
    assert r.exit_code == 2, r.output
    lines = r.output.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("alpharl: error: "), r.output
    assert "Traceback" not in r.output
    assert r.exception is None or isinstance(r.exception, SystemExit)
    for name in names:
        assert name in lines[0], lines[0]


def test_missing_path_is_one_line_and_exit_2(tmp_path):
    missing = tmp_path / "missing.zip"
    assert_one_line_error(runner.invoke(app, ["data", "info", str(missing)]), str(missing))


def test_bad_row_is_one_line_and_exit_2(small_pair, tmp_path):
    small_pair.book[4][1] = "-3"
    archive = small_pair.zip(tmp_path / "bad.zip")
    r = runner.invoke(app, ["data", "info", str(archive), "--no-cache"])
    assert_one_line_error(r, f"bad.zip:{small_pair.orderbook_name} row 5")


def test_unreadable_zip_is_one_line_and_exit_2(tmp_path):
    broken = tmp_path / "broken.zip"
    with zipfile.ZipFile(broken, "w") as zf:
        zf.writestr("readme.txt", "no data")
    assert_one_line_error(runner.invoke(app, ["data", "info", str(broken)]), "broken.zip")
