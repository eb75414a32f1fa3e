"""One suite, two targets: kernels run on a GPU when present, else under Numba's
CUDA simulator. ``ALPHARL_TARGET=sim|gpu`` forces either (see alpharl.target)."""
import os

import alpharl  # noqa: F401,I001  (first: chooses the numba target and BLAS threads before numpy/numba load)
from alpharl import target

import numpy as np
import pytest

_SEED = int(os.environ.get("ALPHARL_TEST_SEED", np.random.SeedSequence().entropy % (2**32)))


def pytest_report_header(config):
    return [f"alpharl target: {target.active()}  (ALPHARL_TARGET={os.environ.get('ALPHARL_TARGET', 'auto')})",
            f"random inputs seed: ALPHARL_TEST_SEED={_SEED}"]


def pytest_collection_modifyitems(config, items):
    # Longest first: with two workers the slow tests then overlap each other and the fast ones,
    # instead of one of them running alone at the end (a stable sort keeps the file order otherwise).
    items.sort(key=lambda item: item.get_closest_marker("slow") is None)
    if target.on_simulator():
        skip = pytest.mark.skip(reason="needs a real GPU: the CUDA simulator runs kernels as Python threads")
        for item in items:
            if "gpu" in item.keywords:
                item.add_marker(skip)


@pytest.fixture
def rng(request):
    """Fresh random inputs per run (seed shown in the header; set ALPHARL_TEST_SEED to replay)."""
    return np.random.default_rng([_SEED, abs(hash(request.node.nodeid)) % (2**32)])
