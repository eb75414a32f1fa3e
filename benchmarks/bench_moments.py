"""Step 14's batch statistics: eight ``rl_batch_moments`` launches against one
``rl_batch_moments_multi`` launch (the trainer's table, B env rows, M minibatch rows).

Prints one JSON line per measurement: variant, B, M, microseconds per step's
worth of statistics, measured two ways: ``eager`` (the launches one after the
other, device synchronised around the loop, so numba's host launch cost is
included) and ``graph`` (the launches captured once in a CUDA graph and
replayed, as the trainer runs them: this is the GPU time that counts). A last
line per size says whether the two variants left bit-identical ISVs.

    python benchmarks/bench_moments.py                 # GPU sizes
    ALPHARL_TARGET=sim python benchmarks/bench_moments.py --tiny   # smoke run on the simulator
"""
from __future__ import annotations

import argparse
import json
import time

import numpy as np

import alpharl  # noqa: F401  (chooses the target before numba is imported)
from alpharl import isv as S
from alpharl import target
from alpharl.cuda_kernels.reductions import (MOM_COUNT, MOM_N, REDUCE_BLOCK, pad_moments_inputs,
                                             rl_batch_moments, rl_batch_moments_multi)
from alpharl.signals import SIGNAL_MOMENTS, signal_moments_table


def _inputs(b: int, m: int, rng, stream):
    """Random x per statistic (its own length) and the trainer's weights: ones, or a closed-trade flag."""
    from numba import cuda

    ones = cuda.to_device(np.ones(max(b, m), np.float32), stream=stream)
    xs, ws = [], []
    for r in SIGNAL_MOMENTS:
        n = m if r.minibatch else b
        xs.append(cuda.to_device(rng.normal(size=n).astype(np.float32), stream=stream))
        ws.append(cuda.to_device((rng.random(n) < 0.1).astype(np.float32), stream=stream)
                  if r.by_trade_done else ones)
    return xs, ws


def _singles(xs, ws, table_host, isv, stream):
    def run():
        for x, w, row in zip(xs, ws, table_host):
            rl_batch_moments[1, REDUCE_BLOCK, stream](x, w, row[MOM_N], isv, *row[MOM_COUNT:])
    return run


def _multi(xs, ws, table, isv, stream):
    xt, wt = pad_moments_inputs(xs), pad_moments_inputs(ws)

    def run():
        rl_batch_moments_multi[len(xs), REDUCE_BLOCK, stream](xt, wt, table, isv)
    return run


def _eager_us(fn, stream, iters: int) -> float:
    fn()  # warm-up: compiles (or loads the cache) outside the timing
    stream.synchronize()
    t0 = time.perf_counter()
    for _ in range(iters):
        fn()
    stream.synchronize()
    return (time.perf_counter() - t0) / iters * 1e6


def _graph_us(fn, stream, iters: int) -> float:
    from alpharl.graph import CapturedGraph

    g = CapturedGraph(stream, fn)
    g.replay()
    stream.synchronize()
    t0 = time.perf_counter()
    for _ in range(iters):
        g.replay()
    stream.synchronize()
    g.close()
    return (time.perf_counter() - t0) / iters * 1e6


def bench(sizes: list[int], m: int, iters: int, rng) -> None:
    from numba import cuda

    stream = cuda.stream()
    graphs = not target.on_simulator()
    for b in sizes:
        xs, ws = _inputs(b, m, rng, stream)
        table_host = signal_moments_table(b, m)
        table = cuda.to_device(table_host, stream=stream)
        isv_single = cuda.to_device(S.sentinel_vector(), stream=stream)
        isv_multi = cuda.to_device(S.sentinel_vector(), stream=stream)
        variants = {f"{len(xs)} x rl_batch_moments": _singles(xs, ws, table_host, isv_single, stream),
                    "rl_batch_moments_multi": _multi(xs, ws, table, isv_multi, stream)}
        for name, fn in variants.items():
            row = dict(variant=name, B=b, M=m, eager_us=round(_eager_us(fn, stream, iters), 2))
            if graphs:
                row["graph_us"] = round(_graph_us(fn, stream, iters), 2)
            print(json.dumps(row), flush=True)
        same = np.array_equal(isv_single.copy_to_host(stream=stream), isv_multi.copy_to_host(stream=stream))
        print(json.dumps(dict(check="ISV bit-identical", B=b, M=m, ok=bool(same))), flush=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tiny", action="store_true", help="one small size, one iteration (simulator smoke run)")
    ap.add_argument("--iters", type=int, default=500)
    ap.add_argument("--m", type=int, default=64, help="Q minibatch rows M (the TD-error statistic's length)")
    args = ap.parse_args()
    rng = np.random.default_rng(0)
    if args.tiny:
        bench([8], 4, 1, rng)
        return
    bench([16, 256, 4096, 65536], args.m, args.iters, rng)


if __name__ == "__main__":
    main()
