"""--rollout T on the GPU: µs of a collect step and of an update step (each its own captured graph) against
the one-step path (T = 1), with the graphs' node counts and longest chains.

Prints one JSON line per (B, T): one_step_us (T = 1), collect_us, update_us, the mean step over a rollout
((T - 1) collect + 1 update) / T, and nodes / critical path of each graph. K = 1 (k_max 1), as alpharl bench.

    python benchmarks/bench_rollout.py                      # B 16 and 4096, T 1, 4, 16
    python benchmarks/bench_rollout.py --b 16 --t 16 --steps 50
"""
from __future__ import annotations

import argparse
import json
import time

import alpharl  # noqa: F401  (chooses the target before numba is imported)
from alpharl.config import TrainConfig
from alpharl.cuda_kernels.nets.advantage import ENV_COLLECT, ENV_GAE, ENV_ONE_STEP
from alpharl.lobster.sample import load_embedded
from alpharl.trainer import IntegratedTrainer


def _time_phase(tr: IntegratedTrainer, phase: int, reps: int) -> float:
    """µs per replay of ``phase``'s graph (captured by then), device synchronised around the loop."""
    g = tr.captured(phase)
    sync = tr.ops.stream.synchronize
    sync()
    t0 = time.perf_counter()
    for _ in range(reps):
        g.replay()
    sync()
    return 1e6 * (time.perf_counter() - t0) / reps


def bench(b: int, t_len: int, reps: int, market) -> dict:
    cfg = TrainConfig(b=b, backend="cuda", graph=True, replay_capacity=max(65536, 4 * b), minibatch=256, k_max=1,
                      rollout=t_len)
    tr = IntegratedTrainer(cfg, market)
    tr.run(3 * t_len if t_len > 1 else 3)  # each phase: an eager step, then captured and replayed
    row = {"b": b, "t": t_len}
    phases = (("one_step", ENV_ONE_STEP),) if t_len == 1 else (("collect", ENV_COLLECT), ("update", ENV_GAE))
    for name, phase in phases:
        # Replaying one phase's graph over and over is not the training schedule (the device step counter
        # moves on with each replay, so the store writes whichever slice it names), but every replay does
        # the same work: its time per replay is the phase's cost.
        row[f"{name}_us"] = _time_phase(tr, phase, reps)
        g = tr.captured(phase)
        row[f"{name}_nodes"], row[f"{name}_critical"] = g.n_nodes, g.critical_path()
    if t_len > 1:
        row["mean_step_us"] = ((t_len - 1) * row["collect_us"] + row["update_us"]) / t_len
    return row


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--b", type=int, nargs="*", default=[16, 4096])
    ap.add_argument("--t", type=int, nargs="*", default=[1, 4, 16])
    ap.add_argument("--steps", type=int, default=200)
    args = ap.parse_args()
    market = load_embedded()
    for b in args.b:
        for t_len in args.t:
            print(json.dumps(bench(b, t_len, args.steps, market)), flush=True)


if __name__ == "__main__":
    main()
