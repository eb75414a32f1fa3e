"""rl_gemm / rl_split_reduce through the layer launch helpers: forward vs float64,
backward (dX, [dW; db]) vs float64 finite differences, batch splits deterministic."""
import numpy as np
import pytest
from numba import cuda
from support import assert_all_written, nonzero_uniform, poisoned

from alpharl import target
from alpharl.cuda_kernels.nets import gemm as G
from alpharl import nets as nets_mod
from alpharl.nets import Launcher, Layer, dw_split
from alpharl.reference import nets as R

ROWS, K_IN, N_OUT = 67, 20, 5  # 67 rows: two M tiles, the second one ragged


def _layer(k_in=K_IN, n_out=N_OUT):
    return Layer("t.l", 0, k_in, n_out, 1.0)


def _params(rng, layer):
    return nonzero_uniform(rng, layer.size, -0.5, 0.5)


def _gate(on=1):
    return cuda.to_device(np.array([on], np.int32))


@pytest.mark.parametrize("act", [G.ACT_NONE, G.ACT_TANH])
def test_forward_matches_float64(rng, act):
    layer = _layer()
    p = _params(rng, layer)
    x = nonzero_uniform(rng, (ROWS, K_IN))
    out = poisoned(ROWS * N_OUT)
    Launcher().forward(_gate(), cuda.to_device(x.ravel()), ROWS, layer, cuda.to_device(p), out, act)
    got = assert_all_written(out).reshape(ROWS, N_OUT)
    w = p[layer.w].astype(np.float64).reshape(K_IN, N_OUT)
    ref = R.linear(x.astype(np.float64), w, p[layer.b].astype(np.float64), "tanh" if act == G.ACT_TANH else "none")
    np.testing.assert_allclose(got, ref, rtol=1e-4, atol=1e-6)


def _fd_loss(x, p, layer, gy, tanh):
    w = p[layer.w].reshape(layer.k_in, layer.n_out)
    return float((R.linear(x, w, p[layer.b], "tanh" if tanh else "none") * gy).sum())


