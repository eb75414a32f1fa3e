"""One warp per row: the launch geometry and row helpers of the C51 row kernels.

``rl_c51_loss`` and ``argmax_expected_q`` give each sample (row) one warp of
WARP_ROWS rows per WARP_ROW_BLOCK-thread block, lane z owning atom z
(N_ATOMS <= WARP). The lanes of a row exchange values through the block's
shared memory between ``syncthreads``: every lane then reads the whole row and
reduces it in the same fixed order as the serial helpers of heads.py, so all
lanes hold bit-identical sums and the results do not depend on the launch.
(Register shuffles would save the round trip through shared memory, but the
CUDA simulator that runs the test suite has no ``shfl_*_sync``.)

The kernels stride their rows over the grid's warps: any grid of
WARP_ROW_BLOCK-thread blocks is correct, and ``warp_rows_grid(n)`` (one warp
per row) gives the shortest latency.
"""

from numba import cuda, float32

from alpharl.cuda_kernels.nets.heads import N_Q_OUT
from alpharl.sizes import N_ACTIONS, N_ATOMS

#: Threads of a warp: the lanes of one row.
WARP = 32
#: Rows (warps) per block.
WARP_ROWS = 4
#: Threads per block of the one-warp-per-row kernels.
WARP_ROW_BLOCK = WARP_ROWS * WARP

# Lane z owns atom z; argmax_expected_q's second phase gives lane a action a.
assert N_ATOMS <= WARP and N_ACTIONS <= WARP


def warp_rows_grid(n):
    """(blocks, threads) that give each of n rows its own warp: (ceil(n / WARP_ROWS), WARP_ROW_BLOCK)."""
    return (max(n, 1) + WARP_ROWS - 1) // WARP_ROWS, WARP_ROW_BLOCK


@cuda.jit(device=True)
def adv_mean(adv, b, z):
    """mean_a adv[b, a, z]: the dueling baseline of atom z of row b (adv flat [n, N_ACTIONS, N_ATOMS])."""
    s = float32(0.0)
    for k in range(N_ACTIONS):
        s += adv[b * N_Q_OUT + k * N_ATOMS + z]
    return s / float32(N_ACTIONS)


@cuda.jit(device=True)
def dueling_logit(adv, val, b, action, z):
    """Row b's logit of (action, atom z): v[z] + adv[action, z] - mean_a adv[a, z] (heads.dueling_logits)."""
    return val[b * N_ATOMS + z] + adv[b * N_Q_OUT + action * N_ATOMS + z] - adv_mean(adv, b, z)
