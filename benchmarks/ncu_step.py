"""One eager training step inside a profiler range, for Nsight Compute.

    ncu --clock-control none --profile-from-start off --metrics gpu__time_duration.sum --csv \
        python benchmarks/ncu_step.py --b 4096 --minibatch 256

Builds the trainer, runs ``--warm`` eager steps (compiles everything), then one
step between cuProfilerStart / cuProfilerStop, so the profile holds exactly the
kernels of one step (K = 1) in launch order.
"""
from __future__ import annotations

import argparse


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--b", type=int, default=16)
    ap.add_argument("--minibatch", type=int, default=256)
    ap.add_argument("--warm", type=int, default=3)
    a = ap.parse_args()
    from numba import cuda

    from alpharl.config import TrainConfig
    from alpharl.lobster.sample import load_embedded
    from alpharl.trainer import IntegratedTrainer

    cfg = TrainConfig(b=a.b, backend="cuda", graph=False, minibatch=a.minibatch, k_max=1,
                      replay_capacity=max(65536, 4 * a.b))
    tr = IntegratedTrainer(cfg, load_embedded())
    tr.run(a.warm)
    tr.ops.stream.synchronize()
    cuda.profile_start()
    tr.run(1)
    tr.ops.stream.synchronize()
    cuda.profile_stop()


if __name__ == "__main__":
    main()
