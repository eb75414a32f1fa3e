"""Adam (bias correction, lr from the ISV, the non-finite skip), gate G4
target_soft_update, advantage/return, seeded initialisation and checkpoints."""
import numpy as np
import pytest
from numba import cuda
from support import assert_all_written, nonzero_uniform, poisoned

from alpharl import isv as S
from alpharl.cuda_kernels.nets import adam as KA
from alpharl.cuda_kernels.nets import gemm as G
from alpharl.cuda_kernels.nets.advantage import rl_compute_advantage_return
from alpharl.learner import Learner
from alpharl.nets import MODULES, NetLayout, Nets
from alpharl.reference import learner as RL
from alpharl.reference import nets as R

OBS_DIM, HIDDEN = 5, 8


def _gate(on=1):
    return cuda.to_device(np.array([on], np.int32))


def _step(nets, isv_d):
    n = nets.layout.n_params
    KA.rl_grad_guard[KA.N_MODULES, KA.GUARD_BLOCK](_gate(), nets.grads, nets.params, nets.adam_m, nets.adam_v,
                                                   nets.table, isv_d, nets.adam_state, np.int32(KA.MASK_ALL),
                                                   np.int32(0))
    KA.rl_adam[(n + G.ELEMWISE_BLOCK - 1) // G.ELEMWISE_BLOCK, G.ELEMWISE_BLOCK](
        _gate(), nets.params, nets.grads, nets.adam_m, nets.adam_v, np.int32(n), nets.table, isv_d, nets.adam_state)


@pytest.mark.slow
def test_adam_bias_correction_lr_from_isv_and_nan_skip(rng):
    nets = Nets(OBS_DIM, seed=3, hidden=2)  # small: the simulator runs one Python thread per parameter
    lay = nets.layout
    isv = S.bootstrap_vector()
    for k in range(len(MODULES)):
        isv[S.RL_LR_Q + k] = rng.uniform(1e-4, 1e-2)  # a distinct lr per module, read from its slot
    isv_d = cuda.to_device(isv)
    p = nets.params.copy_to_host().astype(np.float64)
    m = np.zeros_like(p)
    v = np.zeros_like(p)
    t = np.zeros(len(MODULES), int)
    skips = np.zeros(len(MODULES))
    bad = MODULES.index("pi")
    for step in range(3):
        g = nonzero_uniform(rng, lay.n_params, -1, 1)
        if step == 1:
            g[lay.module_slice["pi"].start + 3] = np.nan  # one non-finite element skips pi's whole step
        nets.grads.copy_to_device(g)
        _step(nets, isv_d)
        for k, mod in enumerate(MODULES):
            sl = lay.module_slice[mod]
            if step == 1 and k == bad:
                skips[k] += 1
                continue
            t[k] += 1
            p[sl], m[sl], v[sl] = R.adam(p[sl], g[sl].astype(np.float64), m[sl], v[sl], t[k], float(isv[S.RL_LR_Q + k]))
        got_isv = isv_d.copy_to_host()
        for k, mod in enumerate(MODULES):
            sl = lay.module_slice[mod]
            want = np.sqrt((g[sl][: lay.n_w[mod]].astype(np.float64) ** 2).sum())
            if np.isfinite(want):
                np.testing.assert_allclose(got_isv[S.RL_OBS_Q_GRAD_NORM + k], want, rtol=1e-5)
    np.testing.assert_allclose(nets.params.copy_to_host(), p, rtol=1e-5, atol=1e-7)
    # atol: m sums O(0.1) terms in float32, so a first moment near 0 keeps ~1e-8 of rounding
    np.testing.assert_allclose(nets.adam_m.copy_to_host(), m, rtol=1e-5, atol=5e-8)
    np.testing.assert_allclose(nets.adam_v.copy_to_host(), v, rtol=1e-5, atol=1e-10)
    state = nets.adam_state.copy_to_host().reshape(len(MODULES), KA.STATE_COLS)
    np.testing.assert_array_equal(state[:, KA.STATE_STEP], t)
    got_isv = isv_d.copy_to_host()
    np.testing.assert_array_equal(got_isv[S.RL_NAN_SKIPS_Q:S.RL_NAN_SKIPS_Q + len(MODULES)], skips)
    assert t[bad] == 2 and skips[bad] == 1


