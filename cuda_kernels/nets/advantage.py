"""One-step advantage and return on the blended baseline V_used (seed phase-4.4)."""
from numba import cuda, float32

from alpharl.cuda_kernels.registry import kernel
from alpharl.isv import RL_GAMMA


@kernel("void(int32[::1], float32[::1], float32[::1], float32[::1], float32[::1], int32, float32[::1], "
        "float32[::1], float32[::1])")
def rl_compute_advantage_return(gate, reward, done, v_used, v_used_tp1, n, isv, advantage, ret):
    """A = r + gamma (1 - done) V_used(s') - V_used(s); return = A + V_used(s); gamma = isv[RL_GAMMA].

    Streaming 1-step mode (SPEC §1 step 9); a T-step GAE(lambda) would replace
    the bootstrap term with the lambda-weighted sum over the rollout.
    Launch [ceil(n / ELEMWISE_BLOCK), ELEMWISE_BLOCK]. gate[0] == 0: writes nothing.
    """
    if gate[0] == 0:
        return
    b = cuda.grid(1)
    if b < n:
        v = v_used[b]
        a = reward[b] + isv[RL_GAMMA] * (float32(1.0) - done[b]) * v_used_tp1[b] - v
        advantage[b] = a
        ret[b] = a + v
