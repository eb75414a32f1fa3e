"""Compile every registered kernel for the real GPU target, without a GPU.

The CUDA simulator checks no types, so a kernel that passes every simulator
test can still fail to compile for the device. This gate compiles each kernel
of the registry with its launch signature to PTX for ``sm_90`` (the H200), using
the CUDA 13 toolkit wheels, and reports every failure.

With ``--resources`` it also assembles each kernel's PTX to sm_90 machine code
through nvJitLink (a toolkit wheel: no GPU, no driver) and reports what ptxas
gave it: registers a thread, stack frame and spill bytes. A kernel meant to keep
its working set in registers (the GEMMs' accumulators) shows a stack frame when
the compiler had to put an array in local memory.

``--list`` prints the registry (name, signature, ``test_only``) without compiling.

Run as ``python -m alpharl.cuda_kernels.compile_gate [--list] [--resources] [NAME ...]``
(it must start in a fresh process: the simulator flag is read when numba is
imported).
"""
from __future__ import annotations

import json
import os
import re
import sys
import time
import traceback

TARGET_CC = (9, 0)


class _GateDevice:
    """Stands in for the current device while typing device-function calls.

    Typing a call to a ``device=True`` function asks the driver for the
    current compute capability; without a GPU that raises at driver init.
    This is the only place that shim lives.
    """

    compute_capability = TARGET_CC


def _install_device_shim() -> None:
    import numba.cuda.dispatcher as dispatcher

    if not hasattr(dispatcher, "get_current_device"):
        raise RuntimeError(
            "compile gate: numba.cuda.dispatcher.get_current_device is gone; "
            "the no-GPU shim needs updating for this numba-cuda version"
        )
    dispatcher.get_current_device = lambda: _GateDevice()


def ptxas_resources(ptx: str, max_registers: int | None = None) -> dict:
    """Registers a thread, stack frame and spill-store bytes ptxas assigns the PTX's kernel on
    TARGET_CC (the largest over its functions), through nvJitLink."""
    from cuda.bindings import nvjitlink

    opts = [f"-arch=sm_{TARGET_CC[0]}{TARGET_CC[1]}", "-verbose"]
    if max_registers:
        opts.append(f"-maxrregcount={max_registers}")
    data = ptx.encode()
    handle = nvjitlink.create(len(opts), opts)
    try:
        nvjitlink.add_data(handle, nvjitlink.InputType.PTX, data, len(data), "kernel.ptx")
        if "cudaCGGetIntrinsicHandle" in ptx:   # a grid barrier: the device runtime's part, as numba links it
            from numba.cuda.cudadrv.libs import get_cudalib

            nvjitlink.add_file(handle, nvjitlink.InputType.LIBRARY, get_cudalib("cudadevrt", static=True))
        nvjitlink.complete(handle)
        log = bytearray(nvjitlink.get_info_log_size(handle))
        nvjitlink.get_info_log(handle, log)
    finally:
        nvjitlink.destroy(handle)
    text = log.decode(errors="replace")

    def most(pattern):
        return max((int(v) for v in re.findall(pattern, text, re.IGNORECASE)), default=0)

    return {"registers": most(r"used (\d+) registers"), "stack_bytes": most(r"(\d+) bytes stack frame"),
            "spill_bytes": most(r"(\d+) bytes spill stores")}


def compile_all(names: list[str] | None = None, resources: bool = False) -> dict:
    import alpharl  # noqa: F401  (sets NUMBA_ENABLE_CUDASIM=0 before numba loads)
    from numba import config, cuda

    if config.ENABLE_CUDASIM:
        raise RuntimeError("compile gate must run with the CUDA simulator off")
    from alpharl.cuda_kernels.registry import all_kernels

    _install_device_shim()
    results = []
    for k in all_kernels():
        if names and k.qualname not in names:
            continue
        t0 = time.perf_counter()
        try:
            ptx, _ = cuda.compile(k.py_func, k.signature, device=False, abi="numba", cc=TARGET_CC, output="ptx")
            ok = ".target sm_90" in ptx
            err = None if ok else "PTX does not target sm_90"
            row = ptxas_resources(ptx, k.options.get("max_registers")) if ok and resources else {}
        except Exception as exc:  # report every failure, keep going
            ok, err, row = False, "".join(traceback.format_exception_only(type(exc), exc)).strip(), {}
        results.append({"kernel": k.qualname, "signature": k.signature, "test_only": k.test_only, "ok": ok,
                        "seconds": round(time.perf_counter() - t0, 3), "error": err, **row})
    return {"cc": list(TARGET_CC), "kernels": results}


def main() -> int:
    if os.environ.get("ALPHARL_TARGET") != "gpu":
        # The parent package already chose a target on import; start afresh with the real one.
        env = dict(os.environ, ALPHARL_TARGET="gpu")
        env.pop("NUMBA_ENABLE_CUDASIM", None)
        os.execve(sys.executable, [sys.executable, "-m", __spec__.name, *sys.argv[1:]], env)
    args = sys.argv[1:]
    if "--list" in args:
        from alpharl.cuda_kernels.registry import all_kernels

        rows = [{"kernel": k.qualname, "signature": k.signature, "test_only": k.test_only} for k in all_kernels()]
        json.dump({"kernels": rows}, sys.stdout, indent=1)
        sys.stdout.write("\n")
        return 0
    resources = "--resources" in args
    names = [a for a in args if a != "--resources"]
    report = compile_all(names or None, resources)
    json.dump(report, sys.stdout, indent=1)
    sys.stdout.write("\n")
    return 0 if report["kernels"] and all(r["ok"] for r in report["kernels"]) else 1


if __name__ == "__main__":
    sys.exit(main())
