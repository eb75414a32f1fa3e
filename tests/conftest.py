"""One suite, two targets: kernels run on a GPU when present, else under Numba's
CUDA simulator. ``ALPHARL_TARGET=sim|gpu`` forces either (see alpharl.target).

Random inputs replay: one seed per run (``ALPHARL_TEST_SEED``, else drawn once by
the controlling process and shown in the header) reaches every pytest-xdist
worker, and each test's generator is seeded by (run seed, crc32 of its node id),
which is the same in every process (``hash`` is salted per process)."""
import os
import shutil
import tempfile

import alpharl  # noqa: F401,I001  (first: chooses the numba target and BLAS threads before numpy/numba load)
from alpharl import target

import numpy as np
import pytest

from alpharl.lobster.cache import CACHE_DIR_ENV
from support import SEED_ENV, WORKER_SEED_KEY, node_seed

if target.on_simulator() and os.environ.get("ALPHARL_SIM_BLOCKS") != "stock":
    # The simulator's thread blocks without its busy wait: the same schedule, about half the time; and its
    # device-function calls without a module swap each (a third of a small GEMM's time) (tests/simblocks.py;
    # tests/test_simblocks.py compares both with the stock ones). ALPHARL_SIM_BLOCKS=stock keeps numba's own.
    import simblocks

    simblocks.install()

_SEED = pytest.StashKey[int]()
_CACHE = pytest.StashKey[str]()


def pytest_configure(config):
    # The LOBSTER cache of every test process (and the CLIs it starts) goes to a folder of its own,
    # never to the user's cache; shared by the process's tests, so a cached sample is parsed once.
    config.stash[_CACHE] = tempfile.mkdtemp(prefix="alpharl-test-cache-")
    os.environ[CACHE_DIR_ENV] = config.stash[_CACHE]
    worker = getattr(config, "workerinput", None)
    if worker is not None:  # an xdist worker: the controller's seed, never its own draw
        seed = int(worker[WORKER_SEED_KEY])
    elif SEED_ENV in os.environ:
        seed = int(os.environ[SEED_ENV])
    else:
        seed = int(np.random.SeedSequence().entropy % (2**32))
    config.stash[_SEED] = seed


def pytest_unconfigure(config):
    shutil.rmtree(config.stash.get(_CACHE, ""), ignore_errors=True)


@pytest.hookimpl(optionalhook=True)
def pytest_configure_node(node):
    """xdist (controller side): hand the run seed to each worker as it starts."""
    node.workerinput[WORKER_SEED_KEY] = node.config.stash[_SEED]


def run_seed(config) -> int:
    """The seed of this run, the same in the controller and every worker."""
    return config.stash[_SEED]


def pytest_report_header(config):
    return [f"alpharl target: {target.active()}  (ALPHARL_TARGET={os.environ.get('ALPHARL_TARGET', 'auto')})",
            f"random inputs seed: {SEED_ENV}={run_seed(config)}"]


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
    return np.random.default_rng(node_seed(run_seed(request.config), request.node.nodeid))
