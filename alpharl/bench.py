"""``alpharl bench``: throughput of the training step over B, against its floor.

For each B: µs per full training step with the step captured as a CUDA graph and
with eager launches (prepared launches, alpharl.cuda_kernels.prepared; and
``eager numba µs``: the same steps through numba's own argument preparation),
env-steps per second, the simulator alone and the learning update alone (graph-
replayed), peak GPU memory, and the step's floor: FLOPs of the GEMMs (forward +
backward of every layer, K=1), bytes that must cross HBM (parameters, Adam
moments, gradients, activations, replay rows, events), and launches x ~1 µs (a
captured kernel's cost on an idle GPU) along the graph's critical path (its
longest chain of dependent nodes: the step's independent chains are parallel
branches). The floor is max(FLOPs / fp32 peak, bytes / HBM bandwidth, critical-
path launches x 1 µs).
Cold and warm start (process start to the first step, with an empty and a
filled kernel cache) are measured in subprocesses.

Where torch is installed (it is not a dependency), the same process also times
the PyTorch peer (``benchmarks/torch_peer.py``) on the learning alone's work:
draw + gather the replay minibatch (from the trainer's own replay of the book's
transitions), one update, the priorities; eager and as a CUDA graph. "× PyTorch"
is the peer's graph µs over alpharl's (learn µs): above 1, alpharl is faster.
Without torch those cells say why ("n/a (torch not installed)"), never a number.
"""
from __future__ import annotations

import dataclasses
import functools
import importlib.util
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from alpharl import jsontext
from alpharl.config import TrainConfig
from alpharl.cuda_kernels import prepared
from alpharl.cuda_kernels.nets.advantage import ENV_COLLECT, ENV_GAE
from alpharl.graph import CapturedGraph
from alpharl.lobster.sample import load_embedded
from alpharl.report import fitted_table
from alpharl.trainer import IntegratedTrainer

#: The B values of the results table.
DEFAULT_BS = (16, 64, 256, 1024, 4096, 16384, 65536)
#: H200 ceilings used for the floor (vendor datasheet fp32; measured copy bandwidth).
FP32_PEAK_FLOPS = 67e12
HBM_BYTES_PER_S = 4.3e12
GRAPH_LAUNCH_S = 1.0e-6


#: The peer's report keys (µs per learning step, eager and graph; its graph µs over alpharl's).
PEER_KEYS = ("torch_eager_us", "torch_graph_us", "x_pytorch")
PEER_SOURCE = Path(__file__).resolve().parents[1] / "benchmarks" / "torch_peer.py"


@functools.cache
def torch_peer():
    """The PyTorch peer's module, or why it cannot run here: the text its table cells show (loaded once)."""
    try:
        import torch
    except ImportError:
        return "n/a (torch not installed)"
    if not torch.cuda.is_available():
        return "n/a (torch sees no GPU)"
    if not PEER_SOURCE.is_file():
        return "n/a (the peer is benchmarks/torch_peer.py of a source tree)"
    spec = importlib.util.spec_from_file_location("torch_peer", PEER_SOURCE)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def peer_cells(peer, learn_us: float, timings) -> dict:
    """PEER_KEYS of a row: ``timings()`` (the peer's eager and graph µs) against alpharl's learn_us, or
    ``peer`` (the reason) in every cell when it is a string."""
    if isinstance(peer, str):
        return dict.fromkeys(PEER_KEYS, peer)
    t = timings()
    return {"torch_eager_us": t["torch_eager_us"], "torch_graph_us": t["torch_graph_us"],
            "x_pytorch": t["torch_graph_us"] / learn_us, "torch": t["torch"]}


def _timed(fn, n: int, sync) -> float:
    sync()
    t0 = time.perf_counter()
    for _ in range(n):
        fn()
    sync()
    return (time.perf_counter() - t0) / n


def phase_times(tr, n: int, sync) -> dict:
    """With rollouts (T > 1): µs of one replay of each phase's captured graph alone, the collect step and the
    update step (where a rollout's cost over the one-step path lies; the whole-rollout mean is graph_us).
    Replaying one phase over and over is safe for timing (the rollout's slot is the step count mod T) but
    leaves the trainer's device state past its host step count: time it last. None for both with T = 1."""
    if tr.config.rollout == 1:
        return {"collect_us": None, "update_us": None}
    return {"collect_us": 1e6 * _timed(tr.captured(ENV_COLLECT).replay, n, sync),
            "update_us": 1e6 * _timed(tr.captured(ENV_GAE).replay, n, sync)}


