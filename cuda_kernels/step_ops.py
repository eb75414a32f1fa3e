"""Small elementwise kernels of the training step that belong to no other group."""
from numba import cuda, float64

from alpharl.cuda_kernels.reductions import tree_sum
from alpharl.cuda_kernels.registry import kernel

#: Threads per block of the elementwise kernels here.
STEP_OPS_BLOCK = 256


@kernel("void(float32[::1], int32, float32, float32[::1])")
def rl_scale(x, n, scale, out):
    """out[i] = scale x[i] (reward scaling into the C51 support's units). Launch [ceil(n/256), 256]."""
    i = cuda.grid(1)
    if i < n:
        out[i] = x[i] * scale


@kernel("void(int64[::1])", test_only=True)
def rl_step_tick(counter):
    """counter[0] += 1: the step count lives on the device so a replayed graph keeps it. Launch [1, 1]."""
    counter[0] += 1


#: Run totals kept on the device (float64): closed trades, winning trades, their PnL ($), reward ($).
ACC_TRADES, ACC_WINS, ACC_TRADE_PNL, ACC_REWARD = range(4)
N_ACC = 4


@kernel("void(float32[::1], float32[::1], float32[::1], int32, float64[::1])")
def rl_accumulate_trades(trade_done, trade_pnl, reward, n, acc):
    """acc += (closed trades, wins, their PnL, total reward) of this step. Launch [1, STEP_OPS_BLOCK].

    Fixed-order block reduction: run totals are bit-identical run to run.
    """
    s_t = cuda.shared.array(STEP_OPS_BLOCK, float64)
    s_w = cuda.shared.array(STEP_OPS_BLOCK, float64)
    s_p = cuda.shared.array(STEP_OPS_BLOCK, float64)
    s_r = cuda.shared.array(STEP_OPS_BLOCK, float64)
    tid = cuda.threadIdx.x
    t = float64(0.0)
    w = float64(0.0)
    p = float64(0.0)
    r = float64(0.0)
    for i in range(tid, n, STEP_OPS_BLOCK):
        r += float64(reward[i])
        if trade_done[i] > 0.0:
            t += 1.0
            p += float64(trade_pnl[i])
            if trade_pnl[i] > 0.0:
                w += 1.0
    s_t[tid] = t
    s_w[tid] = w
    s_p[tid] = p
    s_r[tid] = r
    cuda.syncthreads()
    tree_sum(s_t, tid, STEP_OPS_BLOCK)
    tree_sum(s_w, tid, STEP_OPS_BLOCK)
    tree_sum(s_p, tid, STEP_OPS_BLOCK)
    tree_sum(s_r, tid, STEP_OPS_BLOCK)
    if tid == 0:
        acc[ACC_TRADES] += s_t[0]
        acc[ACC_WINS] += s_w[0]
        acc[ACC_TRADE_PNL] += s_p[0]
        acc[ACC_REWARD] += s_r[0]
