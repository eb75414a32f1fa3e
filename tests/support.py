"""Helpers shared by the tests: the run-wide seed, and poisoned outputs and finite differences
for the kernel tests."""
import zlib

import numpy as np
from numba import cuda

#: Environment variable that fixes the run's seed (to replay a run, give it the header's value).
SEED_ENV = "ALPHARL_TEST_SEED"
#: Key of the run seed in an xdist worker's ``workerinput`` (conftest.pytest_configure_node).
WORKER_SEED_KEY = "alpharl_seed"

#: Poison for outputs: a test fills outputs with it, so an element a kernel
#: failed to write is seen as NaN (floats) or this sentinel (ints).
INT_POISON = -123456789


def node_seed(run: int, nodeid: str) -> list[int]:
    """Seed words of one test's generator: the run seed and a stable hash of the test's node id
    (crc32: the same in every process, unlike the salted ``hash``)."""
    return [run, zlib.crc32(nodeid.encode())]


def poisoned(shape, dtype=np.float32):
    """A device array filled with NaN (floats) or INT_POISON (ints)."""
    host = np.empty(shape, dtype=dtype)
    host.fill(np.nan if np.issubdtype(dtype, np.floating) else INT_POISON)
    return cuda.to_device(host)


def assert_all_written(arr):
    a = arr.copy_to_host() if hasattr(arr, "copy_to_host") else np.asarray(arr)
    if np.issubdtype(a.dtype, np.floating):
        assert np.isfinite(a).all(), f"{np.count_nonzero(~np.isfinite(a))} elements not written (NaN poison left)"
    else:
        assert (a != INT_POISON).all(), f"{np.count_nonzero(a == INT_POISON)} elements not written"
    return a


def nonzero_uniform(rng, shape, lo=-1.0, hi=1.0, dtype=np.float32):
    """Random values in [lo, hi) with no exact zeros (zeros hide sentinel bugs)."""
    x = rng.uniform(lo, hi, size=shape)
    x[x == 0] = (hi - lo) * 0.5 + lo or 0.5
    return x.astype(dtype)


def central_differences(f, x, eps=1e-6):
    """Central finite differences of the scalar f at float64 x (any shape; x is restored)."""
    g = np.zeros_like(x)
    flat, gf = x.reshape(-1), g.reshape(-1)
    for i in range(flat.size):
        keep = flat[i]
        flat[i] = keep + eps
        up = f(x)
        flat[i] = keep - eps
        down = f(x)
        flat[i] = keep
        gf[i] = (up - down) / (2 * eps)
    return g