def test_backward_dx_with_tanh_grad_matches_finite_differences(rng):
    """dX of L = sum(G * tanh(x W + b)): accumulate onto an existing dX, then times (1 - y^2) upstream."""
    layer = _layer(K_IN, N_OUT)
    p = _params(rng, layer).astype(np.float64)
    x = nonzero_uniform(rng, (ROWS, K_IN)).astype(np.float64)
    gy = nonzero_uniform(rng, (ROWS, N_OUT)).astype(np.float64)
    y = np.tanh(x @ p[layer.w].reshape(K_IN, N_OUT) + p[layer.b])
    dpre = (gy * (1 - y * y)).astype(np.float32)
    # Split dpre @ W^T into two accumulating launches (two heads into one dX), the last with the tanh' epilogue
    # of an upstream tanh output y_up: out = (dpre_a W_a^T + dpre_b W_b^T) * (1 - y_up^2).
    y_up = nonzero_uniform(rng, (ROWS, K_IN), -0.9, 0.9)
    out = poisoned(ROWS * K_IN)
    ln, dp = Launcher(), cuda.to_device(p.astype(np.float32))
    half = dpre.copy()
    half[:, 2:] = 0
    ln.backward_dx(_gate(), cuda.to_device(half.ravel()), ROWS, layer, dp, out, accumulate=False)
    rest = dpre - half
    ln.backward_dx(_gate(), cuda.to_device(rest.ravel()), ROWS, layer, dp, out, accumulate=True,
                   y_tanh=cuda.to_device(y_up.ravel()))
    got = assert_all_written(out).reshape(ROWS, K_IN)
    eps = 1e-6
    fd = np.zeros_like(x)
    for i in range(ROWS):
        for k in range(K_IN):
            xp, xm = x.copy(), x.copy()
            xp[i, k] += eps
            xm[i, k] -= eps
            fd[i, k] = (_fd_loss(xp, p, layer, gy, True) - _fd_loss(xm, p, layer, gy, True)) / (2 * eps)
    np.testing.assert_allclose(got, fd * (1 - y_up.astype(np.float64) ** 2), rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("split_min_rows", [None, 24])
def test_backward_dw_db_matches_finite_differences(rng, monkeypatch, split_min_rows):
    """[dW; db] = [X^T dY; 1^T dY], in one piece or split over the batch; bit-identical on a rerun.

    A small DW_SPLIT_MIN_ROWS makes the small test batch split as a large one would.
    """
    rows = ROWS
    if split_min_rows:
        monkeypatch.setattr(nets_mod, "DW_SPLIT_MIN_ROWS", split_min_rows)
    layer = _layer(K_IN, N_OUT)
    splits, _, _ = dw_split(rows, K_IN, N_OUT)
    assert (splits > 1) == bool(split_min_rows)
    p = _params(rng, layer).astype(np.float64)
    x = nonzero_uniform(rng, (rows, K_IN)).astype(np.float64)
    gy = nonzero_uniform(rng, (rows, N_OUT)).astype(np.float64)
    partial = cuda.device_array(splits * layer.size, np.float32)
    grads = poisoned(layer.size)
    ln = Launcher()
    dx, dy = cuda.to_device(x.astype(np.float32).ravel()), cuda.to_device(gy.astype(np.float32).ravel())
    ln.backward_dw(_gate(), dx, dy, rows, layer, grads, partial)
    got = assert_all_written(grads)
    eps = 1e-6
    fd = np.zeros(layer.size)
    for i in range(layer.size):
        pp, pm = p.copy(), p.copy()
        pp[i] += eps
        pm[i] -= eps
        fd[i] = (_fd_loss(x, pp, layer, gy, False) - _fd_loss(x, pm, layer, gy, False)) / (2 * eps)
    np.testing.assert_allclose(got, fd, rtol=1e-4, atol=1e-4)
    again = cuda.device_array(layer.size, np.float32)
    ln.backward_dw(_gate(), dx, dy, rows, layer, again, partial)
    assert np.array_equal(again.copy_to_host(), got)


def test_gate_zero_writes_nothing(rng):
    layer = _layer()
    out = poisoned(ROWS * N_OUT)
    Launcher().forward(_gate(0), cuda.to_device(nonzero_uniform(rng, ROWS * K_IN)), ROWS, layer,
                       cuda.to_device(_params(rng, layer)), out, G.ACT_TANH)
    assert np.isnan(out.copy_to_host()).all()


@pytest.mark.parametrize("n_splits", [1, 7, 43])
def test_split_reduce_sums_every_split(rng, n_splits):
    """rl_split_reduce = the float64 sum over splits, every output written, bit-identical on a rerun.

    43 splits: each group of splits runs its four-load loop and its remainder; 70 outputs: a ragged block."""
    size = 70
    part = nonzero_uniform(rng, (n_splits, size))
    d_part = cuda.to_device(part.ravel())
    out = poisoned(size)
    grid, block = G.split_reduce_launch(size)
    G.rl_split_reduce[grid, block](_gate(), d_part, np.int32(n_splits), np.int32(size), out)
    got = assert_all_written(out)
    np.testing.assert_allclose(got, part.astype(np.float64).sum(0), rtol=1e-5, atol=1e-5)
    again = poisoned(size)
    G.rl_split_reduce[grid, block](_gate(), d_part, np.int32(n_splits), np.int32(size), again)
    assert np.array_equal(again.copy_to_host(), got)
    idle = poisoned(size)
    G.rl_split_reduce[grid, block](_gate(0), d_part, np.int32(n_splits), np.int32(size), idle)
    assert np.isnan(idle.copy_to_host()).all()


def _launch_shape(shape, gate, a, b, bias, y, c, m, n, k, a_sm, a_sk, b_sk, b_sn, k_split, use_bias, act, beta,
                  ones_row, splits=1):
    kern, grid, block = G.gemm_launch(m, n, splits, shape)
    i32 = np.int32
    kern[grid, block](gate, a, b, bias, y, c, i32(m), i32(n), i32(k), i32(a_sm), i32(a_sk), i32(b_sk), i32(b_sn),
                      i32(k_split), i32(use_bias), i32(act), i32(beta), i32(ones_row))


@pytest.mark.slow
@pytest.mark.parametrize("shape", G.GEMM_SHAPES)
def test_every_tile_shape_matches_float64(rng, shape):
    """Each registered tile shape, on ragged sizes crossing its tiles, in the three operand layouts the
    layers use: A row-major with bias + tanh; B read transposed with beta = 1 and the tanh' epilogue;
    A read transposed, split over K, with the ones row (column sums of B)."""
    tm, tn = G.tile_of(shape[0], shape[1])
    # A ragged N tile and two K slices (both stages of the double buffer); two M tiles, the second ragged,
    # for the 64 x 64 shape (the others run the same code with other constants: one ragged M tile keeps
    # the simulator's time down).
    two_m_tiles = shape[:2] == (2, 2)
    m, n, k = (tm + 3 if two_m_tiles else tm - (61 if tm > 64 else 3)), (tn - 3 if tn > 32 else tn + 5), shape[2] + 3
    x = nonzero_uniform(rng, (m, k))
    w = nonzero_uniform(rng, (k, n))
    bias = nonzero_uniform(rng, n)
    # forward: C = tanh(X W + b)
    out = poisoned(m * n)
    dummy = cuda.to_device(np.zeros(1, np.float32))
    _launch_shape(shape, _gate(), cuda.to_device(x.ravel()), cuda.to_device(w.ravel()), cuda.to_device(bias),
                  dummy, out, m, n, k, k, 1, n, 1, k, 1, G.ACT_TANH, 0, 0)
    ref = np.tanh(x.astype(np.float64) @ w + bias)
    np.testing.assert_allclose(assert_all_written(out).reshape(m, n), ref, rtol=1e-4, atol=1e-5)
    # dX-like: C = (C0 + D V^T) * (1 - Y^2), V = [n, k] read transposed
    d = nonzero_uniform(rng, (m, k))
    v = nonzero_uniform(rng, (n, k))
    c0 = nonzero_uniform(rng, (m, n))
    yv = nonzero_uniform(rng, (m, n), -0.9, 0.9)
    out = cuda.to_device(c0.ravel().copy())
    _launch_shape(shape, _gate(), cuda.to_device(d.ravel()), cuda.to_device(v.ravel()), dummy,
                  cuda.to_device(yv.ravel()), out, m, n, k, k, 1, 1, k, k, 0, G.ACT_TANH_GRAD, 1, 0)
    ref = (c0.astype(np.float64) + d.astype(np.float64) @ v.T.astype(np.float64)) * (1 - yv.astype(np.float64) ** 2)
    np.testing.assert_allclose(out.copy_to_host().reshape(m, n), ref, rtol=1e-4, atol=1e-5)
    # dW-like: per split z, [X_z^T G_z; 1^T G_z] with X = [k, m] (rows = k), G = [k, n]
    xt = nonzero_uniform(rng, (k, m))
    g = nonzero_uniform(rng, (k, n))
    k_split = shape[2]
    splits = -(-k // k_split)
    out = poisoned(splits * (m + 1) * n)
    _launch_shape(shape, _gate(), cuda.to_device(xt.ravel()), cuda.to_device(g.ravel()), dummy, dummy, out,
                  m, n, k, 1, m, n, 1, k_split, 0, G.ACT_NONE, 0, 1, splits)
    got = assert_all_written(out).reshape(splits, m + 1, n)
    for z in range(splits):
        rows = slice(z * k_split, min(k, (z + 1) * k_split))
        ref = np.vstack([xt[rows].astype(np.float64).T @ g[rows], g[rows].astype(np.float64).sum(0, keepdims=True)])
        np.testing.assert_allclose(got[z], ref, rtol=1e-4, atol=1e-5)


def test_shape_choice_covers_every_product():
    """gemm_shape picks a registered shape for tiny and huge products; big tiles only when they fill the GPU."""
    for m in (1, 16, 300, 4096, 65536):
        for n in (1, 9, 21, 128, 189):
            assert G.gemm_shape(m, n) in G.GEMM_SHAPES
    assert G.gemm_shape(65536, 128) == (4, 4, 16)
    assert G.gemm_shape(65536, 189) == (4, 3, 16)  # two 96-wide N tiles pad 189 outputs less than 128-wide ones
    assert G.gemm_shape(64, 128) == ((2, 2, 32) if target.on_simulator() else (1, 1, 64))
    assert G.gemm_shape(2048, 128)[0] == 2
