"""``argmax_expected_q``: the Double-DQN action selection of the C51 target.

The online network at s' picks a* = argmax_a E[Z(s', a)] = argmax_a sum_z p(z|s',a) z;
the target network then supplies the distribution at (s', a*) (rl_c51_loss).
Ties go to the lowest action index.
"""
from numba import cuda, float32, int32

from alpharl.cuda_kernels.nets.heads import (N_Q_OUT, ROW_BLOCK, dueling_logits, expectation_of_logp,
                                             log_softmax_inplace)
from alpharl.cuda_kernels.registry import kernel
from alpharl.sizes import N_ACTIONS, N_ATOMS


@kernel("void(int32[::1], float32[::1], float32[::1], int32, int32[::1])")
def argmax_expected_q(gate, adv, val, n, a_star):
    """a_star[b] = argmax_a E[Z(s'_b, a)] from the dueling streams adv[n, N_ACTIONS N_ATOMS], val[n, N_ATOMS].

    Launch [ceil(n / ROW_BLOCK), ROW_BLOCK] (one thread per sample).
    gate[0] == 0: writes nothing.
    """
    if gate[0] == 0:
        return
    b = cuda.grid(1)
    if b < n:
        x = cuda.local.array(N_ATOMS, float32)
        best = int32(0)
        best_e = float32(0.0)
        for a in range(N_ACTIONS):
            dueling_logits(adv, b * N_Q_OUT, val, b * N_ATOMS, a, x)
            log_softmax_inplace(x, N_ATOMS)
            e = expectation_of_logp(x)
            if a == 0 or e > best_e:
                best = a
                best_e = e
        a_star[b] = best
