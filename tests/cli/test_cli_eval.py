"""``alpharl eval``: trained policy (sampled, greedy) beside the baselines on a held-out window."""
import json

import numpy as np
import pyarrow.parquet as pq
import pytest
from typer.testing import CliRunner

from alpharl.checkpoint import save_checkpoint
from alpharl.cli.app import app
from alpharl.evaluate import ALL, BASELINES, trade_stats
from alpharl.nets import NetLayout
from alpharl.rundir import CHECKPOINT_FILE
from alpharl.sim import layout as L
from alpharl.sim.params import SimParams
from cli_helpers import assert_one_line_error

runner = CliRunner()
SMALL = ["--steps", "12", "--b", "2", "--json"]


def trained_run(path, obs_dim=None, seed=3, obs_version=L.OBS_VERSION):
    """A run directory with an untrained network for the default observation (config without [sim]);
    ``obs_version`` None writes a checkpoint of before the version was recorded."""
    path.mkdir(parents=True)
    (path / "config.toml").write_text(f"steps = 10\nb = 2\nseed = {seed}\ntrain_window = \"0:0.8\"\n")
    layout = NetLayout(obs_dim or L.obs_dim(SimParams().obs_levels))
    meta = {"step": 10} if obs_version is None else {"step": 10, "obs_version": obs_version}
    save_checkpoint(path / CHECKPOINT_FILE, {"nets.params": layout.init_params(seed)}, meta)
    return path


def test_baselines_alone(tmp_path):
    r = runner.invoke(app, ["eval", *SMALL])
    assert r.exit_code == 0, r.output
    d = json.loads(r.output)
    assert list(d["policies"]) == list(BASELINES)
    hold = d["policies"]["hold"]
    assert (hold["pnl"], hold["trades"], hold["max_drawdown"]) == (0.0, 0, 0.0)
    assert d["window"]["first_row"] == 24_000 and d["window"]["stop_row"] == 30_000   # last 20% of the sample
    for name in BASELINES:
        s = d["policies"][name]
        assert s["steps"] == 12 and s["backtests"] == 2 and s["max_drawdown"] >= 0
        assert len(s["action_share"]) == 9 and sum(s["action_share"].values()) == pytest.approx(1.0)
    # what each scripted policy does, by its definition (12 steps x 2 backtests)
    assert hold["action_share"]["hold"] == 1.0
    for name, (a, b) in {"join": ("join_bid", "join_ask"), "improve": ("improve_bid", "improve_ask")}.items():
        share = d["policies"][name]["action_share"]
        assert (share[a], share[b]) == (0.5, 0.5), share
    periodic = d["policies"]["periodic"]["action_share"]
    assert periodic["market_buy"] > 0 and periodic["market_sell"] > 0 and periodic["hold"] > 0.5
    # what each holds: hold and periodic never quote; join quotes both sides once it has sent both
    assert d["policies"]["hold"]["book"] == {"bid": 0.0, "ask": 0.0, "two_sided": 0.0, "position": 0.0,
                                             "at_limit": 0.0}
    assert d["policies"]["periodic"]["book"]["two_sided"] == 0.0
    book = d["policies"]["join"]["book"]
    assert book["bid"] > 0.5 and book["ask"] > 0.5 and 0 < book["two_sided"] <= min(book["bid"], book["ask"])


def test_book_presence_counts_steps_and_backtests():
    """Shares over every (step, backtest): a bid in 3 of 4, an ask in 2, both in 1; |position| 0, 100,
    500, 500 of max_position 500 (at the limit in 2 of 4)."""
    from alpharl.evaluate import book_presence

    bid = np.array([[1, 1], [1, 0]], bool)
    ask = np.array([[0, 1], [0, 1]], bool)
    inv = np.array([[0, -100], [500, -500]], np.int32)
    assert book_presence(inv, bid, ask, 500) == {"bid": 0.75, "ask": 0.5, "two_sided": 0.25,
                                                 "position": pytest.approx(1100 / 2000), "at_limit": 0.5}


def test_the_simulator_settings_are_reported(tmp_path):
    """eval's JSON names the simulator settings every policy ran under (evaluation's: no holding
    penalty), and its table says when the quotes were pegged (join and improve are then pegged too)."""
    d = json.loads(runner.invoke(app, ["eval", *SMALL]).output)
    assert d["sim"]["peg_quotes"] is False and d["sim"]["fee_mode"] == SimParams().fee_mode
    assert d["sim"]["episode_steps"] == d["episode_steps"]
    run = tmp_path / "run"
    run.mkdir()
    (run / "config.toml").write_text('seed = 3\ntrain_window = "0:0.8"\n[sim]\npeg_quotes = true\n'
                                     'inventory_penalty = 0.4\n')
    d = json.loads(runner.invoke(app, ["eval", str(run), *SMALL, "--policy", "join"]).output)
    assert d["sim"]["peg_quotes"] is True and d["sim"]["inventory_penalty"] == 0.0
    r = runner.invoke(app, ["eval", str(run), "--steps", "12", "--b", "2", "--policy", "join"],
                      env={"COLUMNS": "200"})
    header = " ".join(r.output.split())   # the title line wraps where the run's path is long
    assert r.exit_code == 0 and "pegged quotes" in header and "refilled" not in header
    (run / "config.toml").write_text('seed = 3\ntrain_window = "0:0.8"\n[sim]\npeg_quotes = true\n'
                                     'refill_quotes = true\n')
    r = runner.invoke(app, ["eval", str(run), "--steps", "12", "--b", "2", "--policy", "join"],
                      env={"COLUMNS": "200"})
    assert r.exit_code == 0 and "pegged and refilled quotes" in " ".join(r.output.split())


