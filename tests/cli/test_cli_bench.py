"""alpharl bench: a one-line error without a GPU or with a bad --config; the benchmarked step's config; the
table formatter on a recorded report."""
import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from alpharl import target
from alpharl.cli.app import app


@pytest.mark.skipif(not target.on_simulator(), reason="checks the no-GPU path")
def test_bench_without_gpu_is_one_line_exit_2():
    r = CliRunner().invoke(app, ["bench", "--b", "16"])
    assert r.exit_code == 2
    assert r.output.strip().count("\n") == 0 and "needs a GPU" in r.output and "Traceback" not in r.output


def test_bench_bad_config_is_one_line_exit_2(tmp_path):
    r = CliRunner().invoke(app, ["bench", "--b", "16", "--config", str(tmp_path / "nowhere.toml")])
    assert r.exit_code == 2
    assert r.output.strip().count("\n") == 0 and "nowhere.toml" in r.output and "Traceback" not in r.output


def test_bench_config_keeps_a_runs_learning_settings_and_fixes_the_step():
    from alpharl.bench import _whole_rollouts, bench_config
    from alpharl.config import TrainConfig

    root = Path(__file__).parents[2] / "benchmarks/studies"
    base = TrainConfig.from_toml(root / "signals_horizon_risk3_gae.toml")
    cfg = bench_config(4096, base)
    assert (cfg.rollout, cfg.gae_lambda, cfg.reward_norm, cfg.adaptive_anchors) == (16, 0.95, True, True)
    assert cfg.sim == base.sim and cfg.sim.fee_mode == "per_value"
    assert (cfg.b, cfg.backend, cfg.graph, cfg.k_max, cfg.minibatch, cfg.replay_capacity) == (
        4096, "cuda", True, 1, 256, 65536)
    assert bench_config(16) == bench_config(16, TrainConfig())
    assert bench_config(16).rollout == TrainConfig().rollout and bench_config(16, base, minibatch=64).minibatch == 64
    assert [_whole_rollouts(n, t) for n, t in ((200, 1), (200, 16), (16, 16), (1, 16))] == [200, 208, 16, 16]


def test_bench_table_renders_a_recorded_report():
    from rich.console import Console

    from alpharl.bench import format_table

    report = json.loads((Path(__file__).parents[2] / "benchmarks/results/bench_2026-11-30.json").read_text())
    console = Console(width=200, record=True)
    console.print(format_table(report))
    text = console.export_text()
    for r in report["rows"]:
        assert f"{r['b']:d}" in text
    assert "meas/floor" in text


def test_peer_cells_say_why_when_torch_is_missing():
    """Without torch the PyTorch columns hold the reason, never a number, and the table shows it."""
    import importlib.util

    from rich.console import Console

    from alpharl.bench import PEER_KEYS, format_table, peer_cells, torch_peer

    peer = torch_peer()
    if importlib.util.find_spec("torch") is None:
        assert peer == "n/a (torch not installed)"
    cells = peer_cells("n/a (torch not installed)", 100.0, lambda: pytest.fail("timed without a peer"))
    assert cells == dict.fromkeys(PEER_KEYS, "n/a (torch not installed)")
    report = json.loads((Path(__file__).parents[2] / "benchmarks/results/bench_2026-11-30.json").read_text())
    report["rows"] = [r | cells for r in report["rows"]]
    console = Console(width=400, record=True)
    console.print(format_table(report))
    text = console.export_text()
    assert "× PyTorch" in text and "n/a (torch not installed)" in text


def test_phase_times_replay_each_rollout_phase_alone():
    """With rollouts the bench times the collect and the update step's graphs one by one (n replays each);
    with T = 1 both cells are empty."""
    from types import SimpleNamespace

    from alpharl.bench import phase_times
    from alpharl.cuda_kernels.nets.advantage import ENV_COLLECT, ENV_GAE

    calls = []
    graphs = {ph: SimpleNamespace(replay=lambda ph=ph: calls.append(ph)) for ph in (ENV_COLLECT, ENV_GAE)}
    tr = SimpleNamespace(config=SimpleNamespace(rollout=16), captured=graphs.get)
    got = phase_times(tr, 5, lambda: None)
    assert calls == [ENV_COLLECT] * 5 + [ENV_GAE] * 5
    assert set(got) == {"collect_us", "update_us"} and all(v >= 0 for v in got.values())
    tr.config.rollout = 1
    assert phase_times(tr, 5, lambda: None) == {"collect_us": None, "update_us": None}
