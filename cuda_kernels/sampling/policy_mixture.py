"""``policy_mixture_logp``: the C51 target's distribution at s' under the acting policy (``--q-target policy``).

Double DQN (``argmax_expected_q``) bootstraps from the greedy action a*, so the Q head's
fixed point is the value of acting greedily; the PPO actor acts by sampling pi. Where
the two differ the C51 mean V_dq settles above the scalar value head (the policy's own
value) and the seed's V blend keeps alpha at 1. The expected target
(expected SARSA, distributional) bootstraps from the policy that acts:

    q(z | s') = sum_a pi(a | s') p_target(z | s', a),

pi = softmax of the online policy head at s' (the replay row's next state), p_target
the target network's dueling C51 distribution. The projection onto the support is
linear in q, so rl_c51_loss projects the mixture unchanged: this kernel writes
log q as a value stream (with a zero advantage stream every action's logits are
log q, and softmax(log q) = q), and the loss kernel reads it as the target.
"""
import math

from numba import cuda, float32

from alpharl.cuda_kernels.nets.heads import adv_mean, dueling_logit, log_softmax_inplace
from alpharl.cuda_kernels.nets.narrow import COL_PI, N_COLS
from alpharl.cuda_kernels.nets.warp import WARP, WARP_ROWS, warp_rows_grid
from alpharl.cuda_kernels.registry import kernel
from alpharl.sizes import N_ACTIONS, N_ATOMS

#: The lane that loads and normalises a row's policy (the lanes below it own the atoms).
PI_LANE = N_ATOMS
assert PI_LANE < WARP


def policy_mixture_grid(n):
    """Launch geometry of ``policy_mixture_logp`` for n rows: (blocks, threads), one warp per row."""
    return warp_rows_grid(n)


@kernel("void(int32[::1], float32[::1], int32, float32[::1], float32[::1], int32, float32[::1])")
def policy_mixture_logp(gate, y, row0, t_adv, t_val, n, out):
    """out[b, z] = log sum_a pi(a | s'_b) p_target(z | s'_b, a) for b < n.

    y [*, N_COLS]: the narrow layers' outputs (rl_narrow_scatter's input), whose rows row0 + b are the
    online net at s'_b (the policy's logits in columns COL_PI ...); t_adv [n, N_ACTIONS N_ATOMS], t_val
    [n, N_ATOMS]: the target net's dueling streams at s'. The sum over actions is a max-shifted
    log-sum-exp of log pi_a + log p_a(z) in action order, so a tiny mixture stays finite.

    One warp per row (nets/warp.py): lane z < N_ATOMS writes atom z's logits for every action,
    lane PI_LANE takes the policy's log-softmax, lane a < N_ACTIONS then action a's log-softmax
    over the atoms, and lane z sums atom z over the actions. Launch ``policy_mixture_grid(n)``;
    any grid of WARP_ROW_BLOCK-thread blocks is correct. gate[0] == 0: writes nothing.
    """
    if gate[0] == 0:
        return
    sh_x = cuda.shared.array((WARP_ROWS, N_ACTIONS, N_ATOMS), float32)  # logits, then log-probs
    sh_p = cuda.shared.array((WARP_ROWS, N_ACTIONS), float32)  # log pi(a | s')
    w = cuda.threadIdx.x // WARP
    lane = cuda.threadIdx.x % WARP
    # Block-uniform loop bounds: every thread reaches every syncthreads.
    for base in range(cuda.blockIdx.x * WARP_ROWS, n, cuda.gridDim.x * WARP_ROWS):
        b = base + w
        row = w < WARP_ROWS and b < n
        if row and lane < N_ATOMS:
            mean = adv_mean(t_adv, b, lane)
            for a in range(N_ACTIONS):
                sh_x[w, a, lane] = dueling_logit(t_adv, t_val, b, a, lane, mean)
        elif row and lane == PI_LANE:
            off = (row0 + b) * N_COLS + COL_PI
            for a in range(N_ACTIONS):
                sh_p[w, a] = y[off + a]
            log_softmax_inplace(sh_p[w], N_ACTIONS)
        cuda.syncthreads()
        if row and lane < N_ACTIONS:
            log_softmax_inplace(sh_x[w, lane], N_ATOMS)
        cuda.syncthreads()
        if row and lane < N_ATOMS:
            mx = sh_p[w, 0] + sh_x[w, 0, lane]
            for a in range(1, N_ACTIONS):
                mx = max(mx, sh_p[w, a] + sh_x[w, a, lane])
            s = float32(0.0)
            for a in range(N_ACTIONS):
                s += math.exp(sh_p[w, a] + sh_x[w, a, lane] - mx)
            out[b * N_ATOMS + lane] = mx + math.log(s)
        cuda.syncthreads()  # the next rows overwrite this block's shared rows
