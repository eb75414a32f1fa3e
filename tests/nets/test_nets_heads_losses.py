"""Dueling C51 helpers, argmax_expected_q and the heads' losses: kernels vs float64
references, gradients vs float64 finite differences of the reference losses."""
import math

import numpy as np
import pytest
from numba import cuda
from support import assert_all_written, central_differences, nonzero_uniform, poisoned

from alpharl import isv as S
from alpharl.cuda_kernels.nets import heads as KH
from alpharl.cuda_kernels.nets import losses as KL
from alpharl.cuda_kernels.nets.warp import WARP_ROW_BLOCK
from alpharl.cuda_kernels.sampling.argmax_expected_q import argmax_expected_q, argmax_expected_q_grid
from alpharl.reference import nets as R
from alpharl.sizes import N_ACTIONS, N_ATOMS

N = 7
NQ = N_ACTIONS * N_ATOMS


def _gate():
    return cuda.to_device(np.ones(1, np.int32))


def _grid(n):
    return (n + KH.ROW_BLOCK - 1) // KH.ROW_BLOCK, KH.ROW_BLOCK


def _random_support(rng):
    """A support [V_MIN, V_MAX] as --adaptive-support moves it: symmetric, half-width from 0.01 to 100."""
    v_max = np.float32(10.0 ** rng.uniform(-2, 2))
    return np.array([-v_max, v_max], np.float32)


def _isv(support=None, gain=None, gamma=None):
    """A bootstrap ISV with the given support [V_MIN, V_MAX], reward gain and gamma."""
    isv = S.bootstrap_vector()
    if support is not None:
        isv[S.RL_SUPPORT_V_MIN], isv[S.RL_SUPPORT_V_MAX] = support
    if gain is not None:
        isv[S.RL_REWARD_GAIN] = gain
    if gamma is not None:
        isv[S.RL_GAMMA] = gamma
    return isv


def test_support_grid_reads_the_isv_and_bootstraps_the_sentinel(rng):
    """The reference's reading of the support slots (the kernels' support_grid): a set support as is,
    sentinel (both 0) or unordered slots as the bootstrap +-10."""
    sup = _random_support(rng)
    np.testing.assert_array_equal(R.support_of(_isv(sup)), sup)
    np.testing.assert_array_equal(R.support_of(S.sentinel_vector()), [-10.0, 10.0])
    np.testing.assert_array_equal(R.support_of(_isv(np.array([3.0, -3.0], np.float32))), [-10.0, 10.0])
    z = R.supports(np.float64, sup)
    np.testing.assert_allclose(z[[0, -1]], sup, rtol=1e-6)
    np.testing.assert_allclose(np.diff(z), (sup[1] - sup[0]) / (N_ATOMS - 1), rtol=1e-6)


