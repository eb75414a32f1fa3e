"""Eager launches prepared once and handed straight to the driver.

numba prepares a launch's arguments anew at every call: it resolves their types against the kernel's
signature, wraps each array, converts each scalar to ctypes (``_Kernel._prepare_args``) and has
cuda.core copy the lot into a parameter block (``_Kernel.launch`` -> ``cuda.core.launch``). That is
more than half of an eager training step's host time at B = 16 (benchmarks/results/NOTES.md). A
step's launches pass the same device arrays (alpharl/views.py hands out the same views) and
per-step-constant scalars, so each launch's parameter block is the same at every step: here it is
built once by numba's own ``_prepare_args`` and cuda.core's own ``ParamHolder`` (the packer of
``cuda.core.launch``), kept, and a repeated launch is one ``cuLaunchKernel`` with it.

The key (``launch_key``): numba's context of the calling thread, the launch configuration as given
(grid, block, stream object, dynamic shared memory), device arrays by identity and scalars by type
and bytes (``np.int32(1)`` and ``np.float32(1)`` differ, so do 0.0 and -0.0), tuples item by item. An entry holds weak
references to its arrays and is dropped when one of them dies: the drop runs before the array's
memory is freed, so an id in a live key always names its array, and the cache never keeps a
temporary's device memory alive. Anything else (host arrays, which numba copies in and back;
``cuda.In``/``Out`` hints; records; foreign arrays) and every launch numba treats specially
(writebacks, debug or launch-config sensitive kernels, extensions, pre-launch callbacks) goes through
numba at every call. A cooperative kernel (a grid barrier: rl_update_fused) is prepared the same way and
launched with ``cuLaunchCooperativeKernel``.

What the direct launch leaves out of numba's, and why that is safe: the context lookup of
``get_cufunc`` (done here the same way per launch, and part of the key), the push of the current
launch arguments and the launch-config sensitivity bookkeeping (read only while compiling; a hit
never compiles), and cuda.core's ``launch``: ``cuLaunchKernelEx`` with no launch attributes, which
for a non-cooperative kernel without clusters is ``cuLaunchKernel`` with the same kernel handle,
grid, block, dynamic shared memory, stream and parameter block. Stream capture: ``cuLaunchKernel``
on a capturing stream records a kernel node as numba's launch does (the driver copies the
parameters at capture), and a miss (which may load a module) runs numba's path unchanged, so the
captured graphs are the same.

``ALPHARL_PREPARED_LAUNCH=0`` sends every launch through numba (read at each launch, so a
benchmark can time both ways in one process); under the CUDA simulator every launch goes through
numba's simulator.
"""
from __future__ import annotations

import contextlib
import functools
import os
import struct
import weakref
from types import SimpleNamespace

import numpy as np

#: The switch: ``0`` launches everything through numba's dispatcher; unset or anything else, prepared.
ENV_VAR = "ALPHARL_PREPARED_LAUNCH"
OFF = "0"
#: Prepared launches kept per kernel, the oldest dropped first: a step needs a few dozen of one kernel at
#: most (a GEMM per layer and direction), and launches on per-call temporaries cannot grow the cache.
CAP = 256

_F64 = struct.Struct("<d")


def switched_on() -> bool:
    return os.environ.get(ENV_VAR) != OFF


@contextlib.contextmanager
def switched(on: bool):
    """Prepared launches on or off inside the block (the environment variable, restored after)."""
    before = os.environ.get(ENV_VAR)
    os.environ[ENV_VAR] = "1" if on else OFF
    try:
        yield
    finally:
        if before is None:
            del os.environ[ENV_VAR]
        else:
            os.environ[ENV_VAR] = before


class Counts:
    """Launches since the last ``reset``: prepared (``hits``), through numba and then prepared
    (``misses``), through numba and not preparable (``unprepared``)."""

    __slots__ = ("hits", "misses", "unprepared")

    def __init__(self):
        self.reset()

    def reset(self) -> None:
        self.hits = self.misses = self.unprepared = 0


COUNTS = Counts()


@functools.cache
def _driver() -> SimpleNamespace:
    """What the GPU path needs from the CUDA bindings and numba (imported on first use: never under the
    simulator)."""
    from cuda.bindings import driver as binding
    from cuda.core._kernel_arg_handler import ParamHolder
    from numba.cuda.cudadrv.devicearray import DeviceNDArrayBase
    from numba.cuda.cudadrv.devices import get_context
    from numba.cuda.cudadrv.driver import CudaAPIError

    return SimpleNamespace(launch=binding.cuLaunchKernel, launch_cooperative=binding.cuLaunchCooperativeKernel,
                           success=binding.CUresult.CUDA_SUCCESS,
                           function=binding.CUfunction, stream=binding.CUstream, params=ParamHolder,
                           array_types=(DeviceNDArrayBase,), context=get_context, error=CudaAPIError)


