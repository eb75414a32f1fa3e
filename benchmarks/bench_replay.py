"""Throughput of the action samplers and the prioritized replay kernels.

Prints one JSON line per measurement: kernel (or phase), sizes, microseconds
per call (mean over --iters calls after a warm-up, device synchronised around
the loop, so eager launch overhead is included).

    python benchmarks/bench_replay.py                 # GPU sizes
    ALPHARL_TARGET=sim python benchmarks/bench_replay.py --tiny   # smoke run on the simulator
"""
from __future__ import annotations

import argparse
import json
import time

import numpy as np

import alpharl  # noqa: F401  (chooses the target before numba is imported)
from alpharl import isv as S
from alpharl.cuda_kernels.sampling.action import ACTION_BLOCK, action_grid, rl_action_kernel, rl_pi_action_kernel
from alpharl.prng import seed_states
from alpharl.replay import PrioritizedReplay
from alpharl.sizes import N_ACTIONS, N_ATOMS


def _timed(fn, iters: int) -> float:
    from numba import cuda

    fn()  # warm-up: compiles (or loads the cache) outside the timing
    cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(iters):
        fn()
    cuda.synchronize()
    return (time.perf_counter() - t0) / iters * 1e6


def _report(**row) -> None:
    print(json.dumps(row), flush=True)


def bench_actions(backtests: list[int], iters: int, rng) -> None:
    from numba import cuda

    isv = cuda.to_device(S.bootstrap_vector())  # the C51 support rl_action_kernel reads
    for b in backtests:
        pi = cuda.to_device(rng.normal(size=(b, N_ACTIONS)).astype(np.float32))
        q = cuda.to_device(rng.normal(size=(b, N_ACTIONS, N_ATOMS)).astype(np.float32))
        state = cuda.to_device(seed_states(0, b))
        actions = cuda.device_array(b, np.int32)
        logp = cuda.device_array(b, np.float32)
        grid = action_grid(b)
        us = _timed(lambda: rl_pi_action_kernel[grid, ACTION_BLOCK](pi, state, actions, logp), iters)
        _report(kernel="rl_pi_action_kernel", B=b, us_per_call=round(us, 2))
        us = _timed(lambda: rl_action_kernel[grid, ACTION_BLOCK](q, isv, state, actions), iters)
        _report(kernel="rl_action_kernel", B=b, us_per_call=round(us, 2))


def bench_replay(capacities: list[int], obs_dim: int, insert_b: int, m: int, iters: int, rng) -> None:
    from numba import cuda

    isv_host = S.bootstrap_vector()
    isv = cuda.to_device(isv_host)
    for cap in capacities:
        replay = PrioritizedReplay(cap, obs_dim, m, seed=0)
        batch = (cuda.to_device(rng.normal(size=(insert_b, obs_dim)).astype(np.float32)),
                 cuda.to_device(rng.integers(0, N_ACTIONS, insert_b).astype(np.int32)),
                 cuda.to_device(rng.normal(size=insert_b).astype(np.float32)),
                 cuda.to_device(np.zeros(insert_b, np.float32)),
                 cuda.to_device(rng.normal(size=(insert_b, obs_dim)).astype(np.float32)))
        # fill the buffer with distinct priorities, as after many Q steps
        state = replay.state_dict()
        state["priority"] = rng.uniform(0.01, 3.0, cap).astype(np.float32)
        state["meta"] = np.array([0, cap], np.int32)
        replay.load_state_dict(state)
        loss = cuda.to_device(rng.uniform(0.0, 3.0, m).astype(np.float32))
        sizes = dict(capacity=cap, obs_dim=obs_dim, insert_b=insert_b, m=m)
        _report(phase="insert", **sizes, us_per_call=round(_timed(lambda: replay.insert(*batch), iters), 2))
        _report(phase="draw (build_cdf + sample)", **sizes, us_per_call=round(_timed(lambda: replay.draw(isv, m), iters), 2))
        _report(phase="gather", **sizes, us_per_call=round(_timed(lambda: replay.gather(m), iters), 2))
        _report(phase="update_priorities", **sizes,
                us_per_call=round(_timed(lambda: replay.update_priorities(loss, m), iters), 2))
        _report(phase="K-loop iteration (sample + update)", **sizes,
                us_per_call=round(_timed(lambda: (replay.sample(isv, m), replay.update_priorities(loss, m)), iters), 2))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tiny", action="store_true", help="small sizes and few iterations (simulator smoke run)")
    ap.add_argument("--iters", type=int, default=200)
    ap.add_argument("--obs-dim", type=int, default=64)
    ap.add_argument("--insert-b", type=int, default=128, help="transitions inserted per env step (= B)")
    ap.add_argument("--m", type=int, default=256, help="Q minibatch rows per K-loop iteration")
    args = ap.parse_args()
    rng = np.random.default_rng(0)
    if args.tiny:
        bench_actions([32], 1, rng)
        bench_replay([64], 4, 8, 16, 1, rng)
        return
    bench_actions([16, 1024, 65536], args.iters, rng)
    bench_replay([2**14, 2**17, 2**20], args.obs_dim, args.insert_b, args.m, args.iters, rng)


if __name__ == "__main__":
    main()
