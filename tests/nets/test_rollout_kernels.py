"""The rollout kernels (cuda_kernels/nets/rollout.py): rl_gae vs its float64 reference and an independent
sum-over-time GAE on random trajectories with dones and random T, B (every output written, gate = 0 writes
nothing); rl_rollout_store writes exactly its slice; rl_rollout_gather takes whole columns of a rotating subset."""
import numpy as np
import pytest
from numba import cuda
from support import assert_all_written, nonzero_uniform, poisoned

from alpharl import isv as S
from alpharl.cuda_kernels.nets.rollout import (ADV_NORM_EPS, GAE_BLOCK, ROLLOUT_BLOCK, gather_grid, rl_gae,
                                               rl_rollout_gather, rl_rollout_store, store_grid)
from alpharl.reference import rollout as RO
from alpharl.rollout import FIELDS, subset
from alpharl.sizes import N_ACTIONS


def _gate(on=True):
    return cuda.to_device(np.array([1 if on else 0], np.int32))


def _trajectory(rng, t_len, n_b):
    n = t_len * n_b
    return dict(reward=nonzero_uniform(rng, n, -2, 2), done=(rng.uniform(size=n) < 0.25).astype(np.float32),
                v_used=nonzero_uniform(rng, n, -3, 3), v_s_last=nonzero_uniform(rng, n_b, -3, 3),
                v_dq_last=nonzero_uniform(rng, n_b, -3, 3), v_s_next=nonzero_uniform(rng, n_b, -3, 3),
                v_dq_next=nonzero_uniform(rng, n_b, -3, 3))


def _isv(rng):
    isv = S.bootstrap_vector()
    isv[S.RL_V_BLEND_ALPHA] = rng.uniform(0.1, 0.9)
    isv[S.RL_GAMMA] = rng.uniform(0.9, 0.999)
    return isv


def _run_gae(gate, tr, t_len, n_b, lam, isv):
    n = t_len * n_b
    v_used = tr["v_used"].copy()
    v_used[(t_len - 1) * n_b:] = np.nan  # the kernel must write the last slice
    d = {k: cuda.to_device(v) for k, v in tr.items() if k != "v_used"}
    v_used_d = cuda.to_device(v_used)
    outs = [poisoned(n) for _ in range(3)]
    rl_gae[1, GAE_BLOCK](gate, d["reward"], d["done"], v_used_d, d["v_s_last"], d["v_dq_last"], d["v_s_next"],
                         d["v_dq_next"], np.int32(t_len), np.int32(n_b), np.float32(lam), cuda.to_device(isv), *outs)
    return v_used_d, outs


def _gae_by_sums(tr, t_len, n_b, lam, isv):
    """A_t = sum_k (gamma lambda)^k [no done in t..t+k-1] delta_{t+k}: GAE written as its sum over time."""
    alpha, gamma = float(isv[S.RL_V_BLEND_ALPHA]), float(isv[S.RL_GAMMA])
    f = lambda k: tr[k].astype(np.float64)  # noqa: E731
    v = f("v_used").reshape(t_len, n_b).copy()
    v[-1] = alpha * f("v_s_last") + (1 - alpha) * f("v_dq_last")
    v_end = alpha * f("v_s_next") + (1 - alpha) * f("v_dq_next")
    r, done = f("reward").reshape(t_len, n_b), f("done").reshape(t_len, n_b)
    v_after = np.concatenate([v[1:], v_end[None]])
    delta = r + gamma * (1 - done) * v_after - v
    adv = np.zeros((t_len, n_b))
    for t in range(t_len):
        alive = np.ones(n_b)
        for k in range(t, t_len):
            adv[t] += (gamma * lam) ** (k - t) * alive * delta[k]
            alive = alive * (1 - done[k])
    return v, adv


