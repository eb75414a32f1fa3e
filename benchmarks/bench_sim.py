"""Benchmark of the simulator step alone (not a test).

For each batch B it times ``LobSim.step`` (``lobsim_step``; with ``--synthetic``
also ``lobsim_synth_flow``) with CUDA events on one stream, replayed from a
CUDA graph of ``--graph-steps`` consecutive steps (each with its own row of
pre-drawn random actions; ``--eager`` times plain launches too), and reports
µs per step and backtest-events per second (B x events_per_step / step time).
Results go to ``benchmarks/results/sim_<date>.md`` and ``.json`` with the
device, the driver and the package versions.

    python benchmarks/bench_sim.py                          # B = 16 256 4096 65536 on the real AMZN day
    python benchmarks/bench_sim.py --b 65536 --events-per-step 32 --synthetic
    ALPHARL_TARGET=sim python benchmarks/bench_sim.py --quick   # smoke run, no GPU

Targets (H200): B = 65536 at least 1e9 backtest-events/s; B = 16 at most 20 µs
per step in a CUDA graph.
"""
from __future__ import annotations

import argparse
import dataclasses
import datetime as dt
import json
import platform
from importlib import metadata
from pathlib import Path

import numpy as np

import alpharl  # noqa: F401  (chooses the target before numba is imported)
from alpharl import target
from alpharl.sim.layout import QUEUE_MODELS
from bench_learn import Timer  # CUDA-event timing, wall clock under the simulator (same folder)

RESULTS = Path(__file__).resolve().parent / "results"
#: The real LOBSTER day used by default (the embedded 30k-row sample when it is absent).
DEFAULT_ZIP = Path(__file__).resolve().parents[2] / "shared/data/lobster/LOBSTER_SampleFile_AMZN_2012-06-21_5.zip"
TARGET_EVENTS_PER_S = 1e9
TARGET_SMALL_B_US = 20.0
#: Share of order actions among the random actions (the rest hold), so queues and fills are exercised.
ACTION_WEIGHTS = np.array([4, 1, 1, 2, 2, 2, 2, 1, 1], float)


def _versions() -> dict:
    out = {"python": platform.python_version()}
    for pkg in ("numba", "numba-cuda", "numpy", "cuda-bindings", "pyarrow"):
        try:
            out[pkg] = metadata.version(pkg)
        except metadata.PackageNotFoundError:
            out[pkg] = None
    return out


def _device() -> dict:
    from numba import cuda

    if target.on_simulator():
        return {"name": "CUDA simulator", "driver": None}
    dev = cuda.get_current_device()
    name = dev.name.decode() if isinstance(dev.name, bytes) else str(dev.name)
    drv = cuda.cudadrv.driver.driver.get_version()
    return {"name": name, "compute_capability": list(dev.compute_capability), "driver": ".".join(map(str, drv)),
            "runtime": ".".join(map(str, cuda.runtime.get_version()))}


def _market(args):
    from alpharl.lobster.load import load_lobster
    from alpharl.lobster.sample import load_embedded
    from alpharl.sim.market import SyntheticMarket
    from alpharl.sim.params import SynthParams

    if args.synthetic:
        return SyntheticMarket(SynthParams()), "synthetic (SynthParams defaults)"
    path = Path(args.data) if args.data else DEFAULT_ZIP
    if path.is_file():
        return load_lobster(path), path.name
    return load_embedded(), "embedded sample"


def bench_one(market, b: int, args) -> dict:
    from numba import cuda

    from alpharl.cuda_kernels.lobsim.stage import STAGE_SMEM_BYTES, step_launch
    from alpharl.sim.lobsim import LobSim
    from alpharl.sim.params import SimParams

    params = SimParams(events_per_step=args.events_per_step, episode_steps=args.episode_steps,
                       queue_model=args.queue_model, latency_events=args.latency)
    stream = cuda.stream()
    sim = LobSim(market, params, b, seed=0, stream=stream)
    if args.per_block or args.threads or args.smem_bytes or args.staged:
        sim.step_launch = step_launch(b, params.events_per_step, sim.levels, per_block=args.per_block,
                                      threads=args.threads, smem_bytes=args.smem_bytes or STAGE_SMEM_BYTES,
                                      staged=None if args.staged is None else args.staged == "yes")
    sim.specialize = not args.generic
    sim.reset()
    rng = np.random.default_rng(0)
    k = args.graph_steps
    acts = [cuda.to_device(rng.choice(9, size=b, p=ACTION_WEIGHTS / ACTION_WEIGHTS.sum()).astype(np.int32),
                           stream=stream) for _ in range(k)]

    def steps():
        for a in acts:
            sim.step(a)

    steps()                              # compile and warm up before any capture
    stream.synchronize()
    timer = Timer(stream)
    res = {"B": b, "events_per_step": params.events_per_step, "episode_steps": params.episode_steps,
           "queue_model": params.queue_model, "latency_events": params.latency_events,
           "launch": dataclasses.asdict(sim.step_launch), "generic": args.generic}
    if args.eager or target.on_simulator():
        res["eager_us"] = timer.time_us(steps, args.iters, args.warmup) / k
    if not target.on_simulator():
        from alpharl.graph import CapturedGraph

        graph = CapturedGraph(stream, steps)
        res["graph_nodes"] = graph.n_nodes
        res["graph_us"] = timer.time_us(graph.replay, args.iters, args.warmup) / k
        graph.close()
    best = res.get("graph_us", res.get("eager_us"))
    res["us_per_step"] = best
    res["events_per_s"] = b * params.events_per_step / (best * 1e-6)
    done = sim.done.copy_to_host()
    res["done_rate_last_step"] = float(done.mean())
    return res


