"""The data-parallel path on the GPUs this machine has (not a test: it needs CuPy's NCCL and a GPU).

1. G = 1 through NCCL: one trainer with the plain step and one whose step all-reduces through a
   one-rank NCCL communicator (eager and as a CUDA graph), same seed, N steps: every array of the
   state must be the same bits (a one-rank sum is a copy).
2. The spawned-process launcher with one rank on the cuda backend (NCCL of size 1): the run ends.
3. With two or more GPUs, ``alpharl train --gpus G`` through the spawned launcher: the run ends and
   its ranks' state digests agreed at every diagnostic interval (the run stops otherwise).

Usage: python benchmarks/ranks_check.py [--steps N] [--b B] [--gpus G]
Prints one line per check and exits 1 if any failed.
"""
from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile

import numpy as np

from alpharl.comm import NcclComm, RankError, _OneRankChannel
from alpharl.config import TrainConfig
from alpharl.launch import visible_gpus
from alpharl.lobster.sample import load_embedded
from alpharl.ranks import rank_config
from alpharl.trainer import IntegratedTrainer


def g1_through_nccl(steps: int, b: int, graph: bool) -> tuple[bool, str]:
    market = load_embedded()
    cfg = TrainConfig(steps=steps, b=b, seed=3, backend="cuda", graph=graph)
    plain = IntegratedTrainer(cfg, market)
    plain.run(steps)
    comm = NcclComm(_OneRankChannel())
    try:
        one = IntegratedTrainer(rank_config(cfg), market, comm=comm)
        one.run(steps)
        a, c = plain.state_dict(), one.state_dict()
    finally:
        comm.close()
    if a.keys() != c.keys():
        return False, f"state keys differ: {sorted(set(a) ^ set(c))}"
    differ = [k for k in a if not np.array_equal(a[k], c[k])]
    return not differ, (f"{len(a)} arrays equal" if not differ else f"{len(differ)} arrays differ, e.g. {differ[:3]}")


def spawned_one(steps: int, b: int) -> tuple[bool, str]:
    """The spawned-process launcher with one rank on the cuda backend (its NCCL communicator of size 1)."""
    from alpharl import launch

    with tempfile.TemporaryDirectory() as d:
        cfg = TrainConfig(steps=steps, b=b, seed=3, backend="cuda", gpus=1, run_dir=f"{d}/run",
                          diag_every=max(1, steps // 10))
        summary = launch.launch(cfg, backend="cuda")
        done = summary is not None and summary.get("step") == steps
        return done, f"summary step {None if summary is None else summary.get('step')} of {steps}"


def spawned(g: int, steps: int, b: int) -> tuple[bool, str]:
    with tempfile.TemporaryDirectory() as d:
        cmd = [sys.executable, "-m", "alpharl.cli", "train", "--gpus", str(g), "--b", str(b * g), "--steps",
               str(steps), "--diag-every", str(max(1, steps // 10)), "--backend", "cuda", "--run-dir", f"{d}/run",
               "--quiet"]
        p = subprocess.run(cmd, capture_output=True, text=True)
        tail = (p.stderr.strip().splitlines() or p.stdout.strip().splitlines() or [""])[-1]
        return p.returncode == 0, f"exit {p.returncode}: {tail[:200]}"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--steps", type=int, default=200)
    ap.add_argument("--b", type=int, default=16, help="backtests per GPU")
    ap.add_argument("--gpus", type=int, default=None, help="ranks of the spawned check (default: every GPU seen)")
    args = ap.parse_args(argv)
    checks = [(f"G=1 through NCCL, {'graph' if graph else 'eager'}", lambda graph=graph: g1_through_nccl(
        args.steps, args.b, graph)) for graph in (False, True)]
    checks.append(("spawned launcher, one rank (NCCL)", lambda: spawned_one(args.steps, args.b)))
    g = args.gpus or visible_gpus()
    if g >= 2:
        checks.append((f"spawned --gpus {g}", lambda: spawned(g, args.steps, args.b)))
    else:
        print(f"spawned --gpus G: skipped, this machine sees {visible_gpus()} GPU(s)")
    ok = True
    for name, check in checks:
        try:
            passed, detail = check()
        except (ValueError, RankError) as exc:   # no GPU, no CuPy NCCL: say so in one line
            print(f"ranks_check: {name}: {exc}", file=sys.stderr)
            return 2
        ok &= passed
        print(f"{name}: {'ok' if passed else 'FAILED'} ({detail})")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
