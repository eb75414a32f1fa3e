"""Compile gate: every registered kernel compiles for sm_90 with its real signature."""
import json
import os
import subprocess
import sys

import pytest

from alpharl.cuda_kernels.registry import all_kernels


def test_registry_finds_kernels_in_every_group():
    groups = {k.module.split(".")[2] for k in all_kernels()}
    assert {"controllers", "reductions"} <= groups


@pytest.mark.slow
def test_every_kernel_compiles_for_sm90():
    env = dict(os.environ, ALPHARL_TARGET="gpu")
    env.pop("NUMBA_ENABLE_CUDASIM", None)
    proc = subprocess.run([sys.executable, "-m", "alpharl.cuda_kernels.compile_gate"],
                          capture_output=True, text=True, env=env, timeout=1200)
    assert proc.stdout, proc.stderr[-4000:]
    report = json.loads(proc.stdout)
    failed = [r for r in report["kernels"] if not r["ok"]]
    assert not failed, "\n".join(f"{r['kernel']}: {r['error']}" for r in failed)
    compiled = {r["kernel"] for r in report["kernels"]}
    assert compiled == {k.qualname for k in all_kernels()}
    assert proc.returncode == 0
