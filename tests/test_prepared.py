"""alpharl.cuda_kernels.prepared: the key of a prepared launch, the cache's bounds and drops, the switch,
the simulator's fallback, and the packing against numba's own launch (real numba-cuda, a recording driver:
no GPU needed). The GPU side: tests/test_prepared_gpu.py."""
import gc
import os
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
from numba import cuda

from alpharl import target
from alpharl.cuda_kernels import prepared, registry
from alpharl.cuda_kernels.step_ops import rl_scale

ROOT = Path(__file__).resolve().parents[1]


class FakeArray:
    """Stands for a device array: identity is all the key reads of it."""


ARRAYS = (FakeArray,)


def key(*args, config=(4, 32, None), context="ctx"):
    return prepared.launch_key(context, config, args, ARRAYS)


def test_arrays_by_identity_scalars_by_type_and_bytes():
    a, b = FakeArray(), FakeArray()
    assert key(a, np.int32(3)) == key(a, np.int32(3))          # a new scalar object, the same value
    assert key(a, np.int32(3)) != key(b, np.int32(3))          # another array, whatever it holds
    assert key(np.int32(1)) != key(np.float32(1))              # equal numbers, other types
    assert key(np.int32(1)) != key(np.int64(1)) != key(1) != key(True)
    assert key(np.float32(0.0)) != key(np.float32(-0.0)) and key(0.0) != key(-0.0)
    assert key(np.float32(0.5)) != key(np.float32(0.25))
    assert key(a, config=(4, 32, None)) != key(a, config=(8, 32, None))
    assert key(a, context="other") != key(a)
    assert key((a, b), np.int32(1)) == key((a, b), np.int32(1)) != key((b, a), np.int32(1))


def test_an_unhashable_context_still_keys():
    class Context:  # numba's Context: __eq__ without __hash__ (unhashable), one object per device
        def __eq__(self, other):
            return self is other

    ctx, other = Context(), Context()
    a = FakeArray()
    assert key(a, context=ctx) is not None and key(a, context=ctx) == key(a, context=ctx)
    assert key(a, context=ctx) != key(a, context=other)


def test_what_cannot_be_prepared_has_no_key():
    assert key(np.zeros(3, np.float32)) is None               # a host array: numba copies it in and back
    assert key(cuda.In(np.zeros(3, np.float32))) is None
    assert key((FakeArray(), np.zeros(2))) is None and key("x") is None and key([FakeArray()]) is None
    assert key(np.int32(1), config=([4], 32, None)) is None    # an unhashable configuration


class FakeDispatcher:
    """numba's dispatcher as pack and Launch use it: one overload, configurations that launch by recording."""

    def __init__(self, prepare=True):
        self.normal = []                                       # launches made the normal way
        self._launch_config_sensitive = False
        self.overloads = {"sig": SimpleNamespace(debug=not prepare, cooperative=False, extensions=[])}

    def __getitem__(self, config):
        return lambda *args: self.normal.append((config, *plain(args)))


def plain(args):
    """Arguments without references to the arrays (so that the test can let them die)."""
    return tuple(id(a) if isinstance(a, FakeArray) else plain(a) if type(a) is tuple else a for a in args)


def fake_pack(dispatcher, config, args):
    if dispatcher.overloads["sig"].debug:
        return None
    return prepared.Entry(prepared._driver().launch, ("params of", config, *plain(args)), None)


@pytest.fixture
def fake_gpu(monkeypatch):
    """The GPU side of prepared with a recording driver (what the hit path hands it) and fake packing."""
    calls = []
    d = SimpleNamespace(launch=lambda *call: calls.append(call) or (0,), success=0, array_types=ARRAYS,
                        context=lambda: "ctx", error=RuntimeError)
    monkeypatch.setattr(prepared, "_driver", lambda: d)
    monkeypatch.setattr(prepared, "pack", fake_pack)
    monkeypatch.delenv(prepared.ENV_VAR, raising=False)
    prepared.COUNTS.reset()
    return calls


def test_first_launch_through_numba_then_prepared(fake_gpu):
    disp, launches, a = FakeDispatcher(), prepared.Launches(), FakeArray()
    cfg = (2, 64, None)
    prepared.Launch(launches, disp, cfg)(a, np.int32(5))
    assert disp.normal == [(cfg, id(a), np.int32(5))] and fake_gpu == []
    for _ in range(3):
        prepared.Launch(launches, disp, cfg)(a, np.int32(5))
    assert len(disp.normal) == 1 and fake_gpu == [("params of", cfg, id(a), np.int32(5))] * 3
    prepared.Launch(launches, disp, cfg)(a, np.float32(5))  # another scalar type: numba again, prepared again
    assert len(disp.normal) == 2 and len(launches.entries) == 2
    c = prepared.COUNTS
    assert (c.hits, c.misses, c.unprepared) == (3, 2, 0)


