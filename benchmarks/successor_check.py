"""Every registered kernel through numba-cuda-mlir, numba-cuda's successor (a check, not a dependency).

numba-cuda stays in maintenance for the CUDA 13 lifetime; numba-cuda-mlir is
meant to take ``@cuda.jit`` kernels unchanged (``from numba_cuda_mlir import
cuda`` for ``from numba import cuda``). This script finds out how far that
holds for ours: it installs a stand-in ``numba`` module built from
numba_cuda_mlir (``cuda``, the scalar types, ``config``) before anything
imports numba, imports every kernel module of the registry
(alpharl.cuda_kernels), and for each registered kernel:

- compiles: ``numba_cuda_mlir.cuda.compile`` of the kernel with its registry
  signature to PTX for cc 9.0 (the H200); needs no GPU (the target's compute
  capability is given to the compiler's cache where there is no driver);
- runs (only where a GPU is present): the kernel is launched through a
  numba_cuda_mlir dispatcher for that signature, one block of RUN_THREADS
  threads, every array argument RUN_ELEMENTS zeros and every integer 1, then
  synchronised. It says the compiled code loads and completes on the device, not
  that its results are right. A sticky device error ends the runs there (the
  context is lost); the kernels after it are marked not run.

Prints a table kernel | compiles | runs | error (first line) and a summary;
--json FILE writes every row. Run it with a Python that has numba-cuda-mlir
and NOT the project's environment (it must not become a dependency):

    python -m venv --system-site-packages VENV && VENV/bin/pip install "numba-cuda-mlir[cu13]==0.6.0"
    PYTHONPATH=. VENV/bin/python benchmarks/successor_check.py [--json out.json] [NAME ...]
"""
from __future__ import annotations

import argparse
import contextlib
import importlib
import io
import json
import pkgutil
import sys
import time
import traceback
import types

#: The H200's compute capability: what the compile gate targets.
TARGET_CC = (9, 0)
#: The generic launch of the run column: one block of this many threads, arrays of this many zeros.
RUN_THREADS = 128
RUN_ELEMENTS = 1 << 16
#: numba's names the kernel modules import (``from numba import cuda, float32, ...``).
SCALAR_TYPES = ("float32", "float64", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
                "boolean")


def install_numba_stand_in():
    """sys.modules["numba"] := numba_cuda_mlir's cuda, scalar types and a config with the simulator off.
    Returns numba_cuda_mlir."""
    import numba_cuda_mlir
    from numba_cuda_mlir import cuda
    from numba_cuda_mlir import types as mtypes

    numba = types.ModuleType("numba")
    numba.__version__ = f"numba-cuda-mlir {numba_cuda_mlir.__version__}"
    numba.cuda = cuda
    numba.config = types.SimpleNamespace(ENABLE_CUDASIM=0)
    numba.types = mtypes
    for name in SCALAR_TYPES:
        setattr(numba, name, getattr(mtypes, name))
    sys.modules["numba"] = numba
    sys.modules["numba.cuda"] = cuda
    sys.modules["numba.cuda.libdevice"] = cuda.libdevice
    return numba_cuda_mlir


def gpu_present() -> bool:
    from numba_cuda_mlir import cuda

    try:
        return cuda.is_available() and len(cuda.gpus) > 0
    except Exception:  # no driver: no GPU
        return False


def pin_target_cc() -> None:
    """Without a driver the compiler asks the device for its compute capability; give it the target's."""
    from numba_cuda_mlir import tools

    if not hasattr(tools, "_cached_cc"):
        raise RuntimeError("numba_cuda_mlir.tools._cached_cc is gone: the no-GPU pin needs updating")
    tools._cached_cc = TARGET_CC


def import_kernel_modules() -> dict[str, str]:
    """Import every module of alpharl.cuda_kernels; {module: first line of its import error} of those that fail."""
    import alpharl.cuda_kernels as pkg

    failed = {}
    for info in pkgutil.walk_packages(pkg.__path__, prefix=pkg.__name__ + "."):
        try:
            importlib.import_module(info.name)
        except Exception as exc:  # report it, keep going
            failed[info.name] = first_line(exc)
    return failed


def first_line(exc: BaseException) -> str:
    """The exception's first line, and its root cause's where they differ: numba-cuda-mlir's internal
    errors say only "This line in your program has triggered a compiler bug:" on top, the MLIR
    verifier's message ("error: ...") is on the exception they were raised from."""
    def line(e):
        text = "".join(traceback.format_exception_only(type(e), e)).strip().splitlines()
        hits = [t.strip() for t in text if t.strip().startswith("error:")]
        return hits[0] if hits else (text[0] if text else type(e).__name__)

    root = exc
    while (root.__cause__ or root.__context__) is not None:
        root = root.__cause__ or root.__context__
    top, cause = line(exc), line(root)
    return top if cause == top else f"{top} [{cause}]"