@pytest.mark.parametrize("rel_update", [0, 1])
def test_grad_guard_relative_update(rng, rel_update):
    """rl_grad_guard with rel_update: each module's rho = lr ||u[:n_w]|| / max(||W||, ||W_ref||) of the Adam step
    about to be taken (u from this gradient and the last moments at step t + 1), written to its
    relative-update slot, against the float64 reference; rel_update = 0 leaves those slots alone. Modules
    with grown weights and with weights below the LeCun reference norm (the floor) both appear."""
    nets = Nets(OBS_DIM, seed=3, hidden=HIDDEN)
    lay = nets.layout
    p = nets.params.copy_to_host()
    p[lay.module_slice["v"]] *= 40.0  # V's W well past its reference norm; Q and pi stay below theirs
    m = nonzero_uniform(rng, lay.n_params, -0.1, 0.1)
    v = rng.uniform(1e-4, 1e-2, lay.n_params).astype(np.float32)
    g = nonzero_uniform(rng, lay.n_params, -1, 1)
    steps = rng.integers(0, 50, len(MODULES)).astype(np.int32)
    state = np.zeros((len(MODULES), KA.STATE_COLS), np.int32)
    state[:, KA.STATE_STEP] = steps
    for name, host in (("params", p), ("adam_m", m), ("adam_v", v), ("grads", g), ("adam_state", state.ravel())):
        getattr(nets, name).copy_to_device(host)
    isv = S.bootstrap_vector()
    for k in range(len(MODULES)):
        isv[S.RL_LR_Q + k] = rng.uniform(1e-4, 1e-2)
        isv[S.RL_OBS_Q_REL_UPDATE + k] = -7.0  # a value no guard writes
    isv_d = cuda.to_device(isv)
    KA.rl_grad_guard[KA.N_MODULES, KA.GUARD_BLOCK](_gate(), nets.grads, nets.params, nets.adam_m, nets.adam_v,
                                                   nets.table, isv_d, nets.adam_state, np.int32(KA.MASK_ALL),
                                                   np.int32(rel_update))
    got = isv_d.copy_to_host()[S.RL_OBS_Q_REL_UPDATE:S.RL_OBS_Q_REL_UPDATE + len(MODULES)]
    if not rel_update:
        np.testing.assert_array_equal(got, -7.0)
        return
    want = []
    for k, mod in enumerate(MODULES):
        sl, nw = lay.module_slice[mod], lay.n_w[mod]
        f = lambda a: a[sl][:nw].astype(np.float64)  # noqa: E731
        want.append(RL.relative_update(f(p), f(g), f(m), f(v), int(steps[k]) + 1, float(isv[S.RL_LR_Q + k]),
                                       lay.w_ref_sq[mod]))
    np.testing.assert_allclose(got, want, rtol=2e-5)
    assert (np.array(want) > 0).all()
    below = [float((p[lay.module_slice[mod]][:lay.n_w[mod]] ** 2).sum()) < lay.w_ref_sq[mod] for mod in MODULES]
    assert any(below) and not all(below)


def test_adam_gate_zero_changes_nothing(rng):
    nets = Nets(OBS_DIM, seed=3, hidden=HIDDEN)
    before = nets.state_dict()
    nets.grads.copy_to_device(nonzero_uniform(rng, nets.layout.n_params))
    isv_d = cuda.to_device(S.bootstrap_vector())
    n = nets.layout.n_params
    KA.rl_grad_guard[KA.N_MODULES, KA.GUARD_BLOCK](_gate(0), nets.grads, nets.params, nets.adam_m, nets.adam_v,
                                                   nets.table, isv_d, nets.adam_state, np.int32(KA.MASK_ALL),
                                                   np.int32(1))
    KA.rl_adam[(n + 255) // 256, 256](_gate(0), nets.params, nets.grads, nets.adam_m, nets.adam_v, np.int32(n),
                                      nets.table, isv_d, nets.adam_state)
    after = nets.state_dict()
    for k in ("params", "adam_m", "adam_v", "adam_state"):
        np.testing.assert_array_equal(after[k], before[k])
    np.testing.assert_array_equal(isv_d.copy_to_host(), S.bootstrap_vector())


def test_guard_module_mask_leaves_the_masked_modules_untouched(rng):
    """A rollout's collect step: modules outside the mask (pi, V) keep parameters, moments, step counter and
    grad-norm and relative-update slots, and are disarmed; the others take their Adam step as with MASK_ALL
    (and write their relative update)."""
    nets = Nets(OBS_DIM, seed=3, hidden=2)
    lay = nets.layout
    nets.grads.copy_to_device(nonzero_uniform(rng, lay.n_params))
    nets.adam_state.copy_to_device(np.tile(np.array([3, 1], np.int32), len(MODULES)))  # armed, t = 3
    before = nets.state_dict()
    isv = S.bootstrap_vector()
    isv[S.RL_OBS_Q_GRAD_NORM:S.RL_OBS_Q_GRAD_NORM + len(MODULES)] = rng.uniform(5, 6, len(MODULES))
    isv[S.RL_OBS_Q_REL_UPDATE:S.RL_OBS_Q_REL_UPDATE + len(MODULES)] = -7.0  # a value no guard writes
    isv_d = cuda.to_device(isv)
    off = [MODULES.index("pi"), MODULES.index("v")]
    mask = KA.MASK_ALL & ~sum(1 << k for k in off)
    n = lay.n_params
    KA.rl_grad_guard[KA.N_MODULES, KA.GUARD_BLOCK](_gate(), nets.grads, nets.params, nets.adam_m, nets.adam_v,
                                                   nets.table, isv_d, nets.adam_state, np.int32(mask), np.int32(1))
    KA.rl_adam[(n + G.ELEMWISE_BLOCK - 1) // G.ELEMWISE_BLOCK, G.ELEMWISE_BLOCK](
        _gate(), nets.params, nets.grads, nets.adam_m, nets.adam_v, np.int32(n), nets.table, isv_d, nets.adam_state)
    after = nets.state_dict()
    st = after["adam_state"].reshape(len(MODULES), KA.STATE_COLS)
    got = isv_d.copy_to_host()
    for k, mod in enumerate(MODULES):
        sl = lay.module_slice[mod]
        moved = not np.array_equal(after["params"][sl], before["params"][sl])
        if k in off:
            assert not moved and np.array_equal(after["adam_m"][sl], before["adam_m"][sl]), mod
            assert st[k, KA.STATE_STEP] == 3 and st[k, KA.STATE_ARMED] == 0, mod
            assert got[S.RL_OBS_Q_GRAD_NORM + k] == isv[S.RL_OBS_Q_GRAD_NORM + k], mod
            assert got[S.RL_OBS_Q_REL_UPDATE + k] == -7.0, mod
        else:
            assert moved and st[k, KA.STATE_STEP] == 4 and st[k, KA.STATE_ARMED] == 1, mod
            assert got[S.RL_OBS_Q_REL_UPDATE + k] > 0, mod
            g = nets.grads.copy_to_host()[sl][: lay.n_w[mod]]
            np.testing.assert_allclose(got[S.RL_OBS_Q_GRAD_NORM + k], np.sqrt((g.astype(np.float64) ** 2).sum()),
                                       rtol=1e-5)


