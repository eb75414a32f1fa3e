"""Helpers shared by the tests: the run-wide seed, the real LOBSTER samples, and poisoned
outputs and finite differences for the kernel tests."""
import importlib.util
import sys
import zlib
from pathlib import Path

import numpy as np
import pytest
from numba import cuda

ROOT = Path(__file__).resolve().parents[1]
#: The real LOBSTER sample zips, when kept beside the repository (see SOURCES.md there).
LOBSTER_SAMPLES = ROOT.parent / "shared" / "data" / "lobster"
#: The first CUT_EVENTS events of each of them, in the repository (tests/data/README.md).
LOBSTER_CUTS = ROOT / "tests" / "data" / "lobster"
CUT_EVENTS = 3_000
AMZN1, AMZN5 = "LOBSTER_SampleFile_AMZN_2012-06-21_1.zip", "LOBSTER_SampleFile_AMZN_2012-06-21_5.zip"
GOOG1, GOOG5 = "LOBSTER_SampleFile_GOOG_2012-06-21_1.zip", "LOBSTER_SampleFile_GOOG_2012-06-21_5.zip"
GOOG10 = "LOBSTER_SampleFile_GOOG_2012-06-21_10.zip"
#: The real samples: zip name -> (levels, events), as documented beside them.
REAL_SAMPLES = {AMZN1: (1, 57_515), AMZN5: (5, 155_935), GOOG1: (1, 49_482), GOOG5: (5, 112_673),
                GOOG10: (10, 147_916)}

#: Environment variable that fixes the run's seed (to replay a run, give it the header's value).
SEED_ENV = "ALPHARL_TEST_SEED"
#: Key of the run seed in an xdist worker's ``workerinput`` (conftest.pytest_configure_node).
WORKER_SEED_KEY = "alpharl_seed"

#: Poison for outputs: a test fills outputs with it, so an element a kernel
#: failed to write is seen as NaN (floats) or this sentinel (ints).
INT_POISON = -123456789


def node_seed(run: int, nodeid: str) -> list[int]:
    """Seed words of one test's generator: the run seed and a stable hash of the test's node id
    (crc32: the same in every process, unlike the salted ``hash``)."""
    return [run, zlib.crc32(nodeid.encode())]


def cut_path(name: str) -> Path:
    """Where the cut of the real sample ``name`` lies in the repository."""
    return LOBSTER_CUTS / name.replace("LOBSTER_SampleFile_", "").replace(".zip", "_cut.zip")


def real_sample(name: str) -> tuple[Path, int]:
    """(path, events) of the real LOBSTER sample ``name``: the whole file beside the repository
    when it is there, else its cut in the repository; skips the test when neither is."""
    full = LOBSTER_SAMPLES / name
    if full.is_file():
        return full, REAL_SAMPLES[name][1]
    cut = cut_path(name)
    if cut.is_file():
        return cut, CUT_EVENTS
    pytest.skip(f"LOBSTER sample {name}: neither in {LOBSTER_SAMPLES} nor cut in {LOBSTER_CUTS}")


def poisoned(shape, dtype=np.float32):
    """A device array filled with NaN (floats) or INT_POISON (ints)."""
    host = np.empty(shape, dtype=dtype)
    host.fill(np.nan if np.issubdtype(dtype, np.floating) else INT_POISON)
    return cuda.to_device(host)


def assert_all_written(arr):
    a = arr.copy_to_host() if hasattr(arr, "copy_to_host") else np.asarray(arr)
    if np.issubdtype(a.dtype, np.floating):
        assert np.isfinite(a).all(), f"{np.count_nonzero(~np.isfinite(a))} elements not written (NaN poison left)"
    else:
        assert (a != INT_POISON).all(), f"{np.count_nonzero(a == INT_POISON)} elements not written"
    return a


def nonzero_uniform(rng, shape, lo=-1.0, hi=1.0, dtype=np.float32):
    """Random values in [lo, hi) with no exact zeros (zeros hide sentinel bugs)."""
    x = rng.uniform(lo, hi, size=shape)
    x[x == 0] = (hi - lo) * 0.5 + lo or 0.5
    return x.astype(dtype)


