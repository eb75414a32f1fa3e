"""Every GEMM tile shape on the layer products of one size (not a test): which shape is fastest where.

    python benchmarks/gemm_shapes.py --rows 4608 8704 16384 33280

For each row count it times, on the GPU, the encoder's forward (rows x 128 x 128, tanh), its dX
(rows x 128 x 128, B read transposed) and the Q advantage stream's forward (rows x 128 x 189)
with every shape of ``GEMM_SHAPES`` (device time from a CUDA graph of 10 launches), and prints
µs and TFLOP/s per shape next to the shape ``gemm_shape`` picks.
"""
from __future__ import annotations

import argparse

import numpy as np

import alpharl  # noqa: F401  (chooses the target before numba is imported)
from bench_learn import KERNEL_REPEATS, Timer  # same folder


def time_shape(rows: int, k: int, n: int, shape, kind: str, stream, rng) -> tuple[float, float]:
    """(µs, TFLOP/s) of one product with one tile shape."""
    from numba import cuda

    from alpharl.cuda_kernels.nets import gemm as G
    from alpharl.graph import CapturedGraph

    i32 = np.int32
    gate = cuda.to_device(np.ones(1, np.int32))
    dummy = cuda.to_device(np.zeros(1, np.float32))
    x = cuda.to_device(rng.standard_normal(rows * max(k, n)).astype(np.float32))
    w = cuda.to_device(rng.standard_normal((k + 1) * n).astype(np.float32))
    y = cuda.device_array(rows * max(n, k) + n, np.float32)
    if kind == "forward":   # Y = tanh(X W + b)
        kern, grid, block = G.gemm_launch(rows, n, 1, shape)
        args = (gate, x, w[:k * n], w[k * n:], dummy, y, i32(rows), i32(n), i32(k), i32(k), i32(1), i32(n), i32(1),
                i32(k), i32(1), i32(G.ACT_TANH), i32(0), i32(0))
    else:                   # dX = dY W^T
        kern, grid, block = G.gemm_launch(rows, k, 1, shape)
        args = (gate, x, w[:k * n], dummy, dummy, y, i32(rows), i32(k), i32(n), i32(n), i32(1), i32(1), i32(n),
                i32(n), i32(0), i32(G.ACT_NONE), i32(0), i32(0))

    def launch():
        kern[grid, block, stream](*args)

    launch()
    stream.synchronize()
    g = CapturedGraph(stream, lambda: [launch() for _ in range(KERNEL_REPEATS)])
    us = Timer(stream).time_us(g.replay, 30, 5) / KERNEL_REPEATS
    g.close()
    return us, 2.0 * rows * k * n / us / 1e6


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rows", type=int, nargs="+", default=[4608, 8704, 16384, 33280])
    args = ap.parse_args(argv)
    from numba import cuda

    from alpharl.cuda_kernels.nets import gemm as G

    stream = cuda.stream()
    rng = np.random.default_rng(0)
    for rows in args.rows:
        for kind, k, n in (("forward", 128, 128), ("dX", 128, 128), ("forward", 128, 189)):
            cells = [f"{s}: {us:6.1f} µs {tf:5.1f} TF/s"
                     for s in G.GEMM_SHAPES for us, tf in [time_shape(rows, k, n, s, kind, stream, rng)]]
            picked = G.gemm_shape(rows, n if kind == "forward" else k)
            print(f"{rows} {kind} {k}x{n} picks {picked} | " + " | ".join(cells), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
