"""The fused narrow layers (cuda_kernels/nets/narrow.py) and the fused env-row tail (rl_env_rows):
kernels vs their float64 references, backward vs float64 finite differences, every output
written, nothing written outside, gate = 0 writes nothing; ragged row counts, B != M."""
import numpy as np
import pytest
from numba import cuda
from support import assert_all_written, central_differences, nonzero_uniform, poisoned

from alpharl import isv as S
from alpharl.cuda_kernels.nets import gemm as G
from alpharl.cuda_kernels.nets import losses as KL
from alpharl.cuda_kernels.nets import narrow as KN
from alpharl.cuda_kernels.nets.advantage import ENV_COLLECT, ENV_GAE, ENV_ONE_STEP, ENV_ROWS_BLOCK, rl_env_rows
from alpharl.nets import Launcher, NetLayout
from alpharl.reference import narrow as N
from alpharl.reference import nets as R
from alpharl.sizes import N_ACTIONS, N_ATOMS

#: Not a multiple of K_CHUNK: the backward's last hidden step is partial.
HIDDEN = KN.K_CHUNK + 8
OBS_DIM = 3


def _gate(on=True):
    return cuda.to_device(np.array([1 if on else 0], np.int32))


def _layout_params(rng):
    lay = NetLayout(OBS_DIM, HIDDEN)
    p = nonzero_uniform(rng, lay.n_params, -0.5, 0.5)
    target = p[:lay.n_target] + nonzero_uniform(rng, lay.n_target, -0.1, 0.1)
    return lay, p, target


# ------------------------------------------------------------------ forward
def _forward_outputs(n_rows, n_b, n_t):
    return dict(q_val=poisoned(n_rows * N_ATOMS), v_out=poisoned(n_rows), pi_logits=poisoned(n_b * N_ACTIONS),
                bce_out=poisoned(n_b), aux_out=poisoned(n_b), v_dq=poisoned(n_rows), t_val=poisoned(n_t * N_ATOMS))


def _support_isv(support):
    """A bootstrap ISV holding the C51 support [V_MIN, V_MAX] V_dq is taken on."""
    isv = S.bootstrap_vector()
    isv[S.RL_SUPPORT_V_MIN], isv[S.RL_SUPPORT_V_MAX] = support
    return isv


def _run_forward(gate, h, th, p, target, lay, n_b, outs, support=(-10.0, 10.0)):
    """The narrow forward as the learner launches it: Launcher.narrow_forward, then the target's q.val GEMM."""
    n_rows, n_t = len(h), len(th)
    ln = Launcher()
    w_narrow, y_narrow = poisoned((HIDDEN + 1) * KN.N_COLS), poisoned(n_rows * KN.N_COLS)
    ln.narrow_forward(gate, cuda.to_device(h.ravel()), n_rows, n_b, cuda.to_device(p),
                      cuda.to_device(KN.layer_offsets(lay)), w_narrow, y_narrow, cuda.to_device(_support_isv(support)),
                      tuple(outs[k] for k in ("q_val", "v_out", "pi_logits", "bce_out", "aux_out", "v_dq")))
    ln.forward(gate, cuda.to_device(th.ravel()), n_t, lay.layers["q.val"], cuda.to_device(target), outs["t_val"],
               G.ACT_NONE)