def central_differences(f, x, eps=1e-6):
    """Central finite differences of the scalar f at float64 x (any shape; x is restored)."""
    g = np.zeros_like(x)
    flat, gf = x.reshape(-1), g.reshape(-1)
    for i in range(flat.size):
        keep = flat[i]
        flat[i] = keep + eps
        up = f(x)
        flat[i] = keep - eps
        down = f(x)
        flat[i] = keep
        gf[i] = (up - down) / (2 * eps)
    return g


def load_benchmark(name: str):
    """Import benchmarks/<name>.py (a script folder, not a package; ``name`` may name a sub-folder, as
    "studies/ablation") as the module of its file's name."""
    path = Path(__file__).parents[1] / "benchmarks" / f"{name}.py"
    spec = importlib.util.spec_from_file_location(path.stem, path)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[path.stem] = mod
    spec.loader.exec_module(mod)
    return mod


def random_nets(rng, obs_dim: int, hidden: int):
    """alpharl.nets.Nets with random parameters at a scale where every head contributes (not the small
    output-layer init), the target net a perturbed copy of the online encoder + Q."""
    from alpharl.nets import Nets

    nets = Nets(obs_dim, seed=11, hidden=hidden)
    lay = nets.layout
    p = nonzero_uniform(rng, lay.n_params, -0.5, 0.5)
    nets.params.copy_to_device(p)
    nets.target.copy_to_device(p[: lay.n_target] + nonzero_uniform(rng, lay.n_target, -0.1, 0.1))
    return nets


def random_env_batch(rng, n, n_next, obs_dim):
    """An alpharl.batches.EnvBatch of n env rows and n_next t+1 rows: random observations, actions, log-probs
    and rewards (no zeros), every third row done."""
    from alpharl.batches import EnvBatch
    from alpharl.sizes import N_ACTIONS

    return EnvBatch(obs=nonzero_uniform(rng, (n, obs_dim), -2, 2),
                    action=rng.integers(0, N_ACTIONS, n).astype(np.int32),
                    logp_old=np.log(rng.uniform(0.05, 0.3, n)).astype(np.float32),
                    reward=nonzero_uniform(rng, n, -2, 2), done=(np.arange(n) % 3 == 1).astype(np.float32),
                    obs_next=nonzero_uniform(rng, (n_next, obs_dim), -2, 2),
                    label_up=(np.arange(n) % 2).astype(np.float32), label_ret=nonzero_uniform(rng, n, -0.1, 0.1))


def random_replay_batch(rng, m, obs_dim):
    """An alpharl.batches.ReplayBatch of m random transitions (no zeros), the second one done."""
    from alpharl.batches import ReplayBatch
    from alpharl.sizes import N_ACTIONS

    return ReplayBatch(obs=nonzero_uniform(rng, (m, obs_dim), -2, 2),
                       action=rng.integers(0, N_ACTIONS, m).astype(np.int32),
                       reward=nonzero_uniform(rng, m, -3, 3), done=(np.arange(m) == 1).astype(np.float32),
                       obs_next=nonzero_uniform(rng, (m, obs_dim), -2, 2),
                       is_weight=rng.uniform(0.2, 1.0, m).astype(np.float32))


def batch_to_device(batch):
    """A batch NamedTuple (alpharl.batches) with every array on the device."""
    return type(batch)(*(None if v is None else cuda.to_device(v) for v in batch))


#: The per-sample outputs of a learning update (alpharl.batches.LearnerOutputs) the tests hold to the reference.
UPDATE_OUTPUTS = ("q_priority", "td", "a_star", "entropy", "kl", "ratio", "advantage", "ret", "v_used", "v_used_next",
                  "v_scalar", "v_dq", "v_scalar_next", "v_dq_next", "pi_logits")


