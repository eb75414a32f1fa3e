"""The step kernel ``LobSim`` launches: ``lobsim_step`` compiled for the features its parameters use.

The registered ``lobsim_step`` carries every optional feature (latencies in time, the L3 queue,
last-seen entry queues, post-only, the sigma and quadratic penalties, the fills log, order instructions) and
tests each at run time. Off by default, each still cost the default model's hot loop its branches,
table loads and registers. Here the kernel modules are executed again (alpharl.sim.twins) with
the switches (alpharl.cuda_kernels.lobsim.switches) of the features a launch cannot use set False,
so their code is compiled out; a build is made once per switch set and process, and Numba's disk
cache keeps each (its kernels carry the switch key in their names, so builds never share an entry).
A switch is False only when the packed parameters make its run-time test false, so every build
computes what the generic kernel computes, bit for bit.
"""
from __future__ import annotations

import functools
import importlib
import types

from alpharl.cuda_kernels.lobsim import step as k_step
from alpharl.cuda_kernels.lobsim import switches
from alpharl.cuda_kernels.registry import Kernel
from alpharl.sim import layout as L
from alpharl.sim.twins import KERNEL_PACKAGE, twin_modules

#: The kernel modules of lobsim_step that read the switches (or import one that does), in import
#: order: these are built again; the others (book, observe, stage) are used as they are.
STEP_MODULES = ("agent", "backtest", "step")
SHARED_MODULES = ("book", "observe", "stage")


def switches_for(ip, instructions: bool) -> tuple[bool, ...]:
    """The switch values (in switches.NAMES order) of packed integer parameters ``ip``
    (layout.pack_params); ``instructions``: whether the step is given order instructions."""
    on = {"SYNTHETIC": ip[L.IP_SYNTHETIC] != 0,
          "FEED_DELAY": ip[L.IP_FEED_DELAY] != 0,
          "TIMED_ENTRY": ip[L.IP_TIMED_ENTRY] != 0,
          "RESP_DELAY": ip[L.IP_RESP_DELAY] != 0,
          "L3_FIFO": ip[L.IP_QUEUE_MODEL] == L.QUEUE_L3_FIFO,
          "LAST_SEEN": ip[L.IP_ENTRY_QUEUE] != 0,
          "POST_ONLY": ip[L.IP_POST_ONLY] != 0,
          "SIGMA_PENALTY": ip[L.IP_PENALTY_UNIT] == L.PENALTY_SIGMA,
          "QUADRATIC_PENALTY": ip[L.IP_PENALTY_QUADRATIC] != 0,
          "PEG": ip[L.IP_PEG] != 0,
          "FILLS_LOG": ip[L.IP_FILL_CAP] > 0,
          "INSTRUCTIONS": instructions}
    return tuple(bool(on[n]) for n in switches.NAMES)


def _unregistered(key: str):
    """Stands for registry.kernel in a build: a Kernel outside the registry (the compile gate and
    --list keep to the generic kernels), named with the build's key for Numba's cache."""

    def kernel(signature: str, test_only: bool = False, **options):
        def wrap(py_func):
            py_func.__qualname__ = f"{py_func.__name__}_{key}"
            return Kernel(py_func.__name__, py_func.__module__, py_func, signature, dict(options), test_only)

        return wrap

    return kernel


@functools.cache
def step_kernel(on: tuple[bool, ...], obs_shape: tuple[int, int] | None = None) -> Kernel:
    """lobsim_step built with the switches ``on`` (switches_for) and, given ``obs_shape`` = (threads
    of the launch, obs_dim), the block's observations staged in shared memory and stored together
    (a launch of one thread per backtest only); all on and no obs_shape: the registered kernel."""
    if all(on) and obs_shape is None:
        return k_step.lobsim_step
    key = "s" + "".join("1" if x else "0" for x in on) + ("" if obs_shape is None else "_o%dx%d" % obs_shape)
    prefix = f"{__name__}.{key}"
    sw = types.ModuleType(f"{prefix}.switches", switches.__doc__)
    sw.__dict__.update(zip(switches.NAMES, on), NAMES=switches.NAMES, OBS_STAGED=obs_shape is not None,
                       OBS_SHAPE=obs_shape or switches.OBS_SHAPE)
    given = {name: importlib.import_module(f"{KERNEL_PACKAGE}.{name}") for name in SHARED_MODULES}
    given["switches"] = sw
    return twin_modules(STEP_MODULES, prefix, given=given, bound={"kernel": _unregistered(key)})["step"].lobsim_step