def arg_key(a, array_types):
    """A launch argument's part of the key, or None when it cannot be prepared."""
    t = type(a)
    if t is int or t is bool:
        return t, a
    if t is float:
        return t, _F64.pack(a)
    if isinstance(a, (np.number, np.bool_)):
        return t, a.tobytes()
    if isinstance(a, array_types):
        return id(a)
    if t is tuple:  # a UniTuple of arrays: numba packs its items one by one
        parts = tuple(arg_key(x, array_types) for x in a)
        return None if None in parts else (t, parts)
    return None


def arrays_of(args, array_types):
    """The device arrays among ``args``, tuples opened."""
    for a in args:
        if isinstance(a, array_types):
            yield a
        elif type(a) is tuple:
            yield from arrays_of(a, array_types)


def launch_key(context, config, args, array_types):
    """The key of one launch (module docstring), or None when it cannot be prepared."""
    key = [id(context), config]  # numba's Context defines __eq__ without __hash__; one lives per device for the process
    for a in args:
        k = arg_key(a, array_types)
        if k is None:
            return None
        key.append(k)
    key = tuple(key)
    try:
        hash(key)
    except TypeError:  # a configuration given as lists
        return None
    return key


class Entry:
    """One prepared launch: the driver call's arguments and what must outlive them."""

    __slots__ = ("fn", "call", "keep", "refs")

    def __init__(self, fn, call: tuple, keep):
        self.fn = fn
        self.call = call
        self.keep = keep
        self.refs = ()


def pack(dispatcher, config, args):
    """The launch numba just made, prepared (an Entry), or None where numba does more than pack it."""
    if dispatcher._launch_config_sensitive or len(dispatcher.overloads) != 1:
        return None
    (kern,) = dispatcher.overloads.values()  # a registry kernel has exactly its one signature
    lc = dispatcher[config]  # numba's own configuration object (cached): normalised grid, block, stream
    if kern.debug or kern.extensions or lc.pre_launch_callbacks:
        return None
    retr, kernelargs = [], []
    for ty, val in zip(kern.argument_types, args):
        kern._prepare_args(ty, val, lc.stream, retr, kernelargs)
    if retr:  # copies back to the host after the launch
        return None
    d = _driver()
    params = d.params(kernelargs)  # copies every value: the block does not depend on kernelargs living
    cufunc = kern._codelibrary.get_cufunc()
    call = (d.function(int(cufunc.handle)), *lc.griddim, *lc.blockdim, lc.sharedmem,
            d.stream(int(lc.stream.handle)), params.ptr)
    if kern.cooperative:   # numba: cuLaunchKernelEx with the cooperative attribute, the same launch
        return Entry(d.launch_cooperative, call, (params, cufunc))
    return Entry(d.launch, call + (0,), (params, cufunc))


class Launches:
    """One kernel's prepared launches, at most CAP (the oldest dropped first)."""

    __slots__ = ("entries",)

    def __init__(self):
        self.entries: dict = {}

    def put(self, key, entry: Entry, args, array_types) -> None:
        entries = self.entries
        if len(entries) >= CAP:
            del entries[next(iter(entries))]

        def drop(_ref, key=key):
            entries.pop(key, None)

        entry.refs = [weakref.ref(a, drop) for a in arrays_of(args, array_types)]
        entries[key] = entry


class Launch:
    """``k[config]`` of a registry kernel on the GPU; calling it launches."""

    __slots__ = ("launches", "dispatcher", "config")

    def __init__(self, launches: Launches, dispatcher, config):
        self.launches, self.dispatcher, self.config = launches, dispatcher, config

    def __call__(self, *args):
        d = _driver()
        key = launch_key(d.context(), self.config, args, d.array_types)
        entry = None if key is None else self.launches.entries.get(key)
        if entry is not None:
            COUNTS.hits += 1
            (err,) = entry.fn(*entry.call)
            if err != d.success:
                raise d.error(err, f"cuLaunchKernel of {self.dispatcher.__module__}.{self.dispatcher.__name__}")
            return
        # numba's path: compiles and loads where needed, checks the arguments against the signature
        self.dispatcher[self.config](*args)
        entry = None if key is None else pack(self.dispatcher, self.config, args)
        if entry is None:
            COUNTS.unprepared += 1
            return
        COUNTS.misses += 1
        self.launches.put(key, entry, args, d.array_types)