def compile_one(k) -> tuple[bool, str | None, float]:
    from numba_cuda_mlir import cuda

    t0 = time.perf_counter()
    try:
        with contextlib.redirect_stdout(io.StringIO()):  # a failed compile prints its whole MLIR module
            ptx, _ = cuda.compile(k.py_func, k.signature, device=False, abi="numba", cc=TARGET_CC, output="ptx")
        ok = f"sm_{TARGET_CC[0]}{TARGET_CC[1]}" in ptx
        return ok, None if ok else "PTX does not target sm_90", time.perf_counter() - t0
    except Exception as exc:
        return False, first_line(exc), time.perf_counter() - t0


def launch_args(signature: str) -> list:
    """Arguments for the generic launch: zeros for arrays, 1 for integers, 0 for floats."""
    import numpy as np
    from numba_cuda_mlir import cuda
    from numba_cuda_mlir.numba_cuda.core import sigutils

    def zeros(t):
        return cuda.to_device(np.zeros((RUN_ELEMENTS,) + (1,) * (t.ndim - 1), np.dtype(str(t.dtype))))

    args, _ = sigutils.normalize_signature(signature)
    out = []
    for t in args:
        if hasattr(t, "ndim"):
            out.append(zeros(t))
        elif hasattr(t, "count") and hasattr(t.dtype, "ndim"):  # a UniTuple of arrays
            out.append(tuple(zeros(t.dtype) for _ in range(t.count)))
        elif "int" in str(t):
            out.append(np.dtype(str(t)).type(1))
        elif "float" in str(t):
            out.append(np.dtype(str(t)).type(0))
        else:
            raise TypeError(f"no generic value for a {t} argument")
    return out


def run_one(k) -> tuple[bool, str | None]:
    from numba_cuda_mlir import cuda

    try:
        kern = cuda.jit(k.signature)(k.py_func)
        kern[1, RUN_THREADS](*launch_args(k.signature))
        cuda.synchronize()
        return True, None
    except Exception as exc:
        return False, first_line(exc)


def check(names: list[str] | None) -> dict:
    mlir = install_numba_stand_in()
    import alpharl  # noqa: F401  (after the stand-in: its target check reads numba.config)

    gpu = gpu_present()
    if not gpu:
        pin_target_cc()
    import_failures = import_kernel_modules()
    from alpharl.cuda_kernels.registry import _REGISTRY

    kernels = sorted(_REGISTRY.values(), key=lambda k: k.qualname)
    rows, lost = [], None
    for k in kernels:
        if names and k.qualname not in names and k.name not in names:
            continue
        ok, err, seconds = compile_one(k)
        row = {"kernel": k.qualname, "signature": k.signature, "compiles": ok, "seconds": round(seconds, 2),
               "runs": None, "error": err}
        if gpu and ok:
            if lost:
                row["run_error"] = f"not run: the context was lost at {lost}"
            else:
                row["runs"], row["run_error"] = run_one(k)
                if not row["runs"] and "ILLEGAL" in (row["run_error"] or "").upper():
                    lost = k.qualname
        rows.append(row)
    return {"numba_cuda_mlir": mlir.__version__, "cc": list(TARGET_CC), "gpu": gpu,
            "module_import_failures": import_failures, "kernels": rows,
            "summary": {"kernels": len(rows), "compile": sum(r["compiles"] for r in rows),
                        "run": sum(bool(r["runs"]) for r in rows) if gpu else None}}


def table(report: dict) -> str:
    lines = ["| kernel | compiles | runs | error (first line) |", "|---|---|---|---|"]
    for r in report["kernels"]:
        runs = "no GPU" if not report["gpu"] else ("-" if r["runs"] is None else "yes" if r["runs"] else "no")
        err = r["error"] or r.get("run_error") or ""
        lines.append(f"| {r['kernel']} | {'yes' if r['compiles'] else 'no'} | {runs} | {err.replace('|', '/')} |")
    s = report["summary"]
    lines.append("")
    lines.append(f"numba-cuda-mlir {report['numba_cuda_mlir']}, cc {report['cc'][0]}.{report['cc'][1]}: "
                 f"{s['compile']} of {s['kernels']} kernels compile"
                 + (f", {s['run']} run" if report["gpu"] else " (no GPU: runs not tried)"))
    for mod, err in report["module_import_failures"].items():
        lines.append(f"module {mod} failed to import: {err}")
    return "\n".join(lines)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("names", nargs="*", help="only these kernels (qualified or bare names)")
    ap.add_argument("--json", default=None, help="also write the report here")
    a = ap.parse_args(argv)
    report = check(a.names or None)
    print(table(report))
    if a.json:
        with open(a.json, "w") as f:
            json.dump(report, f, indent=1)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