def assert_update_matches_reference(nets, isv, isv_d, out, ref):
    """After one device learning update from ISV ``isv`` (host, before) into ``isv_d`` (device) with outputs
    ``out``: parameters, the ISV's losses, grad norms and V blend, and every per-sample output equal to
    the reference update ``ref`` (alpharl.reference.learner.UpdateResult). Adam's first step is
    lr g / (|g| + eps): for |g| near eps float32 rounding of g moves it by up to ~lr, so such elements are
    only held to Adam's step bound."""
    from alpharl import isv as S
    from alpharl.nets import MODULES

    lr = isv[S.RL_LR_Q]
    assert np.allclose(isv[S.RL_LR_Q:S.RL_LR_Q + len(MODULES)], lr)
    tol = np.where(np.abs(ref.grads) > 1e-6, 1e-6, 2 * lr)
    moved = np.abs(nets.params.copy_to_host() - ref.state["params"])
    assert (moved <= tol).all(), np.flatnonzero(moved > tol)
    got_isv = isv_d.copy_to_host()
    for slot in [S.RL_LOSS_Q + k for k in range(5)] + [S.RL_OBS_Q_GRAD_NORM + k for k in range(len(MODULES))] + [
            S.RL_V_BLEND_ALPHA, S.RL_V_TRACK_ERR_EMA, S.RL_V_SCALAR_MAG_EMA]:
        np.testing.assert_allclose(got_isv[slot], ref.isv[slot], rtol=1e-4, err_msg=S.BY_INDEX[slot].name)
    for name in UPDATE_OUTPUTS:
        got = assert_all_written(getattr(out, name))
        np.testing.assert_allclose(got, getattr(ref.out, name), rtol=1e-4, atol=1e-5, err_msg=name)


def assert_float32_update_matches(nets, env, rep, **options):
    """The reference update of ``nets`` (its first Adam step) on ``env`` / ``rep`` under the bootstrap ISV,
    with ``options`` (alpharl.reference.learner.update's keywords), run in float32 as the numpy backend runs
    it, against float64. Adam's first step moves a parameter by lr g / (|g| + eps),
    ill-conditioned where |g| is near eps: a gradient that cancels to ~1e-8 has a float32 rounding of its
    own size, and the step can differ by up to 2 lr between the two precisions. So the parameters are held
    everywhere to a float64 Adam step from the float32 run's own gradient (the float32 arithmetic of the
    step), and to the float64 run where |g| is far above the gradients' tolerance (the direction settled)."""
    from alpharl import isv as S
    from alpharl.nets import MODULES
    from alpharl.reference import learner as RL
    from alpharl.reference import nets as R

    state, isv, layout = nets.state_dict(), S.bootstrap_vector(), nets.layout
    r32 = RL.update(state, isv, env, rep, layout, dtype=np.float32, **options)
    r64 = RL.update(state, isv, env, rep, layout, **options)
    assert r32.state["params"].dtype == np.float32
    np.testing.assert_allclose(r32.grads, r64.grads, rtol=1e-3, atol=1e-6)
    p0 = np.asarray(state["params"], np.float64)
    g32 = r32.grads.astype(np.float64)
    from_g32 = np.full_like(p0, np.nan)
    for k, mod in enumerate(MODULES):   # zero moments, step count 1
        sl = layout.module_slice[mod]
        zero = np.zeros_like(p0[sl])
        from_g32[sl] = R.adam(p0[sl], g32[sl], zero, zero, 1, float(isv[S.RL_LR_Q + k]))[0]
    np.testing.assert_allclose(r32.state["params"], from_g32, rtol=0, atol=1e-6)
    settled = np.abs(r64.grads) > 1e-4
    assert settled.mean() > 0.5   # the float64 comparison covers most parameters
    np.testing.assert_allclose(r32.state["params"][settled], r64.state["params"][settled], rtol=0, atol=1e-5)


def assert_grads_match_finite_differences(loss, p0, layout, ref_grads, grads, eps=1e-6):
    """Every module's gradient of a learning update, the float64 reference's (``ref_grads``) and the
    kernels' (``grads``), against central differences of the reference ``loss`` at float64 ``p0``.
    The central difference's own rounding: each loss value is off by about one ulp of the loss, so fd is
    good to ~spacing(|L|) / eps (measured: at most 1.9 of that over 240 module draws). Small modules (the
    policy's gradient can be ~1e-3 when the clip zeroes most samples) are held to that floor, not below."""
    from alpharl.nets import MODULES

    fd_noise = 8 * np.spacing(abs(loss(p0))) / eps
    fd = central_differences(loss, p0.copy(), eps)
    for mod in MODULES:
        sl = layout.module_slice[mod]
        scale = np.abs(fd[sl]).max()
        assert scale > 0, mod
        np.testing.assert_allclose(ref_grads[sl], fd[sl], rtol=1e-5, atol=max(1e-7 * scale, fd_noise), err_msg=mod)
        np.testing.assert_allclose(grads[sl], fd[sl], rtol=1e-3, atol=max(2e-5 * scale, fd_noise), err_msg=mod)
