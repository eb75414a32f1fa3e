"""The test seed replays: the header's seed is the one every xdist worker used, and
``ALPHARL_TEST_SEED`` reproduces each test's draws, with two workers or with none."""
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from support import SEED_ENV

ROOT = Path(__file__).resolve().parents[1]
#: Tests in the tiny suite: enough that both workers take some.
N_TINY = 8
TINY = f'''
import json
import os

import pytest


@pytest.mark.parametrize("k", range({N_TINY}))
def test_draw(k, rng):
    record = {{"worker": os.environ.get("PYTEST_XDIST_WORKER", "main"), "draws": rng.integers(0, 2**62, 4).tolist()}}
    with open(os.path.join(os.environ["DRAWS_DIR"], f"{{k}}.json"), "w") as f:
        json.dump(record, f)
'''


def _run(suite: Path, out: Path, seed: int | None, workers: int) -> tuple[int, dict]:
    """Run the tiny suite in a fresh pytest; returns (header seed, {test: record})."""
    out.mkdir()
    env = {k: v for k, v in os.environ.items() if k not in (SEED_ENV, "PYTEST_XDIST_WORKER")}
    env["DRAWS_DIR"] = str(out)
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), str(ROOT / "tests"), env.get("PYTHONPATH", "")])
    if seed is not None:
        env[SEED_ENV] = str(seed)
    dist = ["-p", "xdist", "-n", str(workers), "--dist", "load"] if workers else ["-p", "no:xdist"]
    proc = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-o", "addopts=",
                           "--rootdir", str(suite), *dist, str(suite)],
                          cwd=suite, env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    header = re.search(rf"{SEED_ENV}=(\d+)", proc.stdout)
    assert header, proc.stdout
    records = {p.stem: json.loads(p.read_text()) for p in out.glob("*.json")}
    assert len(records) == N_TINY
    return int(header.group(1)), records


@pytest.mark.slow
def test_header_seed_replays_across_xdist_workers(tmp_path):
    pytest.importorskip("xdist")
    suite = tmp_path / "suite"
    suite.mkdir()
    shutil.copy(Path(__file__).with_name("conftest.py"), suite / "conftest.py")
    (suite / "test_tiny.py").write_text(TINY)

    seed, first = _run(suite, tmp_path / "drawn", None, workers=2)
    assert {r["worker"] for r in first.values()} == {"gw0", "gw1"}
    draws = {k: r["draws"] for k, r in first.items()}
    assert len({tuple(d) for d in draws.values()}) == N_TINY  # one stream per test

    again, second = _run(suite, tmp_path / "replayed", seed, workers=2)
    assert again == seed and {k: r["draws"] for k, r in second.items()} == draws
    alone, third = _run(suite, tmp_path / "one-process", seed, workers=0)
    assert alone == seed and {k: r["draws"] for k, r in third.items()} == draws
    _, other = _run(suite, tmp_path / "other", seed + 1, workers=0)
    assert all(other[k]["draws"] != draws[k] for k in draws)