def test_g4_target_soft_update(rng):
    """G4 target_soft_update: theta_target <- tau theta + (1 - tau) theta_target over encoder + Q only."""
    nets = Nets(OBS_DIM, seed=5, hidden=HIDDEN)
    lay = nets.layout
    online = nonzero_uniform(rng, lay.n_params)
    target = nonzero_uniform(rng, lay.n_target)
    nets.params.copy_to_device(online)
    nets.target.copy_to_device(target)
    isv = S.bootstrap_vector()
    isv[S.RL_TARGET_TAU] = 0.03
    learner = Learner(nets, 1, 1)
    learner.soft_update(cuda.to_device(isv))
    want = R.soft_update(target.astype(np.float64), online[: lay.n_target].astype(np.float64), 0.03)
    np.testing.assert_allclose(nets.target.copy_to_host(), want, rtol=1e-6, atol=1e-7)
    assert lay.n_target == lay.module_slice["q"].stop and lay.module_slice["enc"].start == 0
    np.testing.assert_array_equal(nets.params.copy_to_host(), online)  # online untouched


def test_compute_advantage_return(rng):
    n = 11
    r, vu, vu1 = (nonzero_uniform(rng, n, -2, 2) for _ in range(3))
    done = (rng.uniform(size=n) < 0.4).astype(np.float32)
    isv = S.bootstrap_vector()
    isv[S.RL_GAMMA] = 0.95
    adv, ret = poisoned(n), poisoned(n)
    rl_compute_advantage_return[1, 256](_gate(), *[cuda.to_device(x) for x in (r, done, vu, vu1)], np.int32(n),
                                        cuda.to_device(isv), adv, ret)
    a_ref, ret_ref = R.advantage_return(*[x.astype(np.float64) for x in (r, done, vu, vu1)], 0.95)
    np.testing.assert_allclose(assert_all_written(adv), a_ref, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(assert_all_written(ret), ret_ref, rtol=1e-5, atol=1e-6)


def test_seeded_init_is_deterministic_and_checkpoints_round_trip(rng):
    a, b, c = NetLayout(OBS_DIM).init_params(7), NetLayout(OBS_DIM).init_params(7), NetLayout(OBS_DIM).init_params(8)
    assert np.array_equal(a, b) and not np.array_equal(a, c)
    lay = NetLayout(OBS_DIM)
    assert lay.n_w == {"q": 128 * 189, "pi": 128 * 9, "v": 128, "bce": 128, "aux": 128,
                       "enc": (OBS_DIM + 1) * 128 + 129 * 128}
    w = a[lay.layers["enc.l1"].w]
    assert np.abs(w).max() <= np.sqrt(3.0 / OBS_DIM) and np.abs(a[lay.layers["pi.out"].w]).max() <= 0.01
    nets = Nets(OBS_DIM, seed=2, hidden=HIDDEN)
    np.testing.assert_array_equal(nets.target.copy_to_host(), nets.params.copy_to_host()[: nets.layout.n_target])
    state = nets.state_dict()
    state["params"] = nonzero_uniform(rng, nets.layout.n_params)
    state["adam_state"] = np.arange(len(state["adam_state"]), dtype=np.int32)
    other = Nets(OBS_DIM, seed=9, hidden=HIDDEN)
    other.load_state_dict(state)
    back = other.state_dict()
    for k in ("params", "adam_m", "adam_v", "target", "adam_state"):
        np.testing.assert_array_equal(back[k], state[k])
