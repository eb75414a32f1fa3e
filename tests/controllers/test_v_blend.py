"""rl_v_blend: V_used = alpha V_scalar + (1 - alpha) V_dq, against its reference on random inputs."""
import math

import numpy as np
from numba import cuda

from alpharl import isv as S
from alpharl.cuda_kernels.controllers.v_blend import V_BLEND_BLOCK, rl_v_blend
from alpharl.reference.controllers import rl_v_blend as ref_blend
from support import assert_all_written, nonzero_uniform, poisoned


def test_rl_v_blend_matches_reference(rng):
    n = 600  # three blocks, the last one partial
    vs, vd = nonzero_uniform(rng, n, -5, 5), nonzero_uniform(rng, n, -5, 5)
    host_isv = S.bootstrap_vector()
    host_isv[S.RL_V_BLEND_ALPHA] = rng.uniform(0.05, 0.95)
    out = poisoned(n)
    grid = math.ceil(n / V_BLEND_BLOCK)
    rl_v_blend[grid, V_BLEND_BLOCK](cuda.to_device(vs), cuda.to_device(vd), np.int32(n), cuda.to_device(host_isv), out,
                                    cuda.to_device(np.ones(1, np.int32)))
    got = assert_all_written(out)
    want = np.empty(n, np.float32)
    ref_blend(vs, vd, n, host_isv, want)
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6)
    a = float(host_isv[S.RL_V_BLEND_ALPHA])
    np.testing.assert_allclose(got, a * vs.astype(np.float64) + (1 - a) * vd, rtol=1e-5, atol=1e-5)


def test_rl_v_blend_gate_zero_writes_nothing(rng):
    n = 10
    vs = cuda.to_device(nonzero_uniform(rng, n))
    out = poisoned(n)
    rl_v_blend[1, V_BLEND_BLOCK](vs, vs, np.int32(n), cuda.to_device(S.bootstrap_vector()), out, cuda.to_device(np.zeros(1, np.int32)))
    assert np.isnan(out.copy_to_host()).all()
