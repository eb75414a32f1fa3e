"""``argmax_expected_q``: the Double-DQN action selection of the C51 target.

The online network at s' picks a* = argmax_a E[Z(s', a)] = argmax_a sum_z p(z|s',a) z;
the target network then supplies the distribution at (s', a*) (rl_c51_loss).
Ties go to the lowest action index.
"""
from numba import cuda, float32, int32

from alpharl.cuda_kernels.nets.heads import N_Q_OUT, adv_mean, expectation_of_logp, log_softmax_inplace, support_grid
from alpharl.cuda_kernels.nets.warp import WARP, WARP_ROWS, warp_rows_grid
from alpharl.cuda_kernels.registry import kernel
from alpharl.sizes import N_ACTIONS, N_ATOMS


def argmax_expected_q_grid(n):
    """Launch geometry of ``argmax_expected_q`` for n rows: (blocks, threads), one warp per row."""
    return warp_rows_grid(n)


@kernel("void(int32[::1], float32[::1], float32[::1], int32, float32[::1], int32[::1])")
def argmax_expected_q(gate, adv, val, n, isv, a_star):
    """a_star[b] = argmax_a E[Z(s'_b, a)] from the dueling streams adv[n, N_ACTIONS N_ATOMS], val[n, N_ATOMS],
    on the ISV's support (``support_grid``).

    One warp per row (nets/warp.py): lane z writes the logits of atom z for every
    action, lane a < N_ACTIONS then takes action a's log-softmax and expectation
    (the serial helpers of heads.py, on its shared row), and lane 0 picks the
    first maximum. Launch ``argmax_expected_q_grid(n)``; any grid of
    WARP_ROW_BLOCK-thread blocks is correct (rows stride over the warps).
    gate[0] == 0: writes nothing.
    """
    if gate[0] == 0:
        return
    sh_x = cuda.shared.array((WARP_ROWS, N_ACTIONS, N_ATOMS), float32)  # logits, then log-probs
    sh_e = cuda.shared.array((WARP_ROWS, N_ACTIONS), float32)  # E[Z(s', a)]
    argmax_rows(cuda.blockIdx.x, cuda.gridDim.x, sh_x, sh_e, adv, val, n, isv, a_star)


@cuda.jit(device=True)
def argmax_rows(blk, n_blk, sh_x, sh_e, adv, val, n, isv, a_star):
    """``argmax_expected_q``'s rows as block blk of n_blk WARP_ROW_BLOCK-thread blocks (its arguments; sh_x
    [WARP_ROWS, N_ACTIONS, N_ATOMS] and sh_e [WARP_ROWS, N_ACTIONS]: the block's shared rows, declared by the
    kernel). The fused small-batch update runs the same rows. Every thread of the block must call it."""
    w = cuda.threadIdx.x // WARP
    lane = cuda.threadIdx.x % WARP
    # Block-uniform loop bounds: every thread reaches every syncthreads.
    for base in range(blk * WARP_ROWS, n, n_blk * WARP_ROWS):
        b = base + w
        row = w < WARP_ROWS and b < n
        if row and lane < N_ATOMS:
            mean = adv_mean(adv, b, lane)
            v = val[b * N_ATOMS + lane]
            for a in range(N_ACTIONS):
                sh_x[w, a, lane] = v + adv[b * N_Q_OUT + a * N_ATOMS + lane] - mean
        cuda.syncthreads()
        if row and lane < N_ACTIONS:
            x = sh_x[w, lane]
            log_softmax_inplace(x, N_ATOMS)
            v_min, _, dz = support_grid(isv)
            sh_e[w, lane] = expectation_of_logp(x, v_min, dz)
        cuda.syncthreads()
        if row and lane == 0:
            best = int32(0)
            best_e = sh_e[w, 0]
            for a in range(1, N_ACTIONS):
                if sh_e[w, a] > best_e:  # strict: ties keep the lower index
                    best = a
                    best_e = sh_e[w, a]
            a_star[b] = best
        # No third barrier: the next rows write sh_x only after this one's second barrier (its
        # last reader is before it) and sh_e only after their first (lane 0 reads it before that).
