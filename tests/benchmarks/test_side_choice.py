"""benchmarks/side_choice.py: the (position, book) classes and action shares counted by hand on a made-up
pass, and a held-out pass of a small trained run (pi's columns are probabilities; baselines have none)."""
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
from support import load_benchmark

from alpharl.actions import Action as A
from alpharl.config import TrainConfig
from alpharl.run import train

CUT = Path(__file__).resolve().parents[2] / "tests" / "data" / "lobster" / "AMZN_2012-06-21_5_cut.zip"


def test_classes_and_missing_side_by_hand():
    sc = load_benchmark("side_choice")
    # one backtest, 6 steps, limit 200; the state each action saw is the one after the step before
    inv = np.array([[0], [100], [200], [200], [100], [0]], np.int32)
    bid = np.array([[True], [True], [False], [False], [True], [True]])
    ask = np.array([[False], [True], [True], [True], [False], [True]])
    act = np.array([[A.JOIN_BID], [A.IMPROVE_BID], [A.JOIN_ASK], [A.JOIN_BID], [A.HOLD], [A.JOIN_ASK]], np.int32)
    result = SimpleNamespace(inventory=inv, bid_working=bid, ask_working=ask, actions=act)
    t = sc.side_table(result, 200)
    rows = {(r["position"], r["book"]): r for r in t["rows"]}
    # seen: (flat, none) -> join bid; (flat, bid only) -> improve bid; (long, both) -> join ask; (long at
    # limit, ask only) -> join bid, then hold; (long, bid only) -> join ask
    assert set(rows) == {("flat", "none"), ("flat", "bid only"), ("long", "both"), ("long at limit", "ask only"),
                         ("long", "bid only")}
    assert rows[("long at limit", "ask only")]["steps"] == pytest.approx(2 / 6)
    assert rows[("long at limit", "ask only")]["bid"] == 0.5 and rows[("long at limit", "ask only")]["hold"] == 0.5
    assert rows[("long", "bid only")]["ask"] == 1.0 and rows[("flat", "bid only")]["bid"] == 1.0
    assert all("pi_bid" not in r for r in t["rows"])
    assert sum(r["steps"] for r in t["rows"]) == pytest.approx(1.0)
    # one side missing with room: (flat, bid only) sent the bid again, (long, bid only) sent the ask;
    # (long at limit, ask only) has no room on the missing bid side and is not counted
    # side bias: (-1 -1 +1 +1) / 6 + (-0.5) 2 / 6; no book class seen both long and short: no lean
    assert t["summary"] == {"one_missing": pytest.approx(2 / 6), "missing_sent": 0.5, "working_sent": 0.5,
                            "side_bias": pytest.approx(-1 / 6), "lean": None}


def test_side_bias_and_lean_by_hand():
    sc = load_benchmark("side_choice")

    def row(position, book, steps, ask, bid):
        return {"position": position, "book": book, "steps": steps, "ask": ask, "bid": bid}

    rows = [row("long", "both", 0.2, 0.7, 0.3), row("long at limit", "both", 0.1, 0.7, 0.3),
            row("short", "both", 0.1, 0.2, 0.8), row("long", "none", 0.2, 0.5, 0.5),
            row("short", "ask only", 0.4, 0.1, 0.9)]
    # bias: 0.3 x 0.4 + 0.1 x (-0.6) + 0.2 x 0 + 0.4 x (-0.8); lean: only "both" is seen long and short,
    # weight min(0.3, 0.1): 0.4 - (-0.6)
    assert sc.tilt(rows) == {"side_bias": pytest.approx(-0.26), "lean": pytest.approx(1.0)}
    # a trained policy's rows are read through pi, not the sampled shares
    with_pi = [dict(r, pi_ask=r["bid"], pi_bid=r["ask"]) for r in rows]
    assert sc.tilt(with_pi) == {"side_bias": pytest.approx(0.26), "lean": pytest.approx(-1.0)}


def test_held_out_pass_of_a_trained_run(tmp_path):
    sc = load_benchmark("side_choice")
    run = tmp_path / "run"
    train(TrainConfig(steps=8, b=4, backend="numpy", seed=3, run_dir=str(run), data=str(CUT), diag_every=4,
                      checkpoint_every=8))
    out = sc.run(run, ["sampled", "improve"], b=4, steps=30)
    assert set(out) == {"sampled", "improve"}
    for name, tables in out.items():
        (t,) = tables
        assert sum(r["steps"] for r in t["rows"]) == pytest.approx(1.0)
        for r in t["rows"]:
            assert sum(r[g] for g in sc.GROUPS) == pytest.approx(1.0)
            if name == "sampled":
                assert 0.0 <= r["pi_bid"] <= 1.0 and 0.0 <= r["pi_ask"] <= 1.0
                assert r["pi_bid"] + r["pi_ask"] <= 1 + 1e-6
            else:
                assert "pi_bid" not in r and r["market"] == 0.0   # improve only quotes
        assert -1.0 <= t["summary"]["side_bias"] <= 1.0
        assert t["pnl"] is not None and 0.0 <= t["book"]["two_sided"] <= 1.0 and not t["mirror"]
    assert "### improve on" in sc.markdown(out) and "Side bias" in sc.markdown(out)
    # mirror-averaged: the trained policy's pi is symmetric where the state is (a baseline is not touched)
    mirrored = sc.run(run, ["sampled", "improve"], b=4, steps=30, mirror=True)
    assert mirrored["sampled"][0]["mirror"] and not mirrored["improve"][0]["mirror"]
    assert mirrored["improve"][0]["pnl"] == out["improve"][0]["pnl"]
    assert "(mirror-averaged)" in sc.markdown(mirrored)
    assert sc.main([str(tmp_path / "nowhere")]) == 2
