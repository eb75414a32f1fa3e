"""GPU time per kernel of one training step (eager launches bracketed by CUDA events).

    python benchmarks/profile_step.py --b 16 --steps 20

Prints, per kernel name: launches per step, GPU µs per step, share of the step.
Event pairs around every launch serialise nothing the stream did not already
serialise; they add ~2 µs of event work per launch, so small kernels read high.
"""
from __future__ import annotations

import argparse
import collections

from alpharl.cuda_kernels import registry


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--b", type=int, default=16)
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--minibatch", type=int, default=64)
    a = ap.parse_args()
    from numba import cuda

    from alpharl.config import TrainConfig
    from alpharl.lobster.sample import load_embedded
    from alpharl.trainer import IntegratedTrainer

    tr = IntegratedTrainer(TrainConfig(b=a.b, backend="cuda", graph=False, minibatch=a.minibatch), load_embedded())
    tr.run(2)
    stream = tr.ops.stream
    records = []
    orig = registry.Kernel.__getitem__

    def patched(self, cfg):
        launch = orig(self, cfg)

        def run(*args):
            s, e = cuda.event(), cuda.event()
            s.record(stream)
            launch(*args)
            e.record(stream)
            records.append((self.name, s, e))
        return run

    registry.Kernel.__getitem__ = patched
    tr.run(a.steps)
    stream.synchronize()
    registry.Kernel.__getitem__ = orig
    per = collections.defaultdict(lambda: [0, 0.0])
    for name, s, e in records:
        per[name][0] += 1
        per[name][1] += cuda.event_elapsed_time(s, e) * 1e3
    total = sum(v[1] for v in per.values())
    print(f"B={a.b}: {len(records) / a.steps:.0f} launches/step, {total / a.steps:.1f} GPU µs/step (events included)")
    for name, (n, us) in sorted(per.items(), key=lambda kv: -kv[1][1]):
        print(f"{name:34s} {n / a.steps:6.1f}/step {us / a.steps:9.1f} µs/step {100 * us / total:5.1f}%")


if __name__ == "__main__":
    main()