def floor_of(trainer, launches: int) -> dict:
    """FLOPs, bytes and launches (graph nodes on the critical path) of one training step (K = 1) and the
    implied floor in µs."""
    lay = trainer.ops.nets.layout
    B, M, D = trainer.B, trainer.M, trainer.obs_dim
    rows = 2 * B + 2 * M          # stacked encoder rows of the learning update
    flops = 0.0
    for name, layer in lay.layers.items():
        k, n = layer.k_in, layer.n_out
        if name.startswith("enc."):
            r_fwd, r_bwd = rows + M + B, B + M   # online + target (s') + acting pass; backward on [s_t | s]
        elif name.startswith("q."):
            r_fwd, r_bwd = 3 * M if name == "q.adv" else rows + M, M
        else:
            r_fwd, r_bwd = rows if name == "v.out" else 2 * B, B
        flops += 2.0 * k * n * r_fwd + 2 * 2.0 * k * n * r_bwd   # forward + (dX, dW)
    n_params = lay.n_params
    bytes_ = 4.0 * n_params * 7                 # params r/w, grads r/w, Adam m and v r/w, ~target
    bytes_ += 4.0 * rows * (D + 4 * lay.hidden) * 3   # activations written and read back
    bytes_ += 4.0 * (2 * B + 2 * M) * D          # replay insert + gather
    bytes_ += 4.0 * B * trainer.config.sim.events_per_step * 8   # events + book columns touched
    t_flop = flops / FP32_PEAK_FLOPS
    t_byte = bytes_ / HBM_BYTES_PER_S
    t_launch = launches * GRAPH_LAUNCH_S
    return {"flops": flops, "bytes": bytes_, "launches": launches,
            "floor_us": 1e6 * max(t_flop, t_byte, t_launch), "bound": max(
                (("arithmetic", t_flop), ("bandwidth", t_byte), ("launches", t_launch)), key=lambda x: x[1])[0]}


def bench_config(b: int, base: TrainConfig | None = None, **overrides) -> TrainConfig:
    """The benchmarked step: B backtests on the GPU as a graph, K = 1 (one learning update per env step,
    as the targets are stated), M = 256, a replay of max(65536, 4 B). ``base``: a run's config whose
    learning and market settings (rollout, switches, [sim]) the step keeps (``alpharl bench --config``)."""
    fixed = dict(b=b, backend="cuda", graph=True, replay_capacity=max(65536, 4 * b), minibatch=256, k_max=1)
    return dataclasses.replace(base or TrainConfig(), **(fixed | overrides))


