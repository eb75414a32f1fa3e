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

from alpharl.sizes import N_ACTIONS, N_ATOMS, cdiv

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
    return cdiv(max(n, 1), WARP_ROWS), WARP_ROW_BLOCK