def test_unpreparable_launches_always_go_through_numba(fake_gpu):
    launches, host = prepared.Launches(), np.ones(4, np.float32)
    disp = FakeDispatcher()
    for _ in range(3):
        prepared.Launch(launches, disp, (1, 32, None))(host)   # no key
    debug = FakeDispatcher(prepare=False)
    for _ in range(3):
        prepared.Launch(launches, debug, (1, 32, None))(FakeArray())   # pack refuses
    assert len(disp.normal) == len(debug.normal) == 3 and fake_gpu == [] and launches.entries == {}
    assert prepared.COUNTS.unprepared == 6


def test_the_cache_is_bounded_and_drops_dead_arrays(fake_gpu, monkeypatch):
    monkeypatch.setattr(prepared, "CAP", 8)
    disp, launches = FakeDispatcher(), prepared.Launches()
    keep = [FakeArray() for _ in range(20)]
    for a in keep:
        prepared.Launch(launches, disp, (1, 32, None))(a, np.int32(1))
    del a
    assert len(launches.entries) == 8
    # the newest stay: launching one again is a hit
    prepared.Launch(launches, disp, (1, 32, None))(keep[-1], np.int32(1))
    assert len(fake_gpu) == 1 and len(disp.normal) == 20
    # an entry goes with its array (its id could name another object next)
    del keep[-3:]
    gc.collect()
    assert len(launches.entries) == 5
    # arrays inside a tuple argument count too
    pair = (FakeArray(), FakeArray())
    prepared.Launch(launches, disp, (1, 32, None))(pair, np.int32(1))
    assert len(launches.entries) == 6
    del pair
    gc.collect()
    assert len(launches.entries) == 5
    # per-call temporaries: never more than CAP entries, none kept alive by the cache
    for _ in range(50):
        prepared.Launch(launches, disp, (1, 32, None))(FakeArray(), np.int32(2))
    assert len(launches.entries) <= 8


def test_switch_sends_registry_launches_through_numba(fake_gpu, monkeypatch):
    k = registry.Kernel("k", __name__, lambda x: None, "void(int32)")
    disp = FakeDispatcher()
    monkeypatch.setattr(k, "_dispatcher", disp)
    monkeypatch.setattr(k, "_launches", prepared.Launches())
    assert isinstance(k[1, 32], prepared.Launch)
    for _ in range(2):
        k[1, 32](np.int32(7))
    assert len(disp.normal) == 1 and len(fake_gpu) == 1
    monkeypatch.setenv(prepared.ENV_VAR, "0")
    assert not isinstance(k[1, 32], prepared.Launch)
    k[1, 32](np.int32(7))
    assert len(disp.normal) == 2 and len(fake_gpu) == 1
    monkeypatch.setenv(prepared.ENV_VAR, "1")
    k[1, 32](np.int32(7))
    assert len(fake_gpu) == 2


@pytest.mark.skipif(not target.on_simulator(), reason="the simulator's side (the GPU's: test_prepared_gpu.py)")
def test_simulator_launches_through_numba_with_the_same_results(rng):
    n = 300
    x = rng.standard_normal(n).astype(np.float32)
    xd, out = cuda.to_device(x), cuda.device_array(n, np.float32)
    prepared.COUNTS.reset()
    launch = rl_scale[2, 256]
    assert not isinstance(launch, prepared.Launch) and rl_scale._launches is None
    for _ in range(2):
        launch(xd, np.int32(n), np.float32(1.5), out)
    np.testing.assert_array_equal(out.copy_to_host(), x * np.float32(1.5))
    c = prepared.COUNTS
    assert (c.hits, c.misses, c.unprepared) == (0, 0, 0)


