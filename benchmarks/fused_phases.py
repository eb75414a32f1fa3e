"""Where the fused learning update's time goes: ``rl_update_fused`` cut after each of its phases.

For each (B, M) and cooperative grid (blocks per SM), the update replayed from a CUDA graph with
phases A .. p for p = 1 .. N_PHASES (cumulative µs; a phase's cost is the step between two rows),
beside the launch sequence's whole update (``fused = off``); and per grid, what a bare grid barrier costs
(``rl_grid_barriers``: one launch of BARRIERS barriers) against a kernel boundary in a graph (a chain of
BARRIERS launches of it with no barrier).

    python benchmarks/fused_phases.py --b 16 256 --m 256 --per-sm 1 2 4 [--out DIR]
"""
from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np

import alpharl  # noqa: F401  (chooses the target before numba is imported)
from alpharl import isv as S
from alpharl import target

HERE = Path(__file__).resolve().parent
PHASES = "ABCDEFGHI"
#: Barriers (and chained launches) of the barrier probe.
BARRIERS = 32


def main(argv=None) -> int:
    import sys

    sys.path.insert(0, str(HERE))
    from bench_learn import DEFAULT_OBS_DIM, Timer, _batches, _timed
    from numba import cuda

    from alpharl.cuda_kernels.nets import fused as KF
    from alpharl.learner import Learner
    from alpharl.nets import Nets
    from alpharl.sizes import HIDDEN

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--b", type=int, nargs="+", default=[16, 256])
    ap.add_argument("--m", type=int, nargs="+", default=[256])
    ap.add_argument("--per-sm", type=int, nargs="+", default=[1, 2, 4], help="blocks per SM of the grid")
    ap.add_argument("--iters", type=int, default=200)
    ap.add_argument("--out", type=Path, default=None, help="write fused_phases.json here")
    args = ap.parse_args(argv)
    if target.on_simulator():
        print("needs a GPU: the CUDA simulator runs cooperative grids of one block")
        return 2
    rows = []
    stream = cuda.stream()
    timer = Timer(stream)
    probe = []
    for per_sm in args.per_sm:
        g = KF.fused_grid(per_sm)
        k = KF.rl_grid_barriers[g, KF.FUSED_BLOCK, stream]
        one, _ = _timed(lambda: k(np.int32(BARRIERS)), stream, timer, args.iters, 10, False)
        empty, _ = _timed(lambda: k(np.int32(0)), stream, timer, args.iters, 10, False)
        chain, _ = _timed(lambda: [k(np.int32(0)) for _ in range(BARRIERS)], stream, timer, args.iters, 10, False)
        probe.append({"per_sm": per_sm, "grid": g, "barrier_us": (one - empty) / BARRIERS,
                      "graph_node_us": chain / BARRIERS, "empty_launch_us": empty})
        print(f"grid {g:4d} ({per_sm}/SM): a grid barrier {(one - empty) / BARRIERS:.2f} µs; a kernel boundary in a "
              f"graph {chain / BARRIERS:.2f} µs (an empty launch alone {empty:.2f} µs)", flush=True)
    for b in args.b:
        for m in args.m:
            rng = np.random.default_rng(0)
            env, rep = _batches(b, m, DEFAULT_OBS_DIM, rng)
            isv = cuda.to_device(S.bootstrap_vector())
            gate = cuda.to_device(np.ones(1, np.int32))
            seq = Learner(Nets(DEFAULT_OBS_DIM, seed=0, hidden=HIDDEN), b, m, stream=stream, fused="off")
            us_seq, _ = _timed(lambda: seq.update(env, rep, isv, gate), stream, timer, args.iters, 10, False)
            for per_sm in args.per_sm:
                ln = Learner(Nets(DEFAULT_OBS_DIM, seed=0, hidden=HIDDEN), b, m, stream=stream, fused="on")
                ln.fused_grid = KF.fused_grid(per_sm)
                cum = []
                for p in range(1, KF.N_PHASES + 1):
                    ln.fused_last_phase = p
                    us, _ = _timed(lambda: ln.update(env, rep, isv, gate), stream, timer, args.iters, 10, False)
                    cum.append(us)
                row = {"B": b, "M": m, "per_sm": per_sm, "grid": ln.fused_grid, "sequence_us": us_seq,
                       "fused_us": cum[-1], "cumulative_us": dict(zip(PHASES, cum)),
                       "phase_us": dict(zip(PHASES, np.diff([0.0] + cum).tolist()))}
                rows.append(row)
                print(f"B={b:5d} M={m:5d} grid {ln.fused_grid:4d} ({per_sm}/SM): fused {cum[-1]:8.1f} µs, "
                      f"sequence {us_seq:7.1f} µs; phases " +
                      " ".join(f"{k} {v:.1f}" for k, v in row["phase_us"].items()), flush=True)
    if args.out is not None:
        args.out.mkdir(parents=True, exist_ok=True)
        (args.out / "fused_phases.json").write_text(json.dumps({"barriers": probe, "updates": rows}, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
