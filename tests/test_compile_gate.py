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


def _gate(*args):
    """(process, JSON report) of the compile gate run for the real target in a fresh process."""
    env = dict(os.environ, ALPHARL_TARGET="gpu")
    env.pop("NUMBA_ENABLE_CUDASIM", None)
    proc = subprocess.run([sys.executable, "-m", "alpharl.cuda_kernels.compile_gate", *args],
                          capture_output=True, text=True, env=env, timeout=1200)
    assert proc.stdout, proc.stderr[-4000:]
    return proc, json.loads(proc.stdout)


@pytest.mark.slow
def test_every_kernel_compiles_for_sm90():
    proc, report = _gate()
    failed = [r for r in report["kernels"] if not r["ok"]]
    assert not failed, "\n".join(f"{r['kernel']}: {r['error']}" for r in failed)
    compiled = {r["kernel"] for r in report["kernels"]}
    assert compiled == {k.qualname for k in all_kernels()}
    assert proc.returncode == 0


@pytest.mark.slow
def test_gemm_accumulators_stay_in_registers():
    """Every GEMM tile shape assembles for sm_90 (ptxas through nvJitLink) with no stack frame and no
    spills: an accumulator array indexed by a loop variable anywhere would be placed in local memory."""
    names = [k.qualname for k in all_kernels() if k.name.startswith("rl_gemm_")]
    assert names
    _, report = _gate("--resources", *names)
    assert {r["kernel"] for r in report["kernels"]} == set(names)
    for r in report["kernels"]:
        assert r["ok"], r["error"]
        assert 0 < r["registers"] <= 255, r
        assert r["stack_bytes"] == 0 and r["spill_bytes"] == 0, r