# (150, 40, 35): several GEMM row tiles with a ragged last one, the env rows ending inside a tile.
@pytest.mark.slow
@pytest.mark.parametrize("n_rows, n_b, n_t", [(1, 1, 1), (67, 20, 13), (150, 40, 35)])
def test_narrow_forward_matches_reference(rng, n_rows, n_b, n_t):
    lay, p, target = _layout_params(rng)
    h = nonzero_uniform(rng, (n_rows, HIDDEN), -1, 1)
    th = nonzero_uniform(rng, (n_t, HIDDEN), -1, 1)
    outs = _forward_outputs(n_rows, n_b, n_t)
    v_max = np.float32(10.0 ** rng.uniform(-2, 2))  # V_dq on a support --adaptive-support could have set
    support = np.array([-v_max, v_max], np.float32)
    _run_forward(_gate(), h, th, p, target, lay, n_b, outs, support)
    ref = N.forward(h.astype(np.float64), th.astype(np.float64), p.astype(np.float64), target.astype(np.float64),
                    lay, n_b, support)
    # Float32 rounding is relative to the terms summed, not to the result (which can cancel to ~0):
    # the same forward on |inputs| bounds every output's terms.
    mag = N.forward(np.abs(h.astype(np.float64)), np.abs(th.astype(np.float64)), np.abs(p.astype(np.float64)),
                    np.abs(target.astype(np.float64)), lay, n_b)
    for name, out in outs.items():
        got = assert_all_written(out).reshape(ref[name].shape)
        scale = np.abs(ref[name]).max() if name == "v_dq" else mag[name].max()
        np.testing.assert_allclose(got, ref[name], rtol=1e-4, atol=1e-6 * scale, err_msg=name)


# ----------------------------------------------------------------- backward
def _backward_inputs(rng, n_b, n_m):
    return dict(d_val=nonzero_uniform(rng, (n_m, N_ATOMS)), dv=nonzero_uniform(rng, n_b),
                d_pi=nonzero_uniform(rng, (n_b, N_ACTIONS)), dbce=nonzero_uniform(rng, n_b),
                daux=nonzero_uniform(rng, n_b))