def _whole_rollouts(n: int, t: int) -> int:
    """n steps rounded up to whole rollouts of t steps (every phase timed in its share)."""
    return t * -(-n // t)


def bench_b(b: int, steps: int, market, eager_steps: int | None = None, base: TrainConfig | None = None) -> dict:
    from numba import cuda

    ctx = cuda.current_context()
    free0, total = ctx.get_memory_info()
    cfg = bench_config(b, base)
    t = cfg.rollout
    tr = IntegratedTrainer(cfg, market)
    sync = tr.ops.stream.synchronize
    # Each phase of the rollout runs eagerly once (compiles, loads modules), then is captured at its second
    # step: 2 steps with T = 1, 2 T with rollouts (collect and update phases).
    tr.run(2 * t)
    # With rollouts the update phase's graph is the larger one: report the phase with the most nodes.
    g = max((tr.captured(tr.phase(s)) for s in range(t)), key=lambda x: x.n_nodes)
    n_nodes, critical = g.n_nodes, g.critical_path()
    graph_s = _timed(tr.step, _whole_rollouts(steps, t), sync)
    tr.config.graph = False
    n_eager = _whole_rollouts(eager_steps or max(3, steps // 10), t)
    eager_s = _timed(tr.step, n_eager, sync)
    with prepared.switched(False):         # the same steps with numba's own argument preparation
        eager_numba_s = _timed(tr.step, n_eager, sync)
    tr.config.graph = True

    # simulator alone and one learning iteration alone, each captured and replayed
    o = tr.ops
    sim_graph = CapturedGraph(o.stream, lambda: o.sim.step(o.actions))
    sim_s = _timed(sim_graph.replay, steps, sync)

    def learn_once():
        o.k_gate(0)
        mb = o.sample(o.gate)
        out = o.learn(o.env_batch(), mb, o.gate)
        o.replay.update_priorities(out.q_priority, tr.M, o.gate)

    learn_graph = CapturedGraph(o.stream, learn_once)
    learn_s = _timed(learn_graph.replay, steps, sync)
    rp = o.replay
    # the same work in PyTorch, on this step's env batch and the trainer's replay (its priorities: only
    # filled slots are drawn)
    mod = torch_peer()
    peer = peer_cells(mod, 1e6 * learn_s, lambda: mod.bench_peer(
        o.nets.layout, o.nets.params.copy_to_host(), tr.read_isv(), o.env_batch(),
        (rp.obs_s, rp.action, rp.reward, rp.done, rp.obs_s2), tr.M, False, steps, 3,
        max(3, steps // 10), rp.priority))
    free1, _ = ctx.get_memory_info()
    fl = floor_of(tr, critical)
    row = {
        "b": b, "graph_us": 1e6 * graph_s, "eager_us": 1e6 * eager_s, "eager_numba_us": 1e6 * eager_numba_s,
        "env_steps_per_s": b / graph_s, "us_per_env_step": 1e6 * graph_s / b,
        "sim_us": 1e6 * sim_s, "learn_us": 1e6 * learn_s,
        "gpu_mem_mb": (free0 - free1) / 2**20, "graph_nodes": n_nodes,
        "critical_nodes": critical,
        "floor_us": fl["floor_us"], "measured_over_floor": graph_s * 1e6 / fl["floor_us"], "bound": fl["bound"],
        "gflop_per_step": fl["flops"] / 1e9, "mb_per_step": fl["bytes"] / 2**20, **peer,
    }
    sim_graph.close()
    learn_graph.close()
    row |= phase_times(tr, max(3, steps // t), sync)   # last: it leaves the device state past the host's
    return row


def start_time(cache_dir: str) -> float:
    """Seconds from a fresh process's start to its first completed training step."""
    code = ("import time; t0=time.perf_counter(); from alpharl.config import TrainConfig; "
            "from alpharl.lobster.sample import load_embedded; from alpharl.trainer import IntegratedTrainer; "
            "tr=IntegratedTrainer(TrainConfig(b=16, backend='cuda'), load_embedded()); tr.step(); "
            "tr.read_isv(); print(time.perf_counter()-t0)")
    env = dict(os.environ, NUMBA_CACHE_DIR=cache_dir)
    t0 = time.perf_counter()
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    wall = time.perf_counter() - t0
    return float(out.stdout.strip().splitlines()[-1]) if out.stdout.strip() else wall


def environment() -> dict:
    import numba
    import numpy

    info = {"date": time.strftime("%Y-%m-%d %H:%M"), "python": sys.version.split()[0], "numba": numba.__version__,
            "numpy": numpy.__version__}
    try:
        import numba_cuda

        info["numba_cuda"] = getattr(numba_cuda, "__version__", "?")
    except ImportError:
        pass
    try:
        q = subprocess.run(["nvidia-smi", "--query-gpu=name,driver_version", "--format=csv,noheader"],
                           capture_output=True, text=True, timeout=20)
        info["gpu"], info["driver"] = [s.strip() for s in q.stdout.strip().splitlines()[0].split(",")]
    except Exception:  # no nvidia-smi: leave them out
        pass
    return info


def run_bench(bs=DEFAULT_BS, steps: int = 200, starts: bool = True, base: TrainConfig | None = None,
              config_file: str | None = None) -> dict:
    """``base`` (from ``config_file``): the learning and market settings of the benchmarked step."""
    market = load_embedded()
    rows = []
    for b in bs:
        rows.append(bench_b(b, steps, market, base=base))
    report = {"env": environment(), "rows": rows}
    if config_file is not None:
        report["config"] = config_file
    if starts:
        with tempfile.TemporaryDirectory() as d:
            report["cold_start_s"] = start_time(d)
            report["warm_start_s"] = start_time(d)
    return report


#: The bench table's columns (header, report key, format), and the order they give way on a
#: narrow console (numbers are never cut; --json has them all).
TABLE_COLUMNS = (("B", "b", "{:d}"), ("graph µs/step", "graph_us", "{:.1f}"), ("eager µs/step", "eager_us", "{:.1f}"),
                 ("eager numba µs", "eager_numba_us", "{:.1f}"),
                 ("env-steps/s", "env_steps_per_s", "{:,.0f}"), ("µs/env-step", "us_per_env_step", "{:.4f}"),
                 ("sim µs", "sim_us", "{:.1f}"), ("learn µs", "learn_us", "{:.1f}"),
                 ("collect µs", "collect_us", "{:.1f}"), ("update µs", "update_us", "{:.1f}"),
                 ("GPU MB", "gpu_mem_mb", "{:.0f}"),
                 ("nodes", "graph_nodes", "{:d}"), ("critical", "critical_nodes", "{:d}"),
                 ("floor µs", "floor_us", "{:.1f}"), ("meas/floor", "measured_over_floor", "{:.1f}"),
                 ("bound", "bound", "{}"), ("PyTorch eager µs", "torch_eager_us", "{:.1f}"),
                 ("PyTorch graph µs", "torch_graph_us", "{:.1f}"), ("× PyTorch", "x_pytorch", "{:.2f}"))
TABLE_GIVE_WAY = ("collect µs", "update µs", "eager numba µs", "PyTorch eager µs", "critical", "nodes", "meas/floor", "GPU MB", "sim µs",
                  "µs/env-step", "eager µs/step", "floor µs", "bound", "PyTorch graph µs", "learn µs")


def cell(value, fmt: str) -> str:
    """A table cell: "-" where a report lacks the value (an older one), a text value as it is (the reason
    a number is missing: peer cells), else the number formatted."""
    return "-" if value is None else value if isinstance(value, str) else fmt.format(value)


def format_table(report: dict, width: int | None = None):
    rows = [[cell(r.get(key), fmt) for _, key, fmt in TABLE_COLUMNS] for r in report["rows"]]
    headers = [name for name, _, _ in TABLE_COLUMNS]
    caption = (f"cold start {report['cold_start_s']:.1f} s, warm start {report['warm_start_s']:.1f} s (to the first step)"
               if "cold_start_s" in report else None)
    return fitted_table(headers, rows, width, [headers.index(c) for c in TABLE_GIVE_WAY], lead=0,
                        title=f"alpharl bench — {report['env'].get('gpu', '?')} ({report['env'].get('date')})",
                        caption=caption)


def main(argv=None) -> None:
    import argparse

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--b", type=int, nargs="*", default=list(DEFAULT_BS))
    ap.add_argument("--steps", type=int, default=200)
    ap.add_argument("--no-starts", action="store_true")
    ap.add_argument("--json", type=str, default=None)
    a = ap.parse_args(argv)
    report = run_bench(a.b, a.steps, not a.no_starts)
    from rich.console import Console

    console = Console()
    console.print(format_table(report, console.width))
    if a.json:
        with open(a.json, "w") as f:
            f.write(jsontext.dumps(report, indent=1))



# ------------------------------------------------------------------ data-parallel scaling (--gpus)
def rank_counts(gpus: int) -> list[int]:
    """Rank counts measured up to --gpus G: the powers of two below G, and G."""
    return sorted({1 << k for k in range(gpus.bit_length()) if 1 << k <= gpus} | {gpus})


def timed_rank_steps(config: TrainConfig, resume, comm) -> float:
    """One rank of ``bench_gpus``: two warm-up steps (eager, then capture), then ``config.steps`` replays;
    the slowest rank's steps/s (every rank starts and stops timing together, after a host collective)."""
    from alpharl.ranks import rank_config

    tr = IntegratedTrainer(rank_config(config), load_embedded(), comm=comm)
    sync = tr.ops.stream.synchronize
    tr.run(2)
    sync()
    comm.broadcast(None)
    t0 = time.perf_counter()
    tr.run(config.steps)
    sync()
    sps = config.steps / (time.perf_counter() - t0)
    rates = comm.gather(sps)
    return None if rates is None else min(rates)


def bench_gpus(b_per_rank: int, steps: int, gpus: int) -> dict:
    """Weak scaling: B = G x b_per_rank over G = rank_counts(gpus) spawned ranks (one GPU each, NCCL);
    env-steps/s per G and the scaling efficiency env-steps/s(G) / (G env-steps/s(1))."""
    from alpharl.launch import launch

    rows = []
    for g in rank_counts(gpus):
        # each rank's step is bench_config(b_per_rank)'s
        cfg = bench_config(b_per_rank * g, gpus=g, steps=steps, replay_capacity=max(65536, 4 * b_per_rank))
        eps = launch(cfg, backend="cuda", task=timed_rank_steps) * cfg.b
        rows.append({"gpus": g, "b": cfg.b, "b_per_rank": b_per_rank, "env_steps_per_s": eps,
                     "efficiency": eps / (g * rows[0]["env_steps_per_s"]) if rows else 1.0})
    return {"env": environment(), "scaling": rows}


SCALING_COLUMNS = (("GPUs", "gpus", "{:d}"), ("B", "b", "{:d}"), ("B/GPU", "b_per_rank", "{:d}"),
                   ("env-steps/s", "env_steps_per_s", "{:,.0f}"), ("efficiency", "efficiency", "{:.1%}"))


def format_scaling(report: dict, width: int | None = None):
    rows = [[fmt.format(r[key]) for _, key, fmt in SCALING_COLUMNS] for r in report["scaling"]]
    headers = [name for name, _, _ in SCALING_COLUMNS]
    return fitted_table(headers, rows, width, [], lead=0,
                        title=f"alpharl bench --gpus — {report['env'].get('gpu', '?')} ({report['env'].get('date')})",
                        caption="weak scaling: B/GPU fixed; efficiency = env-steps/s over G x that of one GPU")


if __name__ == "__main__":
    main()
