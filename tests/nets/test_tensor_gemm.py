"""Tensor-core products (alpharl.tensor_gemm): the choice of path and its plumbing everywhere; on a GPU
with nvmath-python, each wrapped product against float64 at TF32's tolerance, same bits twice, graph = eager.

TF32 tolerance: inputs rounded to 10 explicit mantissa bits (unit roundoff 2^-11), fp32 accumulation,
so each term a_ik b_kj is off by at most ~2^-10 of itself and K of them add up like a random walk:
|C - C64| <= TF32_TOL sqrt(K) rms_k(a_ik b_kj) per element (TF32_TOL = 4 x 2^-10: a margin of ~4
standard deviations over a few million elements). The bias sum db runs in fp32: |db - db64| <=
FP32_TOL sum_m |dy_mn|.
"""
import sys

import numpy as np
import pytest
from numba import cuda
from support import assert_all_written, nonzero_uniform, poisoned

from alpharl import target
from alpharl import tensor_gemm as TG
from alpharl.config import TENSOR_CORE_MODES, ConfigError, TrainConfig
from alpharl.cuda_kernels.nets import gemm as G
from alpharl.nets import Launcher, Layer

TF32_TOL = 4 * 2.0**-10
FP32_TOL = 2.0**-20
HIDDEN, NQ = 128, 189


# ------------------------------------------------------------------ everywhere (CI: the simulator)
def test_modes_and_choice():
    table = {(TG.FORWARD, 128, 128): 4096}
    for kind in (TG.FORWARD, TG.DX, TG.DW):
        assert not TG.wants("off", kind, "enc.l2", 128, 128, 1 << 20, table)
        assert TG.wants("on", kind, "enc.l2", 128, 128, 1, table)
        assert not TG.wants("on", kind, "enc.l1", 30, 128, 1 << 20, table)   # not a large layer
        assert not TG.wants("on", kind, "pi.out", 128, 9, 1 << 20, table)
    assert not TG.wants("auto", TG.FORWARD, "enc.l2", 128, 128, 4095, table)
    assert TG.wants("auto", TG.FORWARD, "enc.l2", 128, 128, 4096, table)
    assert not TG.wants("auto", TG.DX, "enc.l2", 128, 128, 1 << 20, table)      # shape not measured
    assert not TG.wants("auto", TG.FORWARD, "enc.l2", 64, 64, 1 << 20, table)   # another width: not measured
    with pytest.raises(ValueError):
        TG.wants("fast", TG.FORWARD, "enc.l2", 128, 128, 1, table)
    assert TG.tensor_gemm("off") is None


def test_measured_table_is_well_formed():
    for (kind, k_in, n_out), rows in TG.TC_MIN_ROWS.items():
        assert kind in (TG.FORWARD, TG.DX, TG.DW) and k_in > 0 and n_out > 0 and rows >= 1


def test_config_and_cli_carry_the_mode(tmp_path):
    from typer.testing import CliRunner

    from alpharl.cli.app import app

    assert TENSOR_CORE_MODES == TG.MODES and TrainConfig().tensor_cores == "off"
    cfg = TrainConfig(tensor_cores="auto").validate()
    assert 'tensor_cores = "auto"' in cfg.to_toml()
    assert TrainConfig.from_dict({"tensor_cores": "auto"}).tensor_cores == "auto"
    with pytest.raises(ConfigError, match="tensor_cores"):
        TrainConfig.from_dict({"tensor_cores": 1})
    with pytest.raises(ConfigError, match="--tensor-cores"):
        TrainConfig(tensor_cores="fast").validate()
    r = CliRunner().invoke(app, ["train", "--help"])
    assert "--tensor-cores" in r.output


def test_without_nvmath_the_numba_kernels_run(monkeypatch):
    """No nvmath (CI, or a GPU without the extra): auto falls back to the numba kernels, on refuses."""
    monkeypatch.setitem(sys.modules, "nvmath", None)   # import nvmath -> ImportError
    monkeypatch.setitem(sys.modules, "nvmath.bindings", None)
    monkeypatch.setattr(target, "on_simulator", lambda: False)
    why = TG.unavailable()
    assert why is not None and "nvmath" in why
    assert TG.tensor_gemm("auto") is None
    with pytest.raises(TG.TensorCoreError, match="nvmath"):
        TG.tensor_gemm("on")


