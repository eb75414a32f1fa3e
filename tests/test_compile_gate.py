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


@pytest.fixture(scope="module")
def resources_gate():
    """One gate run over every kernel with --resources, for the two tests below: compiling the registry
    is most of a run's time (about a minute on two cores) and --resources adds little to it (ptxas
    through nvJitLink), so the GEMMs' register check reads the same run instead of compiling them again."""
    return _gate("--resources")


@pytest.mark.slow
def test_every_kernel_compiles_for_sm90(resources_gate):
    proc, report = resources_gate
    failed = [r for r in report["kernels"] if not r["ok"]]
    assert not failed, "\n".join(f"{r['kernel']}: {r['error']}" for r in failed)
    compiled = {r["kernel"] for r in report["kernels"]}
    assert compiled == {k.qualname for k in all_kernels()}
    assert proc.returncode == 0


@pytest.mark.slow
def test_gemm_accumulators_stay_in_registers(resources_gate):
    """Every GEMM tile shape assembles for sm_90 (ptxas through nvJitLink) with no stack frame and no
    spills: an accumulator array indexed by a loop variable anywhere would be placed in local memory."""
    names = [k.qualname for k in all_kernels() if k.name.startswith("rl_gemm_")]
    assert names
    _, report = resources_gate
    rows = [r for r in report["kernels"] if r["kernel"] in names]
    assert {r["kernel"] for r in rows} == set(names)
    for r in rows:
        assert r["ok"], r["error"]
        assert 0 < r["registers"] <= 255, r
        assert r["stack_bytes"] == 0 and r["spill_bytes"] == 0, r


def _product_launches() -> set[str]:
    """Names of the kernels the product code (alpharl/ but its NumPy reference, cli/) launches:
    ``k[grid, block](...)`` on a kernel's name, a kernel handed to a call (a launch helper), a kernel
    one branch of a conditional expression picks, and the GEMM tile kernels behind ``gemm_launch``."""
    import ast
    from pathlib import Path

    import alpharl
    from alpharl.cuda_kernels.nets.gemm import GEMM_KERNELS

    root = Path(alpharl.__file__).resolve().parent
    cli = root / "cli" if (root / "cli").is_dir() else root.parent / "cli"
    files = [p for p in root.rglob("*.py") if "reference" not in p.relative_to(root).parts] + list(cli.rglob("*.py"))

    def name_of(node):
        return node.id if isinstance(node, ast.Name) else node.attr if isinstance(node, ast.Attribute) else None

    used, called = set(), set()
    for path in files:
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Call):
                if isinstance(node.func, ast.Subscript):
                    used.add(name_of(node.func.value))
                used.update(name_of(a) for a in node.args)
                called.add(name_of(node.func))
            elif isinstance(node, ast.IfExp):  # a kernel chosen by a condition, launched under another name
                used.update((name_of(node.body), name_of(node.orelse)))
    if "gemm_launch" in called:
        used.update(k.name for k in GEMM_KERNELS.values())
    return used


def test_test_only_label_matches_the_product_launches():
    """A kernel is labelled test_only exactly when the product code never launches it."""
    launched = _product_launches()
    wrong = [f"{k.qualname}: test_only={k.test_only} but launched={k.name in launched}" for k in all_kernels()
             if k.test_only == (k.name in launched)]
    assert not wrong, "\n".join(wrong)


def test_gate_lists_the_test_only_label():
    proc, report = _gate("--list")
    assert proc.returncode == 0
    listed = {r["kernel"]: r["test_only"] for r in report["kernels"]}
    assert listed == {k.qualname: k.test_only for k in all_kernels()}
    assert 0 < sum(listed.values()) < len(listed)
