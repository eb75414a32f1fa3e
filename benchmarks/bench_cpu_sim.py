"""Benchmark of the CPU paths of the simulator for a few backtests (not a test).

Replays one pass over the embedded AMZN sample (episode_steps = 0) with random actions and times, per
backtest, the rows replayed per second: ``ReferenceLobSim.step`` (NumPy, one step a call) against
``CpuLobSim.run`` (the kernels' step compiled with njit, the whole pass in one call; compile time
excluded). Results go to ``benchmarks/results/cpu_sim_<date>.md``.

    python benchmarks/bench_cpu_sim.py [--b 1 4] [--ref-steps 300]
"""
from __future__ import annotations

import argparse
import datetime as dt
import platform
import time
from pathlib import Path

import numpy as np

import alpharl  # noqa: F401  (chooses the target before numba is imported)
from alpharl.lobster.sample import load_embedded
from alpharl.reference.lobsim import ReferenceLobSim
from alpharl.sim.cpu import CpuLobSim
from alpharl.sim.params import SimParams

from bench_sim import ACTION_WEIGHTS  # the random actions' mix, as the GPU benchmark's (same folder)

RESULTS = Path(__file__).resolve().parent / "results"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--b", type=int, nargs="+", default=[1, 4], help="backtests")
    ap.add_argument("--ref-steps", type=int, default=300, help="steps timed on the NumPy reference")
    args = ap.parse_args()
    md = load_embedded()
    p = SimParams(episode_steps=0, episode_end="horizon", fills_log_capacity=4096)
    lines = [f"# CPU simulator paths, {dt.date.today()}", "",
             f"{platform.processor() or platform.machine()}, {md.n_events} rows of {Path(str(md.source)).name}, "
             f"events_per_step {p.events_per_step}", "",
             "| B | reference rows/s per backtest | CpuLobSim.run rows/s per backtest | speed-up |", "|---|---|---|---|"]
    for B in args.b:
        rng = np.random.default_rng(0)
        ref = ReferenceLobSim(md, p, B, 1)
        acts = rng.choice(9, size=(ref.window_steps, B), p=ACTION_WEIGHTS / ACTION_WEIGHTS.sum()).astype(np.int32)
        ref.reset()
        n = min(args.ref_steps, len(acts))
        t0 = time.perf_counter()
        for t in range(n):
            ref.step(acts[t])
        ref_rate = n * p.events_per_step / (time.perf_counter() - t0)
        cpu = CpuLobSim(md, p, B, 1)
        cpu.reset()
        cpu.run(acts[:1])                   # compile
        cpu.reset()
        t0 = time.perf_counter()
        cpu.run(acts)
        cpu_rate = len(acts) * p.events_per_step / (time.perf_counter() - t0)
        row = f"| {B} | {ref_rate:,.0f} | {cpu_rate:,.0f} | {cpu_rate / ref_rate:.0f}x |"
        print(row, flush=True)
        lines.append(row)
    RESULTS.mkdir(exist_ok=True)
    out = RESULTS / f"cpu_sim_{dt.date.today()}.md"
    out.write_text("\n".join(lines) + "\n")
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