def test_v_dq_and_dueling_logits_match_reference(rng):
    adv = nonzero_uniform(rng, (N, NQ), -2, 2)
    val = nonzero_uniform(rng, (N, N_ATOMS), -2, 2)
    sup = _random_support(rng)
    vdq, logits = poisoned(N), poisoned(N * NQ)
    KH.rl_v_dq[_grid(N)](_gate(), cuda.to_device(val.ravel()), np.int32(N), cuda.to_device(_isv(sup)), vdq)
    KH.rl_dueling_logits[_grid(N)](_gate(), cuda.to_device(adv.ravel()), cuda.to_device(val.ravel()), np.int32(N),
                                   logits)
    a64, v64 = adv.astype(np.float64), val.astype(np.float64)
    np.testing.assert_allclose(assert_all_written(vdq), R.v_dq(v64, sup), rtol=1e-4, atol=1e-5 * sup[1])
    np.testing.assert_allclose(assert_all_written(logits).reshape(N, N_ACTIONS, N_ATOMS), R.dueling_logits(a64, v64),
                               rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("support", ["bootstrap", "random"])
def test_argmax_expected_q_matches_reference(rng, support):
    adv = nonzero_uniform(rng, (N, NQ), -3, 3)
    val = nonzero_uniform(rng, (N, N_ATOMS), -3, 3)
    sup = None if support == "bootstrap" else _random_support(rng)
    out = poisoned(N, np.int32)
    argmax_expected_q[_grid(N)](_gate(), cuda.to_device(adv.ravel()), cuda.to_device(val.ravel()), np.int32(N),
                                cuda.to_device(_isv(sup)), out)
    ref = R.argmax_expected_q(adv.astype(np.float64), val.astype(np.float64), sup)
    eq = R.expected_q(adv.astype(np.float64), val.astype(np.float64), sup)
    got = assert_all_written(out)
    # Only a float32-level near tie may pick another action, and then one of (almost) equal value.
    scale = 10.0 if sup is None else float(sup[1])
    np.testing.assert_allclose(eq[np.arange(N), got], eq[np.arange(N), ref], rtol=0, atol=1e-6 * scale)


@pytest.mark.parametrize("n", [1, 67])
def test_argmax_expected_q_one_warp_per_row(rng, n):
    """The launch of argmax_expected_q_grid (one warp per row, a partly filled last block) and a
    two-block launch whose warps stride over the rows agree with each other and the reference."""
    adv = nonzero_uniform(rng, (n, NQ), -3, 3)
    val = nonzero_uniform(rng, (n, N_ATOMS), -3, 3)
    got = []
    for grid in (argmax_expected_q_grid(n), (2, WARP_ROW_BLOCK)):
        out = poisoned(n, np.int32)
        argmax_expected_q[grid](_gate(), cuda.to_device(adv.ravel()), cuda.to_device(val.ravel()), np.int32(n),
                                cuda.to_device(_isv()), out)
        got.append(assert_all_written(out))
    np.testing.assert_array_equal(got[0], got[1])
    eq = R.expected_q(adv.astype(np.float64), val.astype(np.float64))
    ref = R.argmax_expected_q(adv.astype(np.float64), val.astype(np.float64))
    np.testing.assert_allclose(eq[np.arange(n), got[0]], eq[np.arange(n), ref], rtol=0, atol=1e-5)


def test_argmax_expected_q_ties_go_to_the_lowest_action(rng):
    """Actions with bit-identical logits tie exactly: the lowest index wins, wherever the tie stands."""
    n = 5
    adv = nonzero_uniform(rng, (n, N_ACTIONS, N_ATOMS), -0.5, 0.5)
    ramp = np.linspace(-3, 3, N_ATOMS, dtype=np.float32)  # mass toward the top supports: the largest E[Z]
    tied = [(2, 5), (0, 8), (7, 8), (1, 3, 6)]
    for row, acts in enumerate(tied):
        adv[row, list(acts)] = ramp
    adv[4] = ramp  # every action the same
    val = nonzero_uniform(rng, (n, N_ATOMS), -1, 1)
    out = poisoned(n, np.int32)
    argmax_expected_q[argmax_expected_q_grid(n)](_gate(), cuda.to_device(adv.ravel()), cuda.to_device(val.ravel()),
                                                 np.int32(n), cuda.to_device(_isv()), out)
    np.testing.assert_array_equal(assert_all_written(out), [2, 0, 7, 1, 0])


@pytest.mark.parametrize("b, n_next", [(3, 3), (6, 2)])
@pytest.mark.parametrize("mirror", [False, True])
def test_stack_obs_orders_rows(rng, b, n_next, mirror):
    """[obs_t (b) | M obs_t (b with the mirror) | s (m) | s' (m) | obs_tp1 (n_next)]; n_next < b: a rollout's
    update step. The mirror rows: (M x)[j] = sign[j] x[src[j]] for a permutation src and signs +-1."""
    m, d = 2, 4
    parts = [nonzero_uniform(rng, (r, d)) for r in (b, m, m, n_next)]
    src, sign = rng.permutation(d).astype(np.int32), rng.choice([-1.0, 1.0], d).astype(np.float32)
    n_mirror = b if mirror else 0
    out = poisoned((b + n_mirror + 2 * m + n_next) * d)
    KH.rl_stack_obs[1, 256](_gate(), *[cuda.to_device(p.ravel()) for p in parts], np.int32(b), np.int32(m),
                            np.int32(n_next), np.int32(d), np.int32(n_mirror), cuda.to_device(src),
                            cuda.to_device(sign), out)
    rows = [parts[0]] + ([parts[0][:, src] * sign] if mirror else []) + parts[1:]
    np.testing.assert_array_equal(assert_all_written(out).reshape(-1, d), np.concatenate(rows))


def _c51_inputs(rng, n=N):
    return dict(adv=nonzero_uniform(rng, (n, NQ), -1, 1), val=nonzero_uniform(rng, (n, N_ATOMS), -1, 1),
                actions=rng.integers(0, N_ACTIONS, n).astype(np.int32),
                t_adv=nonzero_uniform(rng, (n, NQ), -1, 1), t_val=nonzero_uniform(rng, (n, N_ATOMS), -1, 1),
                a_star=rng.integers(0, N_ACTIONS, n).astype(np.int32),
                reward=nonzero_uniform(rng, n, -4, 4), done=(rng.uniform(size=n) < 0.4).astype(np.float32),
                is_w=rng.uniform(0.1, 1.0, n).astype(np.float32))


def _run_c51(inp, gamma, grid=None, written=True, support=None, gain=None):
    """(d_adv, d_val, loss, td) on the host; grid defaults to one thread's worth of launch per row;
    support [V_MIN, V_MAX] and the reward gain into the ISV (None: the bootstrap +-10 and 1)."""
    n = len(inp["actions"])
    isv = _isv(support, gain, gamma)
    outs = [poisoned(n * NQ), poisoned(n * N_ATOMS), poisoned(n), poisoned(n)]
    order = ("adv", "val", "actions", "t_adv", "t_val", "a_star", "reward", "done", "is_w")
    KL.rl_c51_loss[grid or _grid(n)](_gate(), *[cuda.to_device(np.ascontiguousarray(inp[k]).ravel()) for k in order],
                                     np.int32(n), cuda.to_device(isv), *outs)
    return [assert_all_written(o) if written else o.copy_to_host() for o in outs]


def test_c51_loss_matches_reference_and_finite_differences(rng):
    inp = _c51_inputs(rng)
    gamma = 0.97
    d_adv, d_val, loss, td = _run_c51(inp, gamma)
    f64 = {k: (v.astype(np.float64) if v.dtype == np.float32 else v) for k, v in inp.items()}
    ce, td_ref, d_adv_ref, d_val_ref = R.rl_c51_loss(f64["adv"], f64["val"], inp["actions"], f64["t_adv"],
                                                     f64["t_val"], inp["a_star"], f64["reward"], f64["done"],
                                                     f64["is_w"], gamma)
    np.testing.assert_allclose(loss, ce, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(td, td_ref, rtol=1e-4, atol=1e-5)
    m, _ = R.c51_target(f64["t_adv"], f64["t_val"], inp["a_star"], f64["reward"], f64["done"], gamma)
    lossf = lambda adv, val: R.c51_loss(adv, val, inp["actions"], m, f64["is_w"])[1]  # noqa: E731
    fd_adv = central_differences(lambda a: lossf(a, f64["val"]), f64["adv"].copy())
    fd_val = central_differences(lambda v: lossf(f64["adv"], v), f64["val"].copy())
    np.testing.assert_allclose(d_adv.reshape(N, NQ), fd_adv, rtol=1e-4, atol=1e-6)
    np.testing.assert_allclose(d_val.reshape(N, N_ATOMS), fd_val, rtol=1e-4, atol=1e-6)
    np.testing.assert_allclose(d_val_ref, fd_val, rtol=1e-5, atol=1e-8)
    np.testing.assert_allclose(d_adv_ref, fd_adv, rtol=1e-5, atol=1e-8)


@pytest.mark.parametrize("trial", range(3))
def test_c51_loss_with_random_supports_and_gain_matches_float64_reference(rng, trial):
    """The kernel on a random support read from the ISV and a random reward gain (the replay's rewards
    times it) against the float64 reference with the same support and gain: loss, TD error and both
    gradients; rewards of the support's scale, some beyond it (clamped to the edge atoms)."""
    sup = _random_support(rng)
    gain = np.float32(10.0 ** rng.uniform(-1, 1))
    inp = _c51_inputs(rng)
    inp["reward"] = (nonzero_uniform(rng, N, -1.5, 1.5) * sup[1] / gain).astype(np.float32)
    gamma = 0.97
    d_adv, d_val, loss, td = _run_c51(inp, gamma, support=sup, gain=gain)
    f64 = {k: (v.astype(np.float64) if v.dtype == np.float32 else v) for k, v in inp.items()}
    ce, td_ref, d_adv_ref, d_val_ref = R.rl_c51_loss(f64["adv"], f64["val"], inp["actions"], f64["t_adv"],
                                                     f64["t_val"], inp["a_star"], f64["reward"], f64["done"],
                                                     f64["is_w"], gamma, support=sup, gain=float(gain))
    np.testing.assert_allclose(loss, ce, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(td, td_ref, rtol=1e-4, atol=1e-5 * sup[1])
    np.testing.assert_allclose(d_adv.reshape(N, NQ), d_adv_ref, rtol=1e-3, atol=1e-6)
    np.testing.assert_allclose(d_val.reshape(N, N_ATOMS), d_val_ref, rtol=1e-3, atol=1e-6)


@pytest.mark.parametrize("trial", range(4))
def test_c51_projection_on_random_supports_keeps_mass_and_mean(rng, trial):
    """float64 reference projection on random supports: each row's mass is 1, every atom >= 0, and the
    projected mean equals the mean of the clamped shifted atoms E[clamp(r + gamma (1 - done) z)]
    (the linear split onto neighbouring atoms preserves it exactly)."""
    sup = _random_support(rng).astype(np.float64)
    n = 40
    q = np.exp(R.log_softmax(rng.normal(size=(n, N_ATOMS))))
    reward = rng.uniform(-1.5, 1.5, n) * sup[1]
    done = (rng.uniform(size=n) < 0.3).astype(np.float64)
    gamma = rng.uniform(0.5, 1.0)
    m = R.c51_project(q, reward, done, gamma, sup)
    z = R.supports(np.float64, sup)
    np.testing.assert_allclose(m.sum(axis=1), 1.0, rtol=1e-12)
    assert (m >= 0).all()
    tz = np.clip(reward[:, None] + gamma * (1 - done)[:, None] * z[None, :], sup[0], sup[1])
    np.testing.assert_allclose((m * z).sum(axis=1), (q * tz).sum(axis=1), rtol=1e-10, atol=1e-12 * sup[1])


def test_c51_loss_non_finite_reward_poisons_only_its_row(rng):
    """A NaN/inf reward gives that row a NaN loss and NaN gradients (the grad guard then skips
    the Q step) with every atom index kept in range; the other rows are unaffected."""
    inp = _c51_inputs(rng, 5)
    inp["reward"][1] = np.nan
    inp["reward"][3] = np.inf
    n = 5
    isv = _isv(_random_support(rng), gain=2.5)
    outs = [poisoned(n * NQ), poisoned(n * N_ATOMS), poisoned(n), poisoned(n)]
    order = ("adv", "val", "actions", "t_adv", "t_val", "a_star", "reward", "done", "is_w")
    KL.rl_c51_loss[_grid(n)](_gate(), *[cuda.to_device(np.ascontiguousarray(inp[k]).ravel()) for k in order],
                             np.int32(n), cuda.to_device(isv), *outs)
    d_adv, d_val, loss, _ = [o.copy_to_host() for o in outs]
    bad = np.array([False, True, False, True, False])
    assert np.isnan(loss[bad]).all() and np.isfinite(loss[~bad]).all()
    assert np.isnan(d_val.reshape(n, N_ATOMS)[bad]).all() and np.isfinite(d_val.reshape(n, N_ATOMS)[~bad]).all()
    f64 = {k: (v.astype(np.float64) if v.dtype == np.float32 else v) for k, v in inp.items()}
    ce, *_ = R.rl_c51_loss(f64["adv"], f64["val"], inp["actions"], f64["t_adv"], f64["t_val"], inp["a_star"],
                           f64["reward"], f64["done"], f64["is_w"], float(isv[S.RL_GAMMA]), support=R.support_of(isv),
                           gain=2.5)
    assert np.isnan(ce[bad]).all()
    np.testing.assert_allclose(loss[~bad], ce[~bad], rtol=1e-4, atol=1e-5)


def test_c51_projection_exact_integer_case(rng):
    """gamma = 1, integer reward: every b_j is an exact integer (l == u) and must keep its mass."""
    inp = _c51_inputs(rng, 4)
    inp["reward"] = np.array([2.0, -3.0, 0.0, 5.0], np.float32)
    inp["done"] = np.array([0.0, 0.0, 1.0, 0.0], np.float32)
    f64 = {k: (v.astype(np.float64) if v.dtype == np.float32 else v) for k, v in inp.items()}
    q = np.exp(R.log_softmax(R.dueling_logits(f64["t_adv"], f64["t_val"])[np.arange(4), inp["a_star"]]))
    m = R.c51_project(q, f64["reward"], f64["done"], 1.0)
    np.testing.assert_allclose(m.sum(axis=1), 1.0, rtol=1e-12)
    shift = 2  # reward 2 = 2 DELTA_Z: atom j -> j + 2, the top atoms pile on the last one
    np.testing.assert_allclose(m[0, shift:-1], q[0, :N_ATOMS - shift - 1])
    np.testing.assert_allclose(m[0, -1], q[0, N_ATOMS - shift - 1:].sum())
    assert m[2, N_ATOMS // 2] == pytest.approx(1.0)  # done, r = 0: all mass on z = 0
    _, _, loss, _ = _run_c51(inp, 1.0)
    lp = R.log_softmax(R.dueling_logits(f64["adv"], f64["val"])[np.arange(4), inp["actions"]])
    np.testing.assert_allclose(loss, -(m * lp).sum(axis=1), rtol=1e-4)


def test_uniform_prediction_gives_ln21(rng):
    """Logits constant over z (per-action constant advantage, constant value) = uniform p: CE = ln 21."""
    inp = _c51_inputs(rng, 3)
    inp["adv"] = np.repeat(nonzero_uniform(rng, (3, N_ACTIONS, 1)), N_ATOMS, axis=2).reshape(3, NQ)
    inp["val"] = np.full((3, N_ATOMS), 0.7, np.float32)
    _, _, loss, _ = _run_c51(inp, 0.99)
    np.testing.assert_allclose(loss, math.log(N_ATOMS), rtol=1e-5)


@pytest.mark.slow
@pytest.mark.parametrize("n", [1, 35])
def test_c51_loss_one_warp_per_row(rng, n):
    """The launch of c51_grid (one warp per row, a partly filled last block) matches the reference and
    is bit-identical to a two-block launch whose warps stride over the rows; NaN rewards in both
    blocks poison only their own rows."""
    inp = _c51_inputs(rng, n)
    bad = np.zeros(n, bool)
    if n > 1:
        bad[[5, n - 2]] = True
        inp["reward"][bad] = [np.nan, -np.inf]
    gamma = 0.98
    got = _run_c51(inp, gamma, KL.c51_grid(n), written=False)
    strided = _run_c51(inp, gamma, (2, WARP_ROW_BLOCK), written=False)
    for a, b in zip(got, strided):
        np.testing.assert_array_equal(a.view(np.int32), b.view(np.int32))
    d_adv, d_val, loss, td = got
    f64 = {k: (v.astype(np.float64) if v.dtype == np.float32 else v) for k, v in inp.items()}
    ce, td_ref, d_adv_ref, d_val_ref = R.rl_c51_loss(f64["adv"], f64["val"], inp["actions"], f64["t_adv"],
                                                     f64["t_val"], inp["a_star"], f64["reward"], f64["done"],
                                                     f64["is_w"], gamma)
    assert np.isnan(loss[bad]).all() and np.isnan(d_val.reshape(n, N_ATOMS)[bad]).all()
    ok = ~bad
    assert np.isfinite(d_adv.reshape(n, NQ)[ok]).all() and np.isfinite(td[ok]).all()
    np.testing.assert_allclose(loss[ok], ce[ok], rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(td[ok], td_ref[ok], rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(d_adv.reshape(n, NQ)[ok], d_adv_ref[ok], rtol=1e-4, atol=1e-6)
    np.testing.assert_allclose(d_val.reshape(n, N_ATOMS)[ok], d_val_ref[ok], rtol=1e-4, atol=1e-6)


def test_c51_loss_gate_closed_writes_nothing(rng):
    inp = _c51_inputs(rng, 3)
    outs = [poisoned(3 * NQ), poisoned(3 * N_ATOMS), poisoned(3), poisoned(3)]
    order = ("adv", "val", "actions", "t_adv", "t_val", "a_star", "reward", "done", "is_w")
    KL.rl_c51_loss[KL.c51_grid(3)](cuda.to_device(np.zeros(1, np.int32)),
                                   *[cuda.to_device(np.ascontiguousarray(inp[k]).ravel()) for k in order],
                                   np.int32(3), cuda.to_device(S.bootstrap_vector()), *outs)
    assert all(np.isnan(o.copy_to_host()).all() for o in outs)


def test_ppo_loss_matches_reference_and_finite_differences(rng):
    n = 24
    eps_c, c, coef = 0.2, 3.0, 0.05
    logits = nonzero_uniform(rng, (n, N_ACTIONS), -2, 2)
    actions = rng.integers(0, N_ACTIONS, n).astype(np.int32)
    lp_new = R.log_softmax(logits.astype(np.float64))[np.arange(n), actions]
    # Old log-probs around the new ones: ratios from 0.2 to 5; the first four samples pin every branch:
    # dual clip (ratio 4, A < 0), clipped above (1.6, A > 0), clipped below (0.5, A < 0), unclipped (1.05).
    log_ratio = rng.uniform(np.log(0.2), np.log(5.0), n)
    log_ratio[:4] = np.log([4.0, 1.6, 0.5, 1.05])
    logp_old = (lp_new - log_ratio).astype(np.float32)
    adv = nonzero_uniform(rng, n, -2, 2)
    adv[:4] = np.abs(adv[:4]) * np.array([-1, 1, -1, 1], np.float32)
    isv = S.bootstrap_vector()
    isv[S.RL_PPO_CLIP_EPS], isv[S.RL_PPO_RATIO_CLAMP], isv[S.RL_ENTROPY_COEF] = eps_c, c, coef
    outs = [poisoned(n * N_ACTIONS)] + [poisoned(n) for _ in range(4)]
    KL.rl_ppo_loss[_grid(n)](_gate(), cuda.to_device(logits.ravel()), cuda.to_device(actions),
                             cuda.to_device(logp_old), cuda.to_device(adv), np.int32(n), cuda.to_device(isv), *outs)
    d, loss, ent, kl, ratio = [assert_all_written(o) for o in outs]
    args = (actions, logp_old.astype(np.float64), adv.astype(np.float64), eps_c, c, coef)
    ref_loss, ref_d, ref_h, ref_kl, ref_ratio = R.ppo_loss(logits.astype(np.float64), *args)
    r64 = ref_ratio
    assert ((r64 > 1 + eps_c) | (r64 < 1 - eps_c)).any() and ((adv < 0) & (r64 > c)).any()
    np.testing.assert_allclose(loss, ref_loss, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(ent, ref_h, rtol=1e-4)
    np.testing.assert_allclose(kl, ref_kl, rtol=1e-3, atol=1e-6)
    np.testing.assert_allclose(ratio, ref_ratio, rtol=1e-4)
    fd = central_differences(lambda x: R.ppo_loss_value(x, *args), logits.astype(np.float64))
    np.testing.assert_allclose(d.reshape(n, N_ACTIONS), fd, rtol=1e-4, atol=1e-6)


@pytest.mark.parametrize("kind", [KL.LOSS_HUBER, KL.LOSS_BCE, KL.LOSS_MSE])
def test_scalar_losses_match_reference_and_finite_differences(rng, kind):
    n = 16
    pred = nonzero_uniform(rng, n, -3, 3)
    target = ((rng.uniform(size=n) < 0.5).astype(np.float32) if kind == KL.LOSS_BCE
              else nonzero_uniform(rng, n, -3, 3))
    if kind == KL.LOSS_HUBER:  # both regimes of the Huber loss
        pred[:2] = target[:2] + np.array([0.5, -2.0], np.float32) * KL.HUBER_DELTA
    d, loss = poisoned(n), poisoned(n)
    KL.rl_scalar_loss[_grid(n)](_gate(), cuda.to_device(pred), cuda.to_device(target), np.int32(n), np.int32(kind),
                                d, loss)
    ref_loss, ref_d = R.scalar_loss(kind, pred.astype(np.float64), target.astype(np.float64))
    np.testing.assert_allclose(assert_all_written(loss), ref_loss, rtol=1e-4, atol=1e-6)
    fd = central_differences(lambda x: R.scalar_loss(kind, x, target.astype(np.float64))[0].mean(),
                             pred.astype(np.float64))
    np.testing.assert_allclose(assert_all_written(d), fd, rtol=1e-4, atol=1e-7)
    np.testing.assert_allclose(ref_d, fd, rtol=1e-6, atol=1e-9)


@pytest.mark.parametrize("collect", [False, True])
def test_loss_means_into_isv(rng, collect):
    """Each loss slot the mean of its row; n_pv = 0 (a rollout's collect step) holds the pi and V slots."""
    m, b, stride = 5, 9, 9
    losses = nonzero_uniform(rng, (KL.N_LOSSES, stride), 0, 3)
    isv0 = S.bootstrap_vector()
    isv0[S.RL_LOSS_Q:S.RL_LOSS_Q + KL.N_LOSSES] = rng.uniform(5, 6, KL.N_LOSSES)  # distinct from any mean
    isv = cuda.to_device(isv0)
    KL.rl_loss_means[KL.N_LOSSES, KL.REDUCE_BLOCK](_gate(), cuda.to_device(losses.ravel()), np.int32(stride),
                                                   np.int32(m), np.int32(b), np.int32(0 if collect else b), isv)
    got = isv.copy_to_host()
    want = [losses[0, :m].mean()] + [losses[r, :b].mean() for r in range(1, KL.N_LOSSES)]
    if collect:
        for slot in (S.RL_LOSS_PI, S.RL_LOSS_V):
            want[slot - S.RL_LOSS_Q] = isv0[slot]
    np.testing.assert_allclose(got[S.RL_LOSS_Q:S.RL_LOSS_Q + KL.N_LOSSES], want, rtol=1e-5)