def test_trained_policy_beside_baselines_and_deterministic(tmp_path):
    run = trained_run(tmp_path / "run")
    r = runner.invoke(app, ["eval", str(run), *SMALL])
    assert r.exit_code == 0, r.output
    d = json.loads(r.output)
    assert list(d["policies"]) == list(ALL) and d["seed"] == 3
    again = json.loads(runner.invoke(app, ["eval", str(run), *SMALL, "--policy", "greedy"]).output)
    assert again["policies"]["greedy"] == d["policies"]["greedy"]
    r = runner.invoke(app, ["eval", str(run), "--steps", "12", "--b", "2"], env={"COLUMNS": "200"})
    assert r.exit_code == 0 and "sampled" in r.output and "join" in r.output and "win rate" in r.output


def test_fills_export(tmp_path):
    out = tmp_path / "fills.parquet"
    r = runner.invoke(app, ["eval", "--policy", "periodic", "--period", "4", "--fills", str(out), *SMALL])
    assert r.exit_code == 0, r.output
    t = pq.read_table(out)
    assert t.num_rows > 0 and set(t.column("policy").to_pylist()) == {"periodic"}
    assert {"backtest", "price", "quantity", "side", "fee"} <= set(t.column_names)


def test_improve_quotes_a_tick_inside_the_touch(tmp_path):
    """``improve`` alternates improve bid / improve ask, and its orders sit at prices nobody quoted (no queue
    ahead when placed), where join's wait behind the touch's queue."""
    from alpharl import actions as A
    from alpharl.evaluate import Baseline

    pol = Baseline("improve", b=3, seed=0)
    acts = [pol(None) for _ in range(4)]
    assert [a.tolist() for a in acts] == [[A.IMPROVE_BID] * 3, [A.IMPROVE_ASK] * 3] * 2
    queue = {}
    for name in ("improve", "join"):
        out = tmp_path / f"{name}.parquet"
        r = runner.invoke(app, ["eval", "--policy", name, "--steps", "200", "--b", "2", "--json", "--fills", str(out)])
        assert r.exit_code == 0, r.output
        assert list(json.loads(r.output)["policies"]) == [name]
        t = pq.read_table(out).to_pandas()
        assert len(t) > 0 and t.maker.all()
        queue[name] = (t.queue_ahead == 0).mean()
    assert queue["improve"] > 0.8 > queue["join"]


def test_trade_stats_by_hand():
    reward = np.array([[1.0, 3.0], [-4.0, 0.0], [2.0, 2.0]])     # x = [2, -2, 2]
    done = np.array([[0, 1], [1, 0], [0, 0]], np.float32)
    pnl = np.array([[0.0, 5.0], [-3.0, 0.0], [0.0, 0.0]])
    s = trade_stats(reward, done, pnl, seconds_per_step=None)
    assert s["pnl"] == 4.0 and s["pnl_per_backtest"] == 2.0
    assert s["sharpe_per_step"] == pytest.approx((2 / 3) / np.std([2, -2, 2], ddof=1)) and s["sharpe"] is None
    assert s["max_drawdown"] == 2.0                     # curve 2, 0, 2: peak 2 -> 0
    assert (s["trades"], s["win_rate"], s["avg_trade"]) == (2, 0.5, 1.0)
    s = trade_stats(reward, done, pnl, seconds_per_step=1.0)
    assert s["sharpe"] == pytest.approx(s["sharpe_per_step"] * np.sqrt(252 * 6.5 * 3600))


def test_unknown_policy():
    assert_one_line_error(runner.invoke(app, ["eval", "--policy", "yolo"]), "--policy 'yolo'", "join", "improve")


def test_trained_policy_needs_a_run():
    assert_one_line_error(runner.invoke(app, ["eval", "--policy", "greedy"]), "needs RUN")


def test_run_without_checkpoint(tmp_path):
    (tmp_path / "run").mkdir()
    (tmp_path / "run" / "config.toml").write_text("b = 2\n")
    assert_one_line_error(runner.invoke(app, ["eval", str(tmp_path / "run")]), "checkpoint")


