"""Several market streams behind one simulator: the actions out to the streams, their outputs back.

A dataset of S files runs as S simulators, one per file (stream), each over its
own backtests. Backtest b of the run replays stream s = b mod S as that
stream's backtest j = b // S. The streams' simulators keep their backtests
*stream-major*: stream s owns the slots off_s .. off_s + B_s - 1 of one
actions array ``actions_sm[B]``, one observation array ``obs_sm[B, D]`` (row =
slot) and one flat output array ``out_sm[N_OUT * B]`` in which stream s's
outputs are the C-ordered block [N_OUT, B_s] starting at N_OUT * off_s. So each
stream's arrays are contiguous views and its kernels run unchanged, and the
run's arrays (in backtest order) cost one launch each way per step:

- ``lobsim_streams_gather``: actions_sm[i] = actions[perm[i]] (perm: slot -> backtest);
- ``lobsim_streams_scatter``: obs[b, :] = obs_sm[row_b, :] and
  out[k, b] = out_sm[out0_b + k * stride_b] (row_b = off_s + j, out0_b = N_OUT off_s + j,
  stride_b = B_s), from the table ``tab int32[N_STREAM_COLS, B]``.

NumPy twins: alpharl.reference.lobsim.streams.
"""
from numba import cuda

from alpharl.cuda_kernels.registry import kernel
from alpharl.sizes import cdiv

#: Rows of the per-backtest table of lobsim_streams_scatter.
(ST_ROW,      # the backtest's slot: its row of obs_sm
 ST_OUT,      # index in out_sm of its first output (row 0)
 ST_STRIDE,   # distance in out_sm between its consecutive output rows (its stream's backtest count)
 ) = range(3)
N_STREAM_COLS = 3
#: Threads per block of both kernels (elementwise copies).
STREAMS_BLOCK = 256


def gather_grid(n: int) -> int:
    """Blocks of STREAMS_BLOCK threads covering the n backtests' actions."""
    return cdiv(n, STREAMS_BLOCK)


def scatter_grid(n: int, obs_dim: int, n_out: int) -> int:
    """Blocks covering one thread per (backtest, observation element or output row)."""
    return cdiv(n * (obs_dim + n_out), STREAMS_BLOCK)


@kernel("void(int32[::1], int32[::1], int32[::1])")
def lobsim_streams_gather(actions, perm, actions_sm):
    """actions_sm[i] = actions[perm[i]]: the run's actions in the streams' slot order.
    Launch [gather_grid(B), STREAMS_BLOCK]."""
    i = cuda.grid(1)
    if i < actions_sm.shape[0]:
        actions_sm[i] = actions[perm[i]]


@kernel("void(float32[:, ::1], float32[::1], int32[:, ::1], float32[:, ::1], float32[:, ::1])")
def lobsim_streams_scatter(obs_sm, out_sm, tab, obs, out):
    """The streams' observations and outputs in the run's backtest order (module doc).
    Thread t covers backtest t // W, element t % W of its row (W = obs_dim + N_OUT: the
    observation first, coalesced along the row, then the output rows).
    Launch [scatter_grid(B, obs_dim, N_OUT), STREAMS_BLOCK]."""
    n, d = obs.shape[0], obs.shape[1]
    w = d + out.shape[0]
    t = cuda.grid(1)
    if t >= n * w:
        return
    b = t // w
    c = t - b * w
    if c < d:
        obs[b, c] = obs_sm[tab[ST_ROW, b], c]
    else:
        k = c - d
        out[k, b] = out_sm[tab[ST_OUT, b] + k * tab[ST_STRIDE, b]]