@pytest.mark.skipif(not target.on_simulator(), reason="the simulator's side of the switch")
def test_simulator_always_runs_the_numba_kernels():
    from alpharl.learner import Learner
    from alpharl.nets import Nets

    assert TG.unavailable() is not None
    for mode in TG.MODES:
        assert TG.tensor_gemm(mode) is None
    learner = Learner(Nets(6, seed=0, hidden=8), 2, 2, tensor_cores="on")
    assert learner.tc is None and learner.launch.tc is None and all(s.tc is None for s in learner.side_launch)


@pytest.mark.parametrize("gate", [1, 0])
def test_tanh_passes_vs_numpy(rng, gate):
    """The epilogue passes of the tensor-core path (rl_tanh_rows, rl_tanh_grad_rows) against NumPy on
    random inputs: every element below ``size`` written, the tail beyond it and a gated-off launch left as
    they were (they run on any target, so the simulator checks them too)."""
    size, n = 300, 320   # two blocks of ELEMWISE_BLOCK, the second partly past size
    grid = -(-size // G.ELEMWISE_BLOCK)
    g = cuda.to_device(np.array([gate], np.int32))
    y0 = nonzero_uniform(rng, n, -3.0, 3.0)
    y = cuda.to_device(y0)
    G.rl_tanh_rows[grid, G.ELEMWISE_BLOCK](g, y, np.int32(size))
    want = y0.copy()
    if gate:
        want[:size] = np.tanh(y0[:size].astype(np.float64))
    np.testing.assert_allclose(y.copy_to_host(), want, rtol=1e-6, atol=1e-7)
    dx0, yt = nonzero_uniform(rng, n), nonzero_uniform(rng, n, -0.99, 0.99)
    dx = cuda.to_device(dx0)
    G.rl_tanh_grad_rows[grid, G.ELEMWISE_BLOCK](g, dx, cuda.to_device(yt), np.int32(size))
    want = dx0.copy()
    if gate:
        want[:size] = dx0[:size].astype(np.float64) * (1.0 - yt[:size].astype(np.float64) ** 2)
    np.testing.assert_allclose(dx.copy_to_host(), want, rtol=1e-6, atol=1e-7)


# ------------------------------------------------------------------ a GPU with nvmath-python
@pytest.fixture
def tc():
    if target.on_simulator():
        pytest.skip("needs a real GPU")
    why = TG.unavailable()
    if why is not None:
        pytest.skip(why)
    return TG.TensorGemm("on")


def _bound(a, b):
    """Per element of a @ b: TF32_TOL sqrt(K) x the RMS of its K terms (module docstring)."""
    a, b = a.astype(np.float64), b.astype(np.float64)
    k = a.shape[1]
    return TF32_TOL * np.sqrt(k) * np.sqrt((a * a) @ (b * b) / k) + 1e-30


def _check(got, ref, bound, what):
    err = np.abs(got.astype(np.float64) - ref)
    assert np.all(err <= bound), f"{what}: worst error {np.max(err / bound):.2f} x the TF32 bound"


def _twice_and_graph(run, out):
    """Bits of ``out`` after run() eagerly, again eagerly, and replayed from a captured graph (poisoned between)."""
    from alpharl.graph import CapturedGraph

    bits = []
    for how in ("eager", "eager", "graph"):
        out.copy_to_device(np.full(out.shape, np.nan, np.float32))
        if how == "graph":
            g = CapturedGraph(run.stream, run)
            g.replay()
            run.stream.synchronize()
            g.close()
        else:
            run()
            run.stream.synchronize()
        bits.append(out.copy_to_host().view(np.uint32))
    np.testing.assert_array_equal(bits[0], bits[1], err_msg="same inputs twice")
    np.testing.assert_array_equal(bits[0], bits[2], err_msg="graph = eager")


def _setup(rng, n_out, rows):
    layer = Layer("enc.l2" if n_out == HIDDEN else "q.adv", 0, HIDDEN, n_out, 1.0)
    p = nonzero_uniform(rng, layer.size, -0.5, 0.5)
    return layer, p, cuda.to_device(p)


@pytest.mark.gpu
@pytest.mark.parametrize("rows", [1000, 4099])
@pytest.mark.parametrize("n_out,act", [(HIDDEN, G.ACT_TANH), (NQ, G.ACT_NONE)])
def test_forward_vs_float64(tc, rng, rows, n_out, act):
    layer, p, dp = _setup(rng, n_out, rows)
    x = nonzero_uniform(rng, (rows, HIDDEN))
    out = poisoned(rows * n_out)
    stream = cuda.stream()
    ln = Launcher(stream, tc)
    gate = cuda.to_device(np.ones(1, np.int32))

    dx = cuda.to_device(x.ravel())

    def run():
        ln.forward(gate, dx, rows, layer, dp, out, act)
    run.stream = stream
    run()
    stream.synchronize()
    got = assert_all_written(out).reshape(rows, n_out)
    w = p[layer.w].reshape(HIDDEN, n_out)
    pre = x.astype(np.float64) @ w.astype(np.float64) + p[layer.b]
    ref = np.tanh(pre) if act == G.ACT_TANH else pre
    _check(got, ref, _bound(x, w), "forward")   # tanh is 1-Lipschitz: the same bound
    _twice_and_graph(run, out)
    assert tc.n_plans == 1


@pytest.mark.gpu
@pytest.mark.parametrize("rows", [1000, 4099])
@pytest.mark.parametrize("n_out,tanh_grad", [(HIDDEN, True), (NQ, False)])
def test_dx_vs_float64(tc, rng, rows, n_out, tanh_grad):
    layer, p, dp = _setup(rng, n_out, rows)
    dy = nonzero_uniform(rng, (rows, n_out))
    y = nonzero_uniform(rng, (rows, HIDDEN), -0.99, 0.99)
    out = poisoned(rows * HIDDEN)
    stream = cuda.stream()
    ln = Launcher(stream, tc)
    gate = cuda.to_device(np.ones(1, np.int32))
    ddy, dyt = cuda.to_device(dy.ravel()), cuda.to_device(y.ravel())

    def run():
        ln.backward_dx(gate, ddy, rows, layer, dp, out, False, y_tanh=dyt if tanh_grad else None)
    run.stream = stream
    run()
    stream.synchronize()
    got = assert_all_written(out).reshape(rows, HIDDEN)
    wt = p[layer.w].reshape(HIDDEN, n_out).T
    scale = (1.0 - y.astype(np.float64) ** 2) if tanh_grad else 1.0
    ref = (dy.astype(np.float64) @ wt.astype(np.float64)) * scale
    _check(got, ref, _bound(dy, wt) * np.abs(scale) + 1e-30, "dX")
    _twice_and_graph(run, out)


@pytest.mark.gpu
@pytest.mark.parametrize("rows", [1000, 4099])
@pytest.mark.parametrize("n_out", [HIDDEN, NQ])
def test_dw_db_vs_float64(tc, rng, rows, n_out):
    layer, _, _ = _setup(rng, n_out, rows)
    x = nonzero_uniform(rng, (rows, HIDDEN))
    dy = nonzero_uniform(rng, (rows, n_out))
    grads = poisoned(layer.size)
    stream = cuda.stream()
    ln = Launcher(stream, tc)
    tc.reserve(stream, rows)
    gate = cuda.to_device(np.ones(1, np.int32))
    dx_, ddy = cuda.to_device(x.ravel()), cuda.to_device(dy.ravel())

    def run():
        ln.backward_dw(gate, dx_, ddy, rows, layer, grads, None)
    run.stream = stream
    run()
    stream.synchronize()
    got = assert_all_written(grads)
    dw = got[layer.w].reshape(HIDDEN, n_out)
    _check(dw, x.astype(np.float64).T @ dy.astype(np.float64), _bound(x.T, dy), "dW")
    db = got[layer.b]
    _check(db, dy.astype(np.float64).sum(0), FP32_TOL * np.abs(dy.astype(np.float64)).sum(0), "db")
    _twice_and_graph(run, grads)


@pytest.mark.gpu
def test_gated_off_epilogue_writes_nothing(tc, rng):
    """The tanh pass is gated like every numba kernel (the product itself cannot be: module docstring)."""
    rows = 512
    layer, p, dp = _setup(rng, HIDDEN, rows)
    x = cuda.to_device(nonzero_uniform(rng, (rows, HIDDEN)).ravel())
    out = cuda.device_array(rows * HIDDEN, np.float32)
    ln = Launcher(0, tc)
    ln.forward(cuda.to_device(np.zeros(1, np.int32)), x, rows, layer, dp, out, G.ACT_NONE)
    plain = out.copy_to_host()
    ln.forward(cuda.to_device(np.zeros(1, np.int32)), x, rows, layer, dp, out, G.ACT_TANH)
    np.testing.assert_array_equal(out.copy_to_host(), plain)
