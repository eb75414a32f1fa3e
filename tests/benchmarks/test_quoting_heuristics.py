"""benchmarks/quoting_heuristics.py: the filtered join's actions on a crafted observation, and a short
run on the embedded sample whose join rows equal the evaluation's own join baseline."""
import json

import numpy as np
import pytest
from support import ROOT, load_benchmark

from alpharl import actions as A
from alpharl.sim import layout as L

LEVELS = 2


def obs_rows(rows):
    """Observations with (position, imbalance, buy flag, sell flag) set, the rest random."""
    base = L.obx_base(LEVELS)
    obs = np.random.default_rng(3).uniform(0.1, 1.0, (len(rows), L.obs_dim(LEVELS))).astype(np.float32)
    for i, (pos, imb, buy, sell) in enumerate(rows):
        obs[i, base + L.OBX_POSITION], obs[i, base + L.OBX_IMB1] = pos, imb
        obs[i, base + L.OBX_BUY_FLAG], obs[i, base + L.OBX_SELL_FLAG] = buy, sell
    return obs


def test_join_flat_quotes_only_the_side_that_does_not_grow_the_position():
    qh = load_benchmark("quoting_heuristics")
    obs = obs_rows([(0.0, 0.0, 0, 0),     # flat, nothing resting: both wanted, this step's side (bid)
                    (0.0, 0.0, 1, 0),     # flat, a bid resting: the ask
                    (0.4, 0.0, 0, 0),     # long: the ask only
                    (-0.4, 0.0, 0, 1),    # short, an ask resting: it must go
                    (-0.4, 0.0, 1, 0),    # short, the bid resting: nothing to do
                    (0.4, 0.0, 0, 0.5)])  # long, an ask pending: nothing to do
    pol = qh.FilteredJoin(len(obs), LEVELS, None)
    np.testing.assert_array_equal(pol(obs), [A.JOIN_BID, A.JOIN_ASK, A.JOIN_ASK, A.CANCEL, A.HOLD, A.HOLD])
    # the next step's side is the ask
    np.testing.assert_array_equal(pol(obs)[:3], [A.JOIN_ASK, A.JOIN_ASK, A.JOIN_ASK])


def test_join_flat_imb_drops_the_side_the_imbalance_points_against():
    qh = load_benchmark("quoting_heuristics")
    obs = obs_rows([(0.0, -0.8, 0, 0),    # heavy ask side: no bid, the ask
                    (0.0, 0.8, 0, 0),     # heavy bid side: no ask, the bid (on an ask step)
                    (0.0, -0.8, 1, 0),    # a bid resting into a heavy ask side: cancel
                    (0.0, 0.3, 0, 0)])    # within theta: both, this step's side
    pol = qh.FilteredJoin(len(obs), LEVELS, 0.5)
    pol.t = 1   # an ask step
    np.testing.assert_array_equal(pol(obs), [A.JOIN_ASK, A.JOIN_BID, A.CANCEL, A.JOIN_ASK])


def test_short_run_matches_the_evaluation_join(tmp_path):
    qh = load_benchmark("quoting_heuristics")
    from alpharl import evaluate as E
    from alpharl.config import TrainConfig
    from alpharl.dataset import find_sources, load_files

    data = str(ROOT / "data" / "AMZN_2012-06-21_5_sample.zip")   # the embedded sample
    out = tmp_path / "qh.json"
    assert qh.main(["--data", data, "--seeds", "0,1", "--steps", "30", "--b", "4",
                    "--policies", "join,join_flat", "--json", str(out)]) == 0
    res = json.loads(out.read_text())
    assert len(res["runs"]) == 2 * 2 * 2   # windows x policies x seeds
    (_, md), = load_files(find_sources([data], "--data"))
    for r in res["runs"]:
        if r["policy"] != "join":
            continue
        setup = E.make_setup(TrainConfig(), md, *r["window"], 4, 30, r["seed"], False)
        got = E.run_policy(setup, E.Baseline("join", 4, r["seed"]))
        assert r["pnl"] == pytest.approx(float(np.asarray(got.reward, np.float64).sum()))
    s = {(x["role"], x["policy"]): x for x in res["summary"]}
    assert s[("in_sample", "join")]["pnl"] == pytest.approx(np.mean(s[("in_sample", "join")]["seeds"]))
    assert {x["role"] for x in res["summary"]} == {"in_sample", "held_out"}
    sel, = res["selection"]
    ins = {"hold": 0.0, **{x["policy"]: x["pnl"] for x in res["summary"] if x["role"] == "in_sample"}}
    assert sel["policy"] in ins and sel["in_sample"] == max(ins.values())
    with pytest.raises(E.EvalError):
        qh.main(["--data", data, "--policies", "nope"])