#: Runs with the real numba-cuda (not its simulator) and no GPU: numba's own ``_Kernel.launch`` and
#: ``prepared.pack`` over the same kernel stand-in (numba's ``_prepare_args``, argument types of a
#: registry signature) and arguments; cuda.core's launch and the driver's replaced by recorders.
PACKING = r'''
import ctypes, numpy as np
from types import SimpleNamespace
import numba.cuda.dispatcher as D
from numba.cuda import types
from numba.cuda.cudadrv.devicearray import _StridedLayoutShim, _StridedMemoryViewShim
from alpharl.cuda_kernels import prepared

class Dev:
    """A device array as numba's packing reads it (pointer, shape, strides), at a made-up address."""
    __cuda_memory__ = True
    def __init__(self, ptr, shape, dtype):
        dt = np.dtype(dtype)
        self._strided_memory_view_shim = _StridedMemoryViewShim(
            ptr=ptr, shape=shape, dtype=dt, size=int(np.prod(shape)), _layout=_StridedLayoutShim(
                strides_in_bytes=np.empty(shape, dt).strides, is_contiguous_c=True,
                is_contiguous_f=len(shape) == 1, is_contiguous_any=True))

sig = (types.float32[::1], types.int32, types.float32, types.float32[:, ::1], types.boolean, types.int64,
       types.UniTuple(types.float32[::1], 2))
cufunc = SimpleNamespace(handle=0xC0FFEE, kernel="core kernel", name="k")
kern = SimpleNamespace(argument_types=sig, debug=False, cooperative=False, extensions=[],
                       _codelibrary=SimpleNamespace(get_cufunc=lambda: cufunc))
kern._prepare_args = D._Kernel._prepare_args.__get__(kern)
class Stream:  # hashable by identity, as numba's streams are
    handle = 0x5EED
stream = Stream()
lc = SimpleNamespace(griddim=(3, 2, 1), blockdim=(64, 4, 1), stream=stream, sharedmem=96,
                     pre_launch_callbacks=[])
class Disp:
    _launch_config_sensitive, overloads = False, {"sig": kern}
    def __getitem__(self, cfg):
        return lc
disp = Disp()
args = (Dev(0x7000, (10,), np.float32), np.int32(-7), np.float32(2.5), Dev(0x9000, (3, 5), np.float32), True, 2**40 + 3,
        (Dev(0xA000, (6,), np.float32), Dev(0xB000, (2,), np.float32)))

numba_calls = []
D.launch = lambda s, config, kernel, *kargs: numba_calls.append((s, config, kernel, kargs))
D._Kernel.launch(kern, args, lc.griddim, lc.blockdim, lc.stream, lc.sharedmem)
(s, config, kernel, kargs), = numba_calls

d = prepared._driver()
d.array_types = (Dev,)
entry = prepared.pack(disp, ("grid", "block", stream, 96), args)
f, gx, gy, gz, bx, by, bz, shmem, hstream, ptr, extra = entry.call
assert int(f) == cufunc.handle and kernel == "core kernel" and s is stream and extra == 0
assert (gx, gy, gz) == tuple(config.grid) and (bx, by, bz) == tuple(config.block)
assert shmem == config.shmem_size == 96 and not config.is_cooperative and int(hstream) == stream.handle

def block(ptr, kargs):
    """The bytes of each parameter a void** block points at, sized as cuda.core sizes numba's values."""
    slots = (ctypes.c_void_p * len(kargs)).from_address(ptr)
    return [ctypes.string_at(slots[i], ctypes.sizeof(v) if isinstance(v, ctypes._SimpleCData) else 8)
            for i, v in enumerate(kargs)]

numba_block = d.params(list(kargs))  # what cuda.core.launch would build from numba's arguments
ours = block(ptr, kargs)
assert ours == block(numba_block.ptr, kargs), (ours, block(numba_block.ptr, kargs))
# the values themselves: an array is (meminfo, parent, size, itemsize, ptr, shape..., strides...)
i64 = lambda b: int.from_bytes(b, "little", signed=True)
assert [i64(b) for b in ours[:7]] == [0, 0, 10, 4, 0x7000, 10, 4]
assert np.frombuffer(ours[7], np.int32)[0] == -7 and np.frombuffer(ours[8], np.float32)[0] == 2.5
assert [i64(b) for b in ours[9:18]] == [0, 0, 15, 4, 0x9000, 3, 5, 20, 4]
assert i64(ours[18]) == 1 and i64(ours[19]) == 2**40 + 3
assert [i64(b) for b in ours[20:]] == [0, 0, 6, 4, 0xA000, 6, 4, 0, 0, 2, 4, 0xB000, 2, 4]

assert entry.fn is d.launch
# a cooperative kernel: the same parameter block, launched by cuLaunchCooperativeKernel (no `extra`)
kern.cooperative = True
coop = prepared.pack(disp, ("grid", "block", stream, 96), args)
kern.cooperative = False
assert coop.fn is d.launch_cooperative and len(coop.call) == len(entry.call) - 1
assert int(coop.call[0]) == int(f) and coop.call[1:8] == entry.call[1:8] and int(coop.call[8]) == int(hstream)
assert block(coop.call[9], kargs) == ours

# a hit hands the driver exactly the stored call
hits = []
d.launch, d.success, d.context = (lambda *call: hits.append(call) or (0,)), 0, (lambda: "ctx")
entry.fn = d.launch
launches = prepared.Launches()
launches.put(prepared.launch_key("ctx", ("grid", "block", stream, 96), args, d.array_types), entry, args,
             d.array_types)
prepared.Launch(launches, disp, ("grid", "block", stream, 96))(*args)
assert hits == [entry.call]
print("packing ok")
'''


def test_packing_matches_numbas_own_launch():
    env = dict(os.environ, NUMBA_ENABLE_CUDASIM="0", ALPHARL_TARGET="gpu", PYTHONPATH=str(ROOT))
    out = subprocess.run([sys.executable, "-c", PACKING], env=env, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0 and "packing ok" in out.stdout, out.stderr[-3000:]
