"""The ISV registry, and gate G1 isv_bootstrap."""
import numpy as np
from numba import cuda

from alpharl import isv as S
from alpharl.controllers import Controllers, reference_controllers, reference_signal_emas
from alpharl.cuda_kernels.controllers.v_blend import V_BLEND_CTRL_BLOCK, rl_v_blend_alpha_controller
from alpharl.reference.controllers import rl_v_blend_alpha_controller as ref_vblend
from controllers.controller_units import launch_controllers, launch_signal_emas


def test_seed_indices_are_kept():
    assert (S.RL_K_LOOP_MULT, S.RL_LR_Q, S.RL_LR_PI, S.RL_LR_V) == (404, 413, 414, 415)
    assert (S.RL_Q_GRAD_NORM_EMA, S.RL_PI_GRAD_NORM_EMA, S.RL_V_GRAD_NORM_EMA) == (424, 425, 426)
    assert (S.RL_V_BLEND_ALPHA, S.RL_V_TRACK_ERR_EMA, S.RL_V_SCALAR_MAG_EMA) == (585, 586, 587)
    assert S.RL_SLOTS_END == max(s.index for s in S.SLOTS) + 1


def test_every_slot_is_documented():
    for s in S.SLOTS:
        assert s.name and s.group and s.unit and s.description
        assert s.lo <= s.bootstrap <= s.hi


def test_no_bare_slot_numbers_outside_the_registry():
    """Slot numbers appear only in alpharl/isv.py: kernels and host code use the names.
    (Numeric literals in code are checked; prose in docstrings may cite the seeds' indices.)"""
    import io
    import tokenize
    from pathlib import Path

    root = Path(S.__file__).resolve().parents[1]
    slot_numbers = {s.index for s in S.SLOTS if s.index >= 400}
    offenders = []
    for folder in ("alpharl", "cuda_kernels", "cli"):
        for p in (root / folder).rglob("*.py"):
            if p.name == "isv.py":
                continue
            for tok in tokenize.generate_tokens(io.StringIO(p.read_text()).readline):
                if tok.type == tokenize.NUMBER and tok.string.isdigit() and int(tok.string) in slot_numbers:
                    offenders.append(f"{p.relative_to(root)}:{tok.start[0]}: {tok.line.strip()}")
    assert not offenders, "\n".join(offenders)


def test_g1_isv_bootstrap():
    """G1: a fresh (all sentinel 0) ISV + one pass of every controller and signal EMA, with
    no observation yet -> every slot holds its documented bootstrap value."""
    d = S.alloc_isv(bootstrap=False)
    ctl = Controllers()
    launch_signal_emas(ctl, d)
    launch_controllers(ctl, d)
    one = np.ones(1, np.float32)
    gate = cuda.to_device(np.ones(1, np.int32))
    rl_v_blend_alpha_controller[1, V_BLEND_CTRL_BLOCK](cuda.to_device(one), cuda.to_device(one), np.int32(0), d, gate)
    got = d.copy_to_host()
    np.testing.assert_array_equal(got, S.bootstrap_vector())
    # the NumPy backend bootstraps identically
    ref = S.sentinel_vector()
    reference_signal_emas(ref)
    reference_controllers(ref)
    ref_vblend(one, one, 0, ref)
    np.testing.assert_array_equal(ref, S.bootstrap_vector())


def test_alloc_isv_is_bootstrapped():
    np.testing.assert_array_equal(S.alloc_isv().copy_to_host(), S.bootstrap_vector())


def test_bootstrapped_isv_is_a_fixed_point_without_signals():
    """Running the controllers on a bootstrapped ISV with no signals changes nothing."""
    d = S.alloc_isv()
    launch_controllers(Controllers(), d)
    np.testing.assert_array_equal(d.copy_to_host(), S.bootstrap_vector())
