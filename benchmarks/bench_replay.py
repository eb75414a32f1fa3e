"""Throughput of the action samplers and the prioritized replay kernels.

Prints one JSON line per measurement: kernel (or phase), sizes, microseconds
per call (mean over --iters calls after a warm-up, device synchronised around
the loop, so eager launch overhead is included). Then the replay's two paths
(one block, grid: ``alpharl.cuda_kernels.replay.per``) at the learning step's
minibatches (--path-m): draw, gather and update_priorities each timed as a
CUDA graph of KERNEL_REPEATS calls (device time, as the step's graph runs
them), and one line saying whether both paths drew and wrote the same bits.

    python benchmarks/bench_replay.py                 # GPU sizes
    python benchmarks/bench_replay.py --paths-only    # the two paths at M = 4096 and 65536
    ALPHARL_TARGET=sim python benchmarks/bench_replay.py --tiny   # smoke run on the simulator
"""
from __future__ import annotations

import argparse
import json
import time

import numpy as np

import alpharl  # noqa: F401  (chooses the target before numba is imported)
from alpharl import isv as S
from alpharl.cuda_kernels.replay.per import PER_GRID_ABOVE
from alpharl.cuda_kernels.sampling.action import ACTION_BLOCK, action_grid, rl_action_kernel, rl_pi_action_kernel
from alpharl.prng import seed_states
from alpharl.replay import PrioritizedReplay
from alpharl.sizes import N_ACTIONS, N_ATOMS
from bench_learn import DEFAULT_OBS_DIM, MIN_REPLAY, Timer, device_us, replay_rows  # same folder

#: The learning step's minibatches (M = B) where the one-block replay cost more than the update (H200).
PATH_ROWS = (4096, 65536)
#: What both paths must write identically: the draw (and its sampler states) and the priority update.
PATH_OUTPUTS = ("mb_idx", "mb_weight", "sampler_state", "priority", "pmax")


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


def bench_paths(rows: list[int], obs_dim: int, iters: int, rng, min_slots: int = MIN_REPLAY) -> None:
    """draw, gather and update_priorities at each minibatch m on both paths (one block: grid_above = m;
    grid: grid_above = m - 1) from the same replay of max(min_slots, 4 m) slots with random priorities,
    as the learning benchmark fills it; then whether both paths' first draw and update were bit-identical."""
    from numba import cuda

    stream = cuda.stream()
    timer = Timer(stream)
    isv = cuda.to_device(S.bootstrap_vector())
    for m in rows:
        transitions = [cuda.to_device(a) for a in replay_rows(max(min_slots, 4 * m), obs_dim, rng)]
        cap = transitions[1].shape[0]
        priority = rng.uniform(0.01, 3.0, cap).astype(np.float32)
        loss = cuda.to_device(rng.uniform(0.0, 3.0, m).astype(np.float32))
        first = {}
        for path, grid_above in (("one block", m), ("grid", m - 1)):
            replay = PrioritizedReplay(cap, obs_dim, m, seed=0, stream=stream, grid_above=grid_above)
            replay.insert(*transitions)
            state = replay.state_dict()
            state["priority"] = priority
            replay.load_state_dict(state)
            replay.draw(isv, m)  # compiles; the first draw and update are compared below
            replay.update_priorities(loss, m)
            state = replay.state_dict()
            first[path] = [state[name] for name in PATH_OUTPUTS] + [isv.copy_to_host()[S.RL_PER_ESS_FRAC]]
            sizes = dict(path=path, m=m, capacity=cap, obs_dim=obs_dim)
            for phase, fn in (("draw", lambda: replay.draw(isv, m)), ("gather", lambda: replay.gather(m)),
                              ("update_priorities", lambda: replay.update_priorities(loss, m))):
                _report(phase=phase, **sizes, us_per_call=round(device_us(timer, fn, iters, 1), 2))
        same = all(np.array_equal(a, b) for a, b in zip(first["one block"], first["grid"]))
        _report(check="one block and grid: same idx, weights, ESS, states, priorities, pmax", m=m, same=same)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tiny", action="store_true", help="small sizes and few iterations (simulator smoke run)")
    ap.add_argument("--iters", type=int, default=200)
    ap.add_argument("--obs-dim", type=int, default=64)
    ap.add_argument("--insert-b", type=int, default=128, help="transitions inserted per env step (= B)")
    ap.add_argument("--m", type=int, default=256, help="Q minibatch rows per K-loop iteration")
    ap.add_argument("--path-m", type=int, nargs="+", default=list(PATH_ROWS),
                    help=f"minibatches timed on both replay paths (the default switch: m > {PER_GRID_ABOVE})")
    ap.add_argument("--path-obs-dim", type=int, default=DEFAULT_OBS_DIM,
                    help="observation width of the path comparison (the learning benchmark's)")
    ap.add_argument("--paths-only", action="store_true", help="only the comparison of the two replay paths")
    args = ap.parse_args()
    rng = np.random.default_rng(0)
    if args.tiny:
        bench_actions([32], 1, rng)
        bench_replay([64], 4, 8, 16, 1, rng)
        bench_paths([16], 4, 1, rng, min_slots=64)
        return
    if not args.paths_only:
        bench_actions([16, 1024, 65536], args.iters, rng)
        bench_replay([2**14, 2**17, 2**20], args.obs_dim, args.insert_b, args.m, args.iters, rng)
    bench_paths(args.path_m, args.path_obs_dim, args.iters, rng)


if __name__ == "__main__":
    main()