@pytest.mark.parametrize("t_len, n_b, lam", [(2, 1, 0.95), (5, 7, 0.0), (16, 3, 1.0), (3, GAE_BLOCK + 37, 0.8)])
def test_gae_matches_reference_and_the_sum_over_time(rng, t_len, n_b, lam):
    tr = _trajectory(rng, t_len, n_b)
    isv = _isv(rng)
    v_used_d, (adv, ret, ppo_adv) = _run_gae(_gate(), tr, t_len, n_b, lam, isv)
    got = {k: assert_all_written(a) for k, a in (("v_used", v_used_d), ("advantage", adv), ("ret", ret),
                                                   ("ppo_adv", ppo_adv))}
    ref = {k: np.zeros(t_len * n_b) for k in ("advantage", "ret", "ppo_adv")}
    ref["v_used"] = tr["v_used"].astype(np.float64)
    RO.rl_gae(tr["reward"], tr["done"], ref["v_used"], tr["v_s_last"], tr["v_dq_last"], tr["v_s_next"],
              tr["v_dq_next"], t_len, n_b, lam, isv, ref["advantage"], ref["ret"], ref["ppo_adv"], np.float64)
    for k in got:
        np.testing.assert_allclose(got[k], ref[k], rtol=1e-4, atol=2e-5, err_msg=k)
    # the reference against GAE written as a sum over time, and the normalisation's definition
    v, adv_sum = _gae_by_sums(tr, t_len, n_b, lam, isv)
    np.testing.assert_allclose(ref["v_used"].reshape(t_len, n_b), v, rtol=1e-12)
    np.testing.assert_allclose(ref["advantage"].reshape(t_len, n_b), adv_sum, rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(ref["ret"], (adv_sum + v).ravel(), rtol=1e-9, atol=1e-12)
    a = adv_sum.ravel()
    np.testing.assert_allclose(ref["ppo_adv"], (a - a.mean()) / (a.std() + ADV_NORM_EPS), rtol=1e-9, atol=1e-12)
    assert abs(got["ppo_adv"].mean()) < 1e-4 and abs(got["ppo_adv"].std() - 1) < 1e-3


def test_gae_lambda_zero_is_one_step_td(rng):
    """lambda = 0: A_t = delta_t, the one-step TD advantage of SPEC step 9, slice by slice."""
    t_len, n_b = 4, 5
    tr = _trajectory(rng, t_len, n_b)
    isv = _isv(rng)
    _, (adv, _, _) = _run_gae(_gate(), tr, t_len, n_b, 0.0, isv)
    v, _ = _gae_by_sums(tr, t_len, n_b, 0.0, isv)
    gamma = float(isv[S.RL_GAMMA])
    v_end = float(isv[S.RL_V_BLEND_ALPHA]) * tr["v_s_next"] + (1 - float(isv[S.RL_V_BLEND_ALPHA])) * tr["v_dq_next"]
    v_after = np.concatenate([v[1:], v_end[None]])
    r, done = tr["reward"].reshape(t_len, n_b), tr["done"].reshape(t_len, n_b)
    np.testing.assert_allclose(adv.copy_to_host().reshape(t_len, n_b), r + gamma * (1 - done) * v_after - v,
                               rtol=1e-5, atol=1e-5)


def test_gae_with_gate_zero_writes_nothing(rng):
    t_len, n_b = 3, 4
    v_used_d, outs = _run_gae(_gate(False), _trajectory(rng, t_len, n_b), t_len, n_b, 0.9, _isv(rng))
    assert np.isnan(v_used_d.copy_to_host()[(t_len - 1) * n_b:]).all()
    for out in outs:
        assert np.isnan(out.copy_to_host()).all()


@pytest.mark.parametrize("with_v, step", [(1, 13), (0, 2**33 + 4)])
def test_rollout_store_writes_its_slice_only(rng, with_v, step):
    """Slice step mod T of every field (v_used only with with_v); the other slices keep their poison."""
    t_len, n_b, dim = 5, 7, 3
    t = step % t_len
    batch = dict(obs=nonzero_uniform(rng, (n_b, dim)), action=rng.integers(0, N_ACTIONS, n_b).astype(np.int32),
                 logp=nonzero_uniform(rng, n_b, -3, -0.1), reward=nonzero_uniform(rng, n_b),
                 done=(rng.uniform(size=n_b) < 0.5).astype(np.float32),
                 label_up=(rng.uniform(size=n_b) < 0.5).astype(np.float32), label_ret=nonzero_uniform(rng, n_b),
                 v_used=nonzero_uniform(rng, n_b))
    bufs = {name: poisoned(t_len * n_b * (dim if name == "obs" else 1), dtype) for name, dtype in FIELDS}
    rl_rollout_store[store_grid(n_b, dim), ROLLOUT_BLOCK](
        cuda.to_device(np.array([step], np.int64)), np.int32(t_len), np.int32(n_b), np.int32(dim), np.int32(with_v),
        *[cuda.to_device(batch[name].ravel()) for name, _ in FIELDS], *bufs.values())
    ref = {name: np.copy(b.copy_to_host()) for name, b in bufs.items()}
    for k in ref:
        ref[k][:] = -123456789 if ref[k].dtype == np.int32 else np.nan
    RO.rl_rollout_store(np.array([step]), t_len, n_b, dim, with_v, *[batch[name] for name, _ in FIELDS],
                        *ref.values())
    for name, buf in bufs.items():
        got = buf.copy_to_host()
        np.testing.assert_array_equal(got, ref[name], err_msg=name)
        per = dim if name == "obs" else 1
        mine = slice(t * n_b * per, (t + 1) * n_b * per)
        if name == "v_used" and not with_v:
            assert np.isnan(got).all()
            continue
        np.testing.assert_array_equal(assert_all_written(got[mine]), batch[name].ravel(), err_msg=name)
        rest = np.delete(got, np.arange(mine.start, mine.stop))
        assert (np.isnan(rest) if got.dtype == np.float32 else rest == -123456789).all(), name


def test_subset_sizes():
    assert subset(16, 4096, 0) == (1, 4096) and subset(16, 16, 4096) == (1, 16) and subset(4, 8, 32) == (1, 8)
    assert subset(16, 4096, 8192) == (8, 512) and subset(4, 8, 16) == (2, 4) and subset(3, 10, 9) == (4, 2)
    for t_len, n_b, rows in ((16, 4096, 1000), (5, 7, 5), (3, 100, 250), (2, 65536, 4096)):
        stride, n_sub = subset(t_len, n_b, rows)
        assert t_len * n_sub <= rows and stride * n_sub <= n_b and n_sub >= 1
        assert t_len * (n_sub + 1) > rows or stride * (n_sub + 1) > n_b  # no room for one more column


@pytest.mark.parametrize("t_len, n_b, rows, step", [(4, 8, 16, 3), (3, 10, 9, 2**33 + 5), (5, 7, 12, 44),
                                                    (2, 300, 64, 1001)])
def test_rollout_gather_matches_reference_and_takes_whole_columns(rng, t_len, n_b, rows, step):
    """Every element of the subset's buffer written, equal to the reference and to the rollout's column
    (u + stride i) mod B; the subsets of stride consecutive updates are disjoint."""
    dim = 3
    stride, n_sub = subset(t_len, n_b, rows)
    assert stride > 1
    n = t_len * n_b
    src = dict(obs=nonzero_uniform(rng, n * dim), action=rng.integers(0, N_ACTIONS, n).astype(np.int32),
               logp=nonzero_uniform(rng, n, -3, -0.1), reward=nonzero_uniform(rng, n),
               done=(rng.uniform(size=n) < 0.5).astype(np.float32) + 2.0,
               label_up=nonzero_uniform(rng, n), label_ret=nonzero_uniform(rng, n), v_used=nonzero_uniform(rng, n))
    obs_next = nonzero_uniform(rng, n_b * dim)
    sizes = [np.int32(x) for x in (t_len, n_b, stride, n_sub, dim)]
    seen = set()
    for u_step in range(step, step + stride * t_len, t_len):  # stride consecutive updates
        out = {name: poisoned(t_len * n_sub * (dim if name == "obs" else 1), dtype) for name, dtype in FIELDS}
        out_next = poisoned(n_sub * dim)
        rl_rollout_gather[gather_grid(n_sub, t_len, dim), ROLLOUT_BLOCK](
            cuda.to_device(np.array([u_step], np.int64)), *sizes, *[cuda.to_device(src[k]) for k, _ in FIELDS],
            cuda.to_device(obs_next), *out.values(), out_next)
        ref = {name: np.zeros(t_len * n_sub * (dim if name == "obs" else 1), dtype) for name, dtype in FIELDS}
        ref_next = np.zeros(n_sub * dim, np.float32)
        RO.rl_rollout_gather(np.array([u_step]), *sizes, *src.values(), obs_next, *ref.values(), ref_next)
        cols = (u_step // t_len + stride * np.arange(n_sub)) % n_b
        assert len(set(cols)) == n_sub and not seen & set(cols)
        seen |= set(cols)
        for name, buf in out.items():
            got = assert_all_written(buf.copy_to_host())
            np.testing.assert_array_equal(got, ref[name], err_msg=name)
            per = dim if name == "obs" else 1
            want = src[name].reshape(t_len, n_b, per)[:, cols].ravel()
            np.testing.assert_array_equal(got, want, err_msg=name)
        got = assert_all_written(out_next.copy_to_host())
        np.testing.assert_array_equal(got, ref_next)
        np.testing.assert_array_equal(got, obs_next.reshape(n_b, dim)[cols].ravel())
    assert len(seen) == stride * n_sub
