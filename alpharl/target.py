"""Which execution target the Numba kernels use: a real GPU or the CUDA simulator.

Numba reads ``NUMBA_ENABLE_CUDASIM`` once, at import, so the choice is made
here, before anything imports numba. ``ALPHARL_TARGET`` forces it:

- ``ALPHARL_TARGET=sim``: Numba's CUDA simulator (kernels run as Python threads);
- ``ALPHARL_TARGET=gpu``: the real GPU (fails loudly when there is none);
- unset: the GPU when an NVIDIA driver is present, the simulator otherwise.
"""
from __future__ import annotations

import os
import sys
from pathlib import Path

ENV_VAR = "ALPHARL_TARGET"
SIM = "sim"
GPU = "gpu"


class TargetError(RuntimeError):
    """The requested target cannot be honoured (numba already imported, no GPU...)."""


def nvidia_driver_present() -> bool:
    """True when this machine has an NVIDIA kernel driver (checked without importing numba)."""
    return Path("/proc/driver/nvidia/version").exists() or Path("/dev/nvidiactl").exists()


def requested() -> str:
    value = os.environ.get(ENV_VAR, "").strip().lower()
    if value in ("", "auto"):
        return GPU if nvidia_driver_present() else SIM
    if value not in (SIM, GPU):
        raise TargetError(f"{ENV_VAR}={value!r}: expected 'sim', 'gpu' or 'auto'")
    return value


def source_fingerprint() -> str:
    """Hash of every Python source of the package (kernels, constants, registry)."""
    import hashlib

    root = Path(__file__).resolve().parent
    folders = [root]
    for name in ("cuda_kernels",):
        for cand in (root / name, root.parent / name):
            if cand.is_dir():
                folders.append(cand)
    h = hashlib.sha256()
    for folder in folders:
        for path in sorted(folder.rglob("*.py")):
            h.update(str(path.relative_to(folder)).encode())
            h.update(path.read_bytes())
    return h.hexdigest()[:16]


def configure_kernel_cache() -> None:
    """Point numba's on-disk kernel cache at a folder keyed by the package's sources.

    numba's cache=True notices edits of a kernel's own file but not of the
    module-level constants it imports (an ISV slot, a clamp bound), so a stale
    kernel could be loaded after an upgrade or an edit. Keying the folder by a
    hash of all sources makes any change start a fresh cache. An explicit
    NUMBA_CACHE_DIR is left alone.
    """
    if os.environ.get("NUMBA_CACHE_DIR"):
        return
    base = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "alpharl" / "numba"
    os.environ["NUMBA_CACHE_DIR"] = str(base / source_fingerprint())


def configure() -> str:
    """Set NUMBA_ENABLE_CUDASIM to match the requested target (and the kernel cache
    folder); return the target."""
    want = requested()
    sim_flag = "1" if want == SIM else "0"
    if "numba" in sys.modules:
        # Too late to switch: report what numba actually runs on.
        from numba import config

        active = SIM if config.ENABLE_CUDASIM else GPU
        if os.environ.get(ENV_VAR) and active != want:
            raise TargetError(f"{ENV_VAR}={want} but numba was imported first with target {active}")
        return active
    os.environ["NUMBA_ENABLE_CUDASIM"] = sim_flag
    configure_kernel_cache()
    return want


def active() -> str:
    """The target numba runs on in this process."""
    from numba import config

    return SIM if config.ENABLE_CUDASIM else GPU


def on_simulator() -> bool:
    return active() == SIM


#: Every place a kernel module runs other code or other shapes under the CUDA simulator than on
#: the GPU, with the reason. The simulator runs each thread as a Python thread, so its cost is
#: threads x steps; the GPU suite runs the GPU side of every switch (these are its defaults).
SIM_OVERRIDES: dict[str, str] = {
    "nets.gemm.pack2": "the simulator implements no libdevice function: pack2/lo_of/hi_of move the same bits "
                       "through struct instead of a register move",
    "nets.gemm.small_tiles": "gemm_shape keeps the 64-row tiles for small products instead of 32 x 32 (a quarter "
                             "of the threads); the 32 x 32 shape has its own tests (tests/nets/test_nets_gemm.py)",
    "nets.gemm.BLOCK": "the GEMM block is 8 x 8 threads instead of 16 x 16 (tiles a quarter of the GPU's, the "
                       "same kernel code with other constants: tile_of, the loads' thread slots and the "
                       "epilogue all follow BLOCK_X / BLOCK_Y)",
    "nets.gemm.SPLIT_COLS": "rl_split_reduce: one group of 256 outputs, one thread an output, instead of 32 "
                            "columns x 8 groups (the same sums; fewer Python threads)",
    "nets.gemm.SPLIT_GROUPS": "see nets.gemm.SPLIT_COLS",
    "nets.adam.GUARD_BLOCK": "rl_grad_guard's block: 32 threads instead of 1024, the same code at another "
                             "power-of-two width (tree_sum)",
    "reductions.REDUCE_BLOCK": "the single-block reductions (norms, the step's batch moments, the loss means): 32 "
                               "threads instead of 256, the same block-stride loop and tree at another "
                               "power-of-two width",
    "controllers.v_blend.V_BLEND_CTRL_BLOCK": "the V-blend controller's reduction: 32 threads instead of 1024, "
                                              "the same block-stride loop and tree at another width",
    "registry.options": "code-generation options (max_registers) mean nothing to the simulator, whose jit does "
                        "not take them",
}


def sim_override(name: str) -> bool:
    """True under the simulator: the switch ``name`` (a key of SIM_OVERRIDES) takes its simulator side."""
    if name not in SIM_OVERRIDES:
        raise KeyError(f"simulator switch {name!r} is not documented in alpharl.target.SIM_OVERRIDES")
    return on_simulator()


def gpu_or_sim(name: str, gpu, sim):
    """``gpu``, or ``sim`` under the simulator: the value of the documented switch ``name``."""
    return sim if sim_override(name) else gpu