def _run_backward(gate, h, p, lay, n_b, dy, dh_s, grads, dh):
    """rl_narrow_backward_dw + rl_narrow_dw_reduce + rl_narrow_backward_dx as the learner launches them."""
    n_m = len(dy["d_val"])
    hd, pd, offs = cuda.to_device(h.ravel()), cuda.to_device(p), cuda.to_device(KN.layer_offsets(lay))
    dys = [cuda.to_device(dy[k].ravel()) for k in ("d_val", "dv", "d_pi", "dbce", "daux")]
    rows = max(n_b, n_m)
    n_chunks, chunk_rows = KN.dw_split(rows)
    partial = poisoned(KN.dw_partial_size(rows, HIDDEN))
    KN.rl_narrow_backward_dw[KN.dw_grid(rows, HIDDEN), KN.DW_THREADS](
        gate, hd, *dys, np.int32(n_b), np.int32(n_m), np.int32(HIDDEN), np.int32(chunk_rows), partial)
    size = (HIDDEN + 1) * KN.N_COLS
    KN.rl_narrow_dw_reduce[-(-size // KN.NARROW_BLOCK), KN.NARROW_BLOCK](
        gate, partial, offs, np.int32(n_chunks), np.int32(HIDDEN), grads)
    dh.copy_to_device(np.concatenate([np.full((n_b, HIDDEN), np.nan, np.float32), dh_s]).ravel())
    KN.rl_narrow_backward_dx[KN.dx_grid(n_b + n_m, HIDDEN), KN.NARROW_BLOCK](
        gate, hd, pd, offs, *dys, np.int32(n_b), np.int32(n_m), np.int32(HIDDEN), dh)
    return n_chunks


def _narrow_loss(p, pre, lay, n_b, dy, dh_s):
    """sum of dY . Y over every narrow layer's rows + dh_s . h(s), h = tanh(pre): its gradients are what
    the backward kernels write (dh: d/d pre; grads: d/d p)."""
    h = np.tanh(pre)
    f = N.forward(h, h[:0], p, p, lay, n_b)
    return ((f["q_val"][n_b:] * dy["d_val"]).sum() + (f["v_out"][:n_b] * dy["dv"]).sum()
            + (f["pi_logits"] * dy["d_pi"]).sum() + (f["bce_out"] * dy["dbce"]).sum()
            + (f["aux_out"] * dy["daux"]).sum() + (h[n_b:] * dh_s).sum())


# dX: tiles holding both env and replay rows, a ragged last tile; dW: chunks of several staged row tiles
# (150, 20: 3 chunks of 50 rows), replay rows past the env rows (9, 70), a chunk count that is not a
# multiple of REDUCE_UNROLL.
@pytest.mark.slow
@pytest.mark.parametrize("n_b, n_m", [(1, 1), (67, 13), (9, 70), (150, 20)])
def test_narrow_backward_matches_reference_and_finite_differences(rng, n_b, n_m):
    lay, p, _ = _layout_params(rng)
    pre = nonzero_uniform(rng, (n_b + n_m, HIDDEN), -1.5, 1.5).astype(np.float64)
    h = np.tanh(pre).astype(np.float32)
    dy = _backward_inputs(rng, n_b, n_m)
    dh_s = nonzero_uniform(rng, (n_m, HIDDEN))
    grads, dh = poisoned(lay.n_params), poisoned((n_b + n_m) * HIDDEN)
    n_chunks = _run_backward(_gate(), h, p, lay, n_b, dy, dh_s, grads, dh)
    assert n_chunks == -(-max(n_b, n_m) // KN.dw_split(max(n_b, n_m))[1])
    got_dh = assert_all_written(dh).reshape(n_b + n_m, HIDDEN)
    g = grads.copy_to_host()

    # Every narrow block written, nothing else (the encoder and the advantage stream keep their poison).
    narrow = np.zeros(lay.n_params, bool)
    for name in KN.NARROW_LAYERS:
        narrow[lay.layers[name].block] = True
    assert np.isfinite(g[narrow]).all() and np.isnan(g[~narrow]).all()

    p64, h64 = p.astype(np.float64), h.astype(np.float64)
    dy64 = {k: v.astype(np.float64) for k, v in dy.items()}
    ref_dh, ref_g = N.backward(h64, p64, lay, n_b, dy64["d_val"], dy64["dv"], dy64["d_pi"], dy64["dbce"],
                               dy64["daux"], dh_s.astype(np.float64))
    np.testing.assert_allclose(got_dh, ref_dh, rtol=1e-4, atol=1e-6 * np.abs(ref_dh).max())
    for name, (dw, db) in ref_g.items():
        ref = np.concatenate([dw.ravel(), db])
        layer = lay.layers[name]
        np.testing.assert_allclose(g[layer.block], ref, rtol=1e-4, atol=1e-6 * np.abs(ref).max(), err_msg=name)

    if n_b + n_m <= 100:  # finite differences (the loss is linear in p: exact up to rounding)
        pre_h = np.arctanh(h64)  # the pre-activation of the stored float32 h
        dh_s64 = dh_s.astype(np.float64)
        fd_dh = central_differences(lambda x: _narrow_loss(p64, x, lay, n_b, dy64, dh_s64), pre_h.copy())
        np.testing.assert_allclose(got_dh, fd_dh, rtol=1e-4, atol=1e-5 * np.abs(fd_dh).max())
        idx = np.flatnonzero(narrow)
        sub = p64[idx].copy()

        def loss_of(x):
            q = p64.copy()
            q[idx] = x
            return _narrow_loss(q, pre_h, lay, n_b, dy64, dh_s64)

        fd_g = central_differences(loss_of, sub)
        np.testing.assert_allclose(g[idx], fd_g, rtol=1e-4, atol=1e-5 * np.abs(fd_g).max())


def test_narrow_kernels_with_gate_zero_write_nothing(rng):
    lay, p, target = _layout_params(rng)
    n_b, n_m = 5, 3
    h = nonzero_uniform(rng, (n_b + n_m, HIDDEN))
    outs = _forward_outputs(n_b + n_m, n_b, n_m)
    _run_forward(_gate(False), h, h[:n_m], p, target, lay, n_b, outs)
    for name, out in outs.items():
        assert np.isnan(out.copy_to_host()).all(), name
    grads, dh = poisoned(lay.n_params), poisoned((n_b + n_m) * HIDDEN)
    dh_s = nonzero_uniform(rng, (n_m, HIDDEN))
    _run_backward(_gate(False), h, p, lay, n_b, _backward_inputs(rng, n_b, n_m), dh_s, grads, dh)
    assert np.isnan(grads.copy_to_host()).all()
    got = dh.copy_to_host().reshape(n_b + n_m, HIDDEN)
    assert np.isnan(got[:n_b]).all()
    np.testing.assert_array_equal(got[n_b:], dh_s)


def test_dw_split_covers_the_rows():
    for rows in (1, 31, 32, 33, 67, 300, 4096, 65536, 10 ** 6):
        n_chunks, chunk = KN.dw_split(rows)
        assert 1 <= n_chunks <= KN.DW_MAX_CHUNKS
        assert (n_chunks - 1) * chunk < rows <= n_chunks * chunk


# ------------------------------------------------------------ env-row tail
ENV_ORDER = ("v_s", "v_dq", "v_s_tp1", "v_dq_tp1", "reward", "done", "pi_logits", "actions", "logp_old", "ppo_adv",
             "bce_out", "label_up", "aux_out", "label_ret")
ENV_OUTS = ("v_used", "v_used_tp1", "advantage", "ret", "d_pi", "entropy", "kl", "ratio", "dv", "dbce", "daux")
#: The outputs of the PPO/V part (not written on a collect step) and the losses' rows of pi and V.
PPO_V_OUTS = ("advantage", "ret", "entropy", "kl", "ratio")
PPO_V_ROWS = (S.RL_LOSS_PI - S.RL_LOSS_Q, S.RL_LOSS_V - S.RL_LOSS_Q)


def _env_inputs(rng, n, n_next=None):
    n_next = n if n_next is None else n_next
    logits = nonzero_uniform(rng, (n, N_ACTIONS), -2, 2)
    actions = rng.integers(0, N_ACTIONS, n).astype(np.int32)
    lp_new = R.log_softmax(logits.astype(np.float64))[np.arange(n), actions]
    log_ratio = rng.uniform(np.log(0.2), np.log(5.0), n)  # ratios on both sides of the clip and past the dual clip
    return dict(v_s=nonzero_uniform(rng, n, -2, 2), v_dq=nonzero_uniform(rng, n, -2, 2),
                v_s_tp1=nonzero_uniform(rng, n_next, -2, 2), v_dq_tp1=nonzero_uniform(rng, n_next, -2, 2),
                reward=nonzero_uniform(rng, n, -2, 2), done=(rng.uniform(size=n) < 0.3).astype(np.float32),
                pi_logits=logits, actions=actions, logp_old=(lp_new - log_ratio).astype(np.float32),
                ppo_adv=nonzero_uniform(rng, n, -2, 2), ret=nonzero_uniform(rng, n, -3, 3),
                bce_out=nonzero_uniform(rng, n, -3, 3), label_up=(rng.uniform(size=n) < 0.5).astype(np.float32),
                aux_out=nonzero_uniform(rng, n, -3, 3), label_ret=nonzero_uniform(rng, n, -3, 3))


def _env_isv(rng):
    isv = S.bootstrap_vector()
    isv[S.RL_V_BLEND_ALPHA] = rng.uniform(0.05, 0.95)
    isv[S.RL_GAMMA] = 0.95
    isv[S.RL_PPO_CLIP_EPS], isv[S.RL_PPO_RATIO_CLAMP], isv[S.RL_ENTROPY_COEF] = 0.2, 3.0, 0.05
    return isv


def _run_env_rows(gate, inp, isv, stride, mode=ENV_ONE_STEP):
    n, n_next = len(inp["actions"]), len(inp["v_s_tp1"])
    outs = {k: poisoned(n * N_ACTIONS if k == "d_pi" else n) for k in ENV_OUTS}
    if mode == ENV_GAE:
        outs["ret"] = cuda.to_device(inp["ret"])  # an input of the GAE mode
    losses = poisoned(KL.N_LOSSES * stride)
    args = [cuda.to_device(np.ascontiguousarray(inp[k]).ravel()) for k in ENV_ORDER]
    rl_env_rows[-(-n // ENV_ROWS_BLOCK), ENV_ROWS_BLOCK](gate, np.int32(mode), *args, np.int32(n), np.int32(n_next),
                                                         cuda.to_device(isv), np.int32(stride), *outs.values(), losses)
    return outs, losses


@pytest.mark.parametrize("n", [1, 67, 300])
def test_env_rows_match_reference_and_finite_differences(rng, n):
    inp = _env_inputs(rng, n)
    isv = _env_isv(rng)
    stride = n + 3
    outs, losses = _run_env_rows(_gate(), inp, isv, stride)
    ref = N.env_rows(inp, isv.copy())
    for name, out in outs.items():
        got = assert_all_written(out).reshape(np.shape(ref[name]))
        np.testing.assert_allclose(got, ref[name], rtol=1e-4, atol=1e-6, err_msg=name)
    lo = losses.copy_to_host().reshape(KL.N_LOSSES, stride)
    assert np.isnan(lo[0]).all() and np.isnan(lo[:, n:]).all()  # the Q row and the padding untouched
    for row, key in ((S.RL_LOSS_PI, "loss_pi"), (S.RL_LOSS_V, "loss_v"), (S.RL_LOSS_BCE, "loss_bce"),
                     (S.RL_LOSS_AUX, "loss_aux")):
        np.testing.assert_allclose(assert_all_written(lo[row - S.RL_LOSS_Q, :n]), ref[key], rtol=1e-4, atol=1e-6,
                                   err_msg=key)
    if n <= 100:  # the gradients vs finite differences of the mean losses (targets held fixed)
        eps, c, coef = (float(isv[k]) for k in (S.RL_PPO_CLIP_EPS, S.RL_PPO_RATIO_CLAMP, S.RL_ENTROPY_COEF))
        args = (inp["actions"], inp["logp_old"].astype(np.float64), ref["advantage"], eps, c, coef)
        fd = central_differences(lambda x: R.ppo_loss_value(x, *args), inp["pi_logits"].astype(np.float64))
        np.testing.assert_allclose(outs["d_pi"].copy_to_host().reshape(n, N_ACTIONS), fd, rtol=1e-4, atol=1e-6)
        for kind, pred, target, key in ((KL.LOSS_HUBER, "v_s", ref["ret"], "dv"),
                                        (KL.LOSS_BCE, "bce_out", inp["label_up"], "dbce"),
                                        (KL.LOSS_MSE, "aux_out", inp["label_ret"], "daux")):
            t64 = np.asarray(target, np.float64)
            fd = central_differences(lambda x: R.scalar_loss(kind, x, t64)[0].mean(), inp[pred].astype(np.float64))
            np.testing.assert_allclose(outs[key].copy_to_host(), fd, rtol=1e-4, atol=1e-7, err_msg=key)


def test_env_rows_collect_mode_leaves_ppo_and_v_out(rng):
    """A rollout's collect step: V_used at t and t+1, BCE and AUX as in one-step mode; d_pi and dv written 0;
    the PPO/V outputs and loss rows not written."""
    n, stride = 70, 73
    inp = _env_inputs(rng, n)
    isv = _env_isv(rng)
    outs, losses = _run_env_rows(_gate(), inp, isv, stride, ENV_COLLECT)
    ref = N.env_rows(inp, isv.copy(), mode=ENV_COLLECT)
    for name in ("v_used", "v_used_tp1", "dbce", "daux"):
        np.testing.assert_allclose(assert_all_written(outs[name]), ref[name], rtol=1e-4, atol=1e-6, err_msg=name)
    assert (assert_all_written(outs["d_pi"]) == 0).all() and (assert_all_written(outs["dv"]) == 0).all()
    for name in PPO_V_OUTS:
        assert np.isnan(outs[name].copy_to_host()).all(), name
    lo = losses.copy_to_host().reshape(KL.N_LOSSES, stride)
    assert np.isnan(lo[(0,) + PPO_V_ROWS, :]).all()
    for row, key in ((S.RL_LOSS_BCE, "loss_bce"), (S.RL_LOSS_AUX, "loss_aux")):
        np.testing.assert_allclose(assert_all_written(lo[row - S.RL_LOSS_Q, :n]), ref[key], rtol=1e-4, atol=1e-6)


def test_env_rows_gae_mode_reads_the_rollout_advantage_and_return(rng):
    """A rollout's update step (n = T B env rows, n_next = B t+1 rows): PPO on ppo_adv, V to ret (inputs, ret
    unchanged, advantage not written); every other output vs the reference and finite differences."""
    n, n_next, stride = 3 * 23, 23, 70
    inp = _env_inputs(rng, n, n_next)
    isv = _env_isv(rng)
    outs, losses = _run_env_rows(_gate(), inp, isv, stride, ENV_GAE)
    ref = N.env_rows(inp, isv.copy(), mode=ENV_GAE)
    assert np.isnan(outs["advantage"].copy_to_host()).all()
    np.testing.assert_array_equal(outs["ret"].copy_to_host(), inp["ret"])
    v1 = outs["v_used_tp1"].copy_to_host()
    assert np.isnan(v1[n_next:]).all()
    np.testing.assert_allclose(assert_all_written(v1[:n_next]), ref["v_used_tp1"], rtol=1e-4, atol=1e-6)
    for name in ("v_used", "d_pi", "entropy", "kl", "ratio", "dv", "dbce", "daux"):
        got = assert_all_written(outs[name]).reshape(np.shape(ref[name]))
        np.testing.assert_allclose(got, ref[name], rtol=1e-4, atol=1e-6, err_msg=name)
    lo = losses.copy_to_host().reshape(KL.N_LOSSES, stride)
    for row, key in ((S.RL_LOSS_PI, "loss_pi"), (S.RL_LOSS_V, "loss_v")):
        np.testing.assert_allclose(assert_all_written(lo[row - S.RL_LOSS_Q, :n]), ref[key], rtol=1e-4, atol=1e-6)
    eps, c, coef = (float(isv[k]) for k in (S.RL_PPO_CLIP_EPS, S.RL_PPO_RATIO_CLAMP, S.RL_ENTROPY_COEF))
    args = (inp["actions"], inp["logp_old"].astype(np.float64), inp["ppo_adv"].astype(np.float64), eps, c, coef)
    fd = central_differences(lambda x: R.ppo_loss_value(x, *args), inp["pi_logits"].astype(np.float64))
    np.testing.assert_allclose(outs["d_pi"].copy_to_host().reshape(n, N_ACTIONS), fd, rtol=1e-4, atol=1e-6)
    t64 = inp["ret"].astype(np.float64)
    fd = central_differences(lambda x: R.scalar_loss(KL.LOSS_HUBER, x, t64)[0].mean(), inp["v_s"].astype(np.float64))
    np.testing.assert_allclose(outs["dv"].copy_to_host(), fd, rtol=1e-4, atol=1e-7)


@pytest.mark.parametrize("mode", [ENV_ONE_STEP, ENV_COLLECT, ENV_GAE])
def test_env_rows_with_gate_zero_write_nothing(rng, mode):
    n = 6
    outs, losses = _run_env_rows(_gate(False), _env_inputs(rng, n, 3 if mode == ENV_GAE else n), _env_isv(rng), n,
                                 mode)
    for name, out in list(outs.items()) + [("losses", losses)]:
        if not (mode == ENV_GAE and name == "ret"):
            assert np.isnan(out.copy_to_host()).all(), name
