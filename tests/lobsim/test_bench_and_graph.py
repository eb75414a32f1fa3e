"""The simulator benchmark runs end to end (tiny), and a CUDA-graph replay of steps gives
exactly the eager run (GPU only: the simulator has no graphs)."""
import importlib.util
import json
from pathlib import Path

import numpy as np
import pytest
from numba import cuda

from alpharl.graph import CapturedGraph
from alpharl.sim.lobsim import LobSim
from alpharl.sim.params import SimParams
from lobsim_helpers import device_actions, real_market

BENCH = Path(__file__).parents[2] / "benchmarks" / "bench_sim.py"


def test_bench_sim_quick_smoke(tmp_path, monkeypatch):
    monkeypatch.syspath_prepend(str(BENCH.parent))
    spec = importlib.util.spec_from_file_location("bench_sim", BENCH)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    assert mod.main(["--quick", "--out", str(tmp_path)]) == 0
    (result,) = tmp_path.glob("sim_*.json")
    data = json.loads(result.read_text())
    assert data["meta"]["versions"]["numba-cuda"] and data["meta"]["device"]["name"]
    assert data["results"][0]["B"] == 2 and data["results"][0]["events_per_s"] > 0
    assert list(tmp_path.glob("sim_*.md"))


@pytest.mark.gpu
def test_graph_replay_equals_eager(rng):
    market = real_market(rows=3_000)
    params = SimParams(events_per_step=8, episode_steps=12, fills_log_capacity=16, latency_events=1)
    B, T = 64, 6
    acts = [device_actions(a) for a in rng.integers(0, 9, size=(T, B)).astype(np.int32)]
    eager = LobSim(market, params, B, 3)
    eager.reset()
    for a in acts:
        eager.step(a)
    stream = cuda.stream()
    graphed = LobSim(market, params, B, 3, stream=stream)
    graphed.reset()
    graphed.step(acts[0])            # compile before capture, then start the same run again
    graphed.reset()
    graph = CapturedGraph(stream, lambda: [graphed.step(a) for a in acts])
    graph.replay()
    stream.synchronize()
    e, g = eager.state_dict(), graphed.state_dict()
    for k in e:
        np.testing.assert_array_equal(e[k], g[k], err_msg=k)