def test_segment_roles_and_summary():
    qh = load_benchmark("quoting_heuristics")
    train, test = (0.0, 0.8), (0.8, 1.0)
    assert qh.segment_role((0.7, 0.8), train, test) == "in_sample"
    assert qh.segment_role((0.8, 0.9), train, test) == "held_out"
    assert qh.segment_role((0.75, 0.85), train, test) == "other"      # straddles the boundary
    assert qh.segment_role((0.9, 1.0), (0.0, 0.5), (0.5, 0.8)) == "other"   # in neither window
    pnl = {0: (-300.0, -100.0), 1: (50.0, 250.0), 2: (-7.0, -9.0), 3: (400.0, 200.0)}   # two seeds a segment
    roles = ["in_sample", "in_sample", "in_sample", "held_out"]
    rows = [{"file": "d", "policy": "join", "segment": i, "role": roles[i], "pnl": x, "seed": k}
            for i in pnl for k, x in enumerate(pnl[i])]
    s, = qh.summarise_segments(rows)
    assert s["segment_pnl"] == [-200.0, 150.0, -8.0, 300.0]
    assert s["in_sample_mean"] == pytest.approx(np.mean([-200.0, 150.0, -8.0]))
    assert s["in_sample_sd"] == pytest.approx(np.std([-200.0, 150.0, -8.0], ddof=1))
    assert (s["in_sample_positive"], s["in_sample_segments"]) == (1, 3)
    assert (s["held_out_mean"], s["held_out_reaches"]) == (300.0, 3)
    m, sd = np.mean([-200.0, 150.0, -8.0]), np.std([-200.0, 150.0, -8.0], ddof=1)
    assert s["in_sample_t"] == pytest.approx(m / (sd / np.sqrt(3)))
    assert s["held_out_total"] == 300.0
    assert s["held_out_z"] == pytest.approx((300.0 - m) / sd)     # one held-out segment: sqrt(1) sd
    text = qh.segment_table([s])
    assert "[0.3]" in text and f"({s['in_sample_t']:+.1f})" in text and f"+0.3 ({s['held_out_z']:+.1f})" in text
    # two held-out segments: z sums them against two in-sample segments' mean and sqrt(2) sd
    rows2 = rows + [{"file": "d", "policy": "join", "segment": 4, "role": "held_out", "pnl": x, "seed": k}
                    for k, x in enumerate((-50.0, 10.0))]
    s2, = qh.summarise_segments(rows2)
    assert s2["held_out_total"] == pytest.approx(280.0)
    assert s2["held_out_z"] == pytest.approx((280.0 - 2 * m) / (np.sqrt(2) * sd))
    # no spread (one in-sample segment, or equal ones): no t, no z, an empty cell rather than a division by 0
    flat = [{"file": "d", "policy": "hold", "segment": i, "role": roles[i], "pnl": 0.0, "seed": 0} for i in range(4)]
    s3, = qh.summarise_segments(flat)
    assert s3["in_sample_t"] is None and s3["held_out_z"] is None and s3["held_out_total"] == 0.0
    assert "| +0.0 |" in qh.segment_table([s3])


def test_segments_run_each_window_and_label_it(tmp_path):
    qh = load_benchmark("quoting_heuristics")
    data = str(ROOT / "data" / "AMZN_2012-06-21_5_sample.zip")
    out = tmp_path / "seg.json"
    assert qh.main(["--data", data, "--seeds", "0,1", "--steps", "20", "--b", "4", "--policies", "join",
                    "--segments", "4", "--train-window", "0:0.5", "--json", str(out)]) == 0
    res = json.loads(out.read_text())
    assert sorted({tuple(r["window"]) for r in res["runs"]}) == [(0, 0.25), (0.25, 0.5), (0.5, 0.75), (0.75, 1)]
    assert len(res["runs"]) == 4 * 2
    assert {r["segment"]: r["role"] for r in res["runs"]} == {0: "in_sample", 1: "in_sample",
                                                             2: "held_out", 3: "held_out"}
    s, = res["summary"]
    for i, x in enumerate(s["segment_pnl"]):
        assert x == pytest.approx(np.mean([r["pnl"] for r in res["runs"] if r["segment"] == i]))
    assert s["in_sample_segments"] == 2
    with pytest.raises(SystemExit):
        qh.main(["--data", data, "--segments", "-1"])


def test_in_sample_selection_picks_the_best_training_rule_or_hold():
    qh = load_benchmark("quoting_heuristics")
    rows = [("a", "in_sample", "join", -20.0), ("a", "held_out", "join", 30.0),
            ("a", "in_sample", "improve", -5.0), ("a", "held_out", "improve", -7.0),
            ("b", "in_sample", "join", 12.0), ("b", "held_out", "join", -3.0),
            ("b", "in_sample", "improve", 40.0), ("b", "held_out", "improve", 9.0)]
    summary = [{"file": f, "role": r, "policy": p, "pnl": x} for f, r, p, x in rows]
    a, b = qh.select_in_sample(summary)
    assert (a["policy"], a["in_sample"], a["held_out"], a["join_held_out"]) == ("hold", 0.0, 0.0, 30.0)
    assert (b["policy"], b["in_sample"], b["held_out"], b["join_held_out"]) == ("improve", 40.0, 9.0, -3.0)
    t = qh.selection_table([a, b])
    assert "| a | hold (0) | 0 | 30 | 0 |" in t and "| b | improve (40) | 9 | -3 | 0 |" in t