def _table(results) -> str:
    rows = ["| B | events/step | µs/step (graph) | µs/step (eager) | backtest-events/s |",
            "|---:|---:|---:|---:|---:|"]
    for r in results:
        g = f"{r['graph_us']:.2f}" if "graph_us" in r else "-"
        e = f"{r['eager_us']:.2f}" if "eager_us" in r else "-"
        rows.append(f"| {r['B']} | {r['events_per_step']} | {g} | {e} | {r['events_per_s']:.3e} |")
    return "\n".join(rows)


def _verdict(results) -> list[str]:
    out = []
    for r in results:
        if r["B"] >= 65536:
            ok = r["events_per_s"] >= TARGET_EVENTS_PER_S
            out.append(f"B={r['B']}: {r['events_per_s']:.3e} backtest-events/s vs target {TARGET_EVENTS_PER_S:.0e}: "
                       f"{'met' if ok else 'NOT met'}")
        if r["B"] <= 16 and "graph_us" in r:
            ok = r["graph_us"] <= TARGET_SMALL_B_US
            out.append(f"B={r['B']}: {r['graph_us']:.2f} µs/step in a graph vs target {TARGET_SMALL_B_US} µs: "
                       f"{'met' if ok else 'NOT met'}")
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--b", type=int, nargs="+", default=[16, 256, 4096, 65536], help="batch sizes (backtests)")
    ap.add_argument("--events-per-step", type=int, default=16, help="market events per env step")
    ap.add_argument("--episode-steps", type=int, default=512, help="episode window in steps")
    ap.add_argument("--queue-model", default="probabilistic", choices=list(QUEUE_MODELS),
                    help="queue model (l3_fifo: price-time priority from the replayed file's order ids)")
    ap.add_argument("--latency", type=int, default=0, help="order entry latency in events")
    ap.add_argument("--synthetic", action="store_true", help="the synthetic order-flow market instead of the replay")
    ap.add_argument("--data", default=None, help="LOBSTER zip to replay (default: the AMZN 5-level sample)")
    ap.add_argument("--graph-steps", type=int, default=8, help="steps captured per CUDA graph (own actions each)")
    ap.add_argument("--iters", type=int, default=50, help="timed repetitions")
    ap.add_argument("--warmup", type=int, default=5, help="untimed repetitions first")
    ap.add_argument("--eager", action="store_true", help="also time plain launches")
    ap.add_argument("--per-block", type=int, default=None, help="lobsim_step backtests per block (tuning)")
    ap.add_argument("--threads", type=int, default=None, help="lobsim_step threads per block (tuning)")
    ap.add_argument("--smem-bytes", type=int, default=None, help="lobsim_step staging memory per block (tuning)")
    ap.add_argument("--staged", choices=["yes", "no"], default=None,
                    help="lobsim_step with / without shared-memory staging (tuning; default: by B)")
    ap.add_argument("--generic", action="store_true",
                    help="the registered lobsim_step (every feature compiled in), not the build for the parameters")
    ap.add_argument("--quick", action="store_true", help="tiny smoke run (B=2, 2 events/step, 1 iteration)")
    ap.add_argument("--out", type=Path, default=RESULTS, help="results folder")
    args = ap.parse_args(argv)
    if args.quick:
        args.b, args.events_per_step, args.episode_steps = [2], 2, 8
        args.graph_steps, args.iters, args.warmup = 2, 1, 0
    market, source = _market(args)
    device = _device()
    results = []
    for b in args.b:
        r = bench_one(market, b, args)
        results.append(r)
        print(f"B={b:6d}  {r['us_per_step']:10.2f} µs/step  {r['events_per_s']:.3e} backtest-events/s  "
              f"launch {r['launch']}", flush=True)
    table = _table(results)
    verdict = _verdict(results)
    print(table)
    print("\n".join(verdict))
    now = dt.datetime.now()
    stamp = now.strftime("%Y-%m-%d")
    tag = "_sim" if target.on_simulator() else ""
    meta = {"date": now.isoformat(timespec="seconds"), "device": device, "versions": _versions(), "market": source,
            "iters": args.iters, "warmup": args.warmup, "graph_steps": args.graph_steps}
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / f"sim_{stamp}{tag}.json").write_text(json.dumps({"meta": meta, "results": results}, indent=1))
    vers = ", ".join(f"{k} {v}" for k, v in meta["versions"].items() if v)
    md = (f"# Simulator step benchmark, {meta['date']}\n\n"
          f"Device: {device['name']} (driver {device.get('driver')}); {vers}.\n"
          f"Market: {source}; {args.queue_model} queue model, latency {args.latency} events; "
          f"CUDA graph of {args.graph_steps} steps, {args.iters} timed replays after {args.warmup} warm-up.\n\n"
          f"{table}\n\n" + "\n".join(f"- {v}" for v in verdict) + "\n")
    (args.out / f"sim_{stamp}{tag}.md").write_text(md)
    print(f"wrote {args.out / f'sim_{stamp}{tag}.md'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
