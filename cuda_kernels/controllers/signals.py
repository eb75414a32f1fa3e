"""Signal EMAs: ``rl_signal_ema`` folds this step's raw observations into their EMAs.

The raw observations are written into ISV "obs" slots by the reductions
(``rl_l2_norm`` for grad norms, ``rl_batch_moments`` for entropy, KL, TD-error
kurtosis, advantage/return variance, ratio tail, reward per trade, done rate,
loss rate). A table row (src, dst, gate) with a decay beta says: if the gate slot
is -1 or holds a positive count, fold isv[src] into the EMA isv[dst]. EMAs take
their first observation as is (sentinel 0). Non-finite observations are refused
and counted in RL_NAN_SIGNALS, so a NaN never reaches a controller.
"""
import math

from numba import cuda, float32

from alpharl.cuda_kernels.controllers.common import ema_update
from alpharl.cuda_kernels.reductions import tree_sum
from alpharl.cuda_kernels.registry import kernel
from alpharl.isv import RL_NAN_SIGNALS

#: Launch [1, SIGNAL_EMA_BLOCK]; at most this many table rows.
SIGNAL_EMA_BLOCK = 64
#: Table columns.
COL_SRC, COL_DST, COL_GATE = 0, 1, 2
N_TABLE_COLS = 3


@kernel("void(float32[::1], int32[:, ::1], float32[::1], int32)", test_only=True)
def rl_signal_ema(isv, table, beta, n_rows):
    """For each table row r < n_rows: isv[dst] = EMA(isv[dst], isv[src]; beta[r]) (see module doc)."""
    s_bad = cuda.shared.array(SIGNAL_EMA_BLOCK, float32)
    r = cuda.threadIdx.x
    bad = float32(0.0)
    if r < n_rows:
        gate = table[r, COL_GATE]
        if gate < 0 or isv[gate] > 0.0:
            obs = isv[table[r, COL_SRC]]
            if math.isnan(obs) or math.isinf(obs):
                bad = float32(1.0)
            else:
                dst = table[r, COL_DST]
                isv[dst] = ema_update(isv[dst], obs, beta[r])
    s_bad[r] = bad
    cuda.syncthreads()
    tree_sum(s_bad, r, SIGNAL_EMA_BLOCK)
    if r == 0 and s_bad[0] > 0.0:
        isv[RL_NAN_SIGNALS] += s_bad[0]
