import json

from typer.testing import CliRunner

from alpharl import isv as S
from alpharl.cli.app import app

runner = CliRunner()


def test_help_lists_commands():
    r = runner.invoke(app, ["--help"])
    assert r.exit_code == 0 and "slots" in r.output


def test_slots_table():
    r = runner.invoke(app, ["slots"], env={"COLUMNS": "200"})
    assert r.exit_code == 0
    for name in ("v_blend_alpha", "lr_q", "k_loop_mult"):
        assert name in r.output


def test_slots_json_round_trip():
    r = runner.invoke(app, ["slots", "--json"])
    assert r.exit_code == 0
    d = json.loads(r.output)
    assert d["RL_SLOTS_END"] == S.RL_SLOTS_END
    assert {row["name"]: row["index"] for row in d["slots"]} == {s.name: s.index for s in S.SLOTS}


def test_slots_filter_and_bad_group():
    r = runner.invoke(app, ["slots", "--group", "lr_*", "--json"])
    assert {row["name"] for row in json.loads(r.output)["slots"]} == {"lr_q", "lr_pi", "lr_v", "lr_bce", "lr_aux", "lr_enc"}
    r = runner.invoke(app, ["slots", "--group", "nope"])
    assert r.exit_code != 0