def test_checkpoint_of_another_observation_size(tmp_path):
    run = trained_run(tmp_path / "run", obs_dim=7)
    assert_one_line_error(runner.invoke(app, ["eval", str(run), *SMALL]), "parameters")


def test_checkpoint_of_an_earlier_observation_is_refused(tmp_path):
    """A network trained before the observation had a fixed level count and instrument-free units
    (no obs_version in its checkpoint) cannot read today's observations: one line, exit 2."""
    run = trained_run(tmp_path / "run", obs_version=None)
    r = runner.invoke(app, ["eval", str(run), *SMALL])
    assert_one_line_error(r, "observation version 1")
    # the baselines need no network: they still run beside such a run
    r = runner.invoke(app, ["eval", str(run), *SMALL, "--policy", "hold"])
    assert r.exit_code == 0, r.output


def test_bad_window():
    assert_one_line_error(runner.invoke(app, ["eval", "--start", "0.9", "--end", "0.5"]), "--start 0.9")


def test_window_too_short():
    assert_one_line_error(runner.invoke(app, ["eval", "--start", "0.9999", "--end", "1.0"]), "window")


def test_missing_eval_data(tmp_path):
    assert_one_line_error(runner.invoke(app, ["eval", "--data", str(tmp_path / "x.zip")]), "x.zip")


def test_kernel_simulator_agrees_with_the_reference():
    """--backend sim runs the LobSim kernels (under the CUDA simulator here): same statistics as the NumPy sim."""
    args = ["eval", "--policy", "periodic", "--period", "4", "--steps", "6", "--b", "2", "--json"]
    ref = json.loads(runner.invoke(app, [*args, "--backend", "numpy"]).output)["policies"]
    dev = runner.invoke(app, [*args, "--backend", "sim"])
    assert dev.exit_code == 0, dev.output
    assert json.loads(dev.output)["policies"] == ref
    assert ref["periodic"]["trades"] > 0


def test_bad_eval_backend():
    assert_one_line_error(runner.invoke(app, ["eval", "--backend", "tpu"]), "--backend 'tpu'")


def test_mirror_averaged_policy(tmp_path):
    """--mirror: the trained policies act on the mirror-averaged logits (alpharl.mirror), the baselines are
    untouched, the JSON and the title say so, and the result repeats."""
    run = trained_run(tmp_path / "run")
    plain = json.loads(runner.invoke(app, ["eval", str(run), *SMALL]).output)
    r = runner.invoke(app, ["eval", str(run), *SMALL, "--mirror"])
    assert r.exit_code == 0, r.output
    d = json.loads(r.output)
    assert d["mirror"] and not plain["mirror"]
    for name in BASELINES:
        assert d["policies"][name] == plain["policies"][name]
    assert all(np.isfinite(d["policies"][p]["pnl"]) for p in ("sampled", "greedy"))
    again = json.loads(runner.invoke(app, ["eval", str(run), *SMALL, "--mirror", "--policy", "sampled"]).output)
    assert again["policies"]["sampled"] == d["policies"]["sampled"]
    r = runner.invoke(app, ["eval", str(run), "--steps", "12", "--b", "2", "--mirror", "--policy", "greedy"],
                      env={"COLUMNS": "200"})
    assert r.exit_code == 0 and "mirror-averaged policy" in " ".join(r.output.split())


def test_mirror_needs_a_trained_policy(tmp_path):
    assert_one_line_error(runner.invoke(app, ["eval", "--mirror", *SMALL]), "--mirror", "trained policy")
    run = trained_run(tmp_path / "run")
    assert_one_line_error(runner.invoke(app, ["eval", str(run), "--mirror", "--policy", "join", *SMALL]),
                          "--mirror", "trained policy")


def test_a_mirror_trained_run_acts_mirror_averaged(tmp_path):
    """A run trained with --mirror-policy is evaluated as the policy it trained: the mirror average, without
    --mirror (the same numbers as the plain run's checkpoint with --mirror)."""
    run = trained_run(tmp_path / "run")
    layout = NetLayout(L.obs_dim(SimParams().obs_levels))   # weights large enough that the mirror shows
    params = np.random.default_rng(5).normal(0.0, 0.5, layout.n_params).astype(np.float32)
    save_checkpoint(run / CHECKPOINT_FILE, {"nets.params": params}, {"step": 10, "obs_version": L.OBS_VERSION})
    mirrored = json.loads(runner.invoke(app, ["eval", str(run), *SMALL, "--mirror"]).output)
    plain = json.loads(runner.invoke(app, ["eval", str(run), *SMALL]).output)
    with open(run / "config.toml", "a") as f:
        f.write("mirror_policy = true\n")
    d = json.loads(runner.invoke(app, ["eval", str(run), *SMALL]).output)
    assert d["mirror"] and d["policies"]["sampled"] == mirrored["policies"]["sampled"]
    assert d["policies"]["greedy"] == mirrored["policies"]["greedy"]
    assert d["policies"]["sampled"] != plain["policies"]["sampled"]
