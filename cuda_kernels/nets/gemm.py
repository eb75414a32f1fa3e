"""The one matrix kernel of the networks: a shared-memory tiled SGEMM.

``rl_gemm`` computes C = epilogue(A @ B) for logical matrices A[M, K] and
B[K, N] read through strides, so the same code serves every layer's

- forward  Y = act(X @ W + b)          A = X (row-major), B = W (row-major);
- backward dX = dY @ W^T (x act'(Y))   A = dY, B = W read transposed;
- backward [dW; db] = [X^T @ dY; 1^T dY], A = X read transposed, B = dY,
  split over the batch (K) dimension into partial products that
  ``rl_split_reduce`` then sums in a fixed order.

Every layer keeps its weight and bias as one contiguous [K_in + 1, N] block
(W row-major, then b), so the backward writes [dW; db] in one go: the extra
"ones row" of C holds the column sums of B, i.e. db = sum over the batch of dY.

Determinism: each output element is accumulated by one thread in a fixed k
order; the batch reduction of dW goes through per-split partials (no float
atomics), so the same inputs always give bit-identical results.

Tiling: a block of BLOCK_Y x BLOCK_X = 16 x 16 threads owns a TILE_M x TILE_N =
64 x 64 tile of C; each thread accumulates a THREAD_M x THREAD_N = 4 x 4
register block (outputs strided by 16 so shared-memory reads are broadcast or
conflict-free). K advances in TILE_K = 16 slices staged through shared memory;
loads are coalesced along whichever of A's / B's dimensions is contiguous.
B = 1 and B = 65536 run the same code: the grid covers M and N, and the dW
split count spreads a large batch over enough blocks to fill the GPU.
"""
import math

from numba import cuda, float32

from alpharl.cuda_kernels.registry import kernel

#: Output tile of one block (square: A and B tiles stage through the same code).
TILE_MN = 64
TILE_M = TILE_MN
TILE_N = TILE_MN
#: K slice staged through shared memory per step.
TILE_K = 16
#: Register block of one thread.
THREAD_M = 4
THREAD_N = 4
#: Block shape: (BLOCK_X, BLOCK_Y) threads.
BLOCK_X = TILE_N // THREAD_N
BLOCK_Y = TILE_M // THREAD_M
GEMM_THREADS = BLOCK_X * BLOCK_Y
#: Elements of an A or B tile each thread stages per K slice.
TILE_LOADS = TILE_MN * TILE_K // GEMM_THREADS
#: Padding of the shared tiles' rows (breaks bank conflicts of column-wise stores).
SMEM_PAD = 1
A_SH_COLS = TILE_M + SMEM_PAD
#: Accumulators of one thread.
THREAD_TILE = THREAD_M * THREAD_N
B_SH_COLS = TILE_N + SMEM_PAD
#: Threads per block of the elementwise kernels of this package.
ELEMWISE_BLOCK = 256

#: Epilogues: identity, tanh, and "times tanh'(.)" = (1 - Y^2) for a stored tanh output Y.
ACT_NONE = 0
ACT_TANH = 1
ACT_TANH_GRAD = 2


@cuda.jit(device=True)
def stage_tile(src, sh, tid, x0, x_len, k0, k_end, s_x, s_k, x_fast):
    """sh[kk, xx] = S(x0 + xx, k0 + kk), S(x, k) = src[x s_x + k s_k], 0 outside x < x_len, k < k_end.

    One TILE_K x TILE_MN tile of A (x = m) or B (x = n); consecutive threads walk
    the operand's contiguous dimension (x when x_fast, else k) so loads coalesce.
    """
    for r in range(TILE_LOADS):
        idx = tid + r * GEMM_THREADS
        if x_fast:
            xx = idx % TILE_MN
            kk = idx // TILE_MN
        else:
            kk = idx % TILE_K
            xx = idx // TILE_K
        gx = x0 + xx
        gk = k0 + kk
        v = float32(0.0)
        if gx < x_len and gk < k_end:
            v = src[gx * s_x + gk * s_k]
        sh[kk, xx] = v


@kernel("void(int32[::1], float32[::1], float32[::1], float32[::1], float32[::1], float32[::1], "
        "int32, int32, int32, int32, int32, int32, int32, int32, int32, int32, int32, int32)")
def rl_gemm(gate, a, b, bias, y, c, m_rows, n_cols, k_len, a_sm, a_sk, b_sk, b_sn, k_split,
            use_bias, act, beta, ones_row):
    """C[z] = epilogue(A[:, Kz] @ B[Kz, :]) for the K range Kz = [z k_split, (z+1) k_split).

    A(m, k) = a[m a_sm + k a_sk], B(k, n) = b[k b_sk + n b_sn]; C is row-major
    [M (+1 with ones_row), N] per split z, splits stacked: c[z (M + ones_row) N + m N + n].
    Epilogue, in order: + bias[n] (use_bias); + old C (beta = 1); then act:
    ACT_TANH -> tanh, ACT_TANH_GRAD -> x (1 - y[m N + n]^2).
    ones_row = 1: row M of C gets the column sums of B over Kz (db of a dW product),
    written by the blocks of the first M tile.

    Launch grid (ceil(N / TILE_N), ceil(M / TILE_M), n_splits), block (BLOCK_X, BLOCK_Y).
    gate[0] == 0: the block exits at once and writes nothing (K-loop predication).
    """
    if gate[0] == 0:
        return
    a_sh = cuda.shared.array((TILE_K, A_SH_COLS), float32)
    b_sh = cuda.shared.array((TILE_K, B_SH_COLS), float32)
    acc = cuda.local.array(THREAD_TILE, float32)
    ra = cuda.local.array(THREAD_M, float32)
    rb = cuda.local.array(THREAD_N, float32)
    tx = cuda.threadIdx.x
    ty = cuda.threadIdx.y
    tid = ty * BLOCK_X + tx
    n0 = cuda.blockIdx.x * TILE_N
    m0 = cuda.blockIdx.y * TILE_M
    z = cuda.blockIdx.z
    k_begin = z * k_split
    k_end = min(k_len, k_begin + k_split)
    # Column sums for the ones row: thread (tx, ty < THREAD_N) owns column tx + ty BLOCK_X.
    col_sum = float32(0.0)
    sums_cols = ones_row != 0 and cuda.blockIdx.y == 0 and ty < THREAD_N
    for i in range(THREAD_TILE):
        acc[i] = float32(0.0)

    for k0 in range(k_begin, k_end, TILE_K):
        stage_tile(a, a_sh, tid, m0, m_rows, k0, k_end, a_sm, a_sk, a_sk != 1)
        stage_tile(b, b_sh, tid, n0, n_cols, k0, k_end, b_sn, b_sk, b_sn == 1)
        cuda.syncthreads()
        for kk in range(TILE_K):
            for i in range(THREAD_M):
                ra[i] = a_sh[kk, ty + i * BLOCK_Y]
            for j in range(THREAD_N):
                rb[j] = b_sh[kk, tx + j * BLOCK_X]
            for i in range(THREAD_M):
                for j in range(THREAD_N):
                    acc[i * THREAD_N + j] += ra[i] * rb[j]
        if sums_cols:
            for kk in range(TILE_K):
                col_sum += b_sh[kk, tx + ty * BLOCK_X]
        cuda.syncthreads()

    split_stride = (m_rows + ones_row) * n_cols
    c0 = z * split_stride
    for i in range(THREAD_M):
        gm = m0 + ty + i * BLOCK_Y
        for j in range(THREAD_N):
            gn = n0 + tx + j * BLOCK_X
            if gm < m_rows and gn < n_cols:
                v = acc[i * THREAD_N + j]
                off = c0 + gm * n_cols + gn
                if use_bias != 0:
                    v += bias[gn]
                if beta != 0:
                    v += c[off]
                if act == ACT_TANH:
                    v = math.tanh(v)
                elif act == ACT_TANH_GRAD:
                    yv = y[gm * n_cols + gn]
                    v *= float32(1.0) - yv * yv
                c[off] = v
    if sums_cols:
        gn = n0 + tx + ty * BLOCK_X
        if gn < n_cols:
            c[c0 + m_rows * n_cols + gn] = col_sum


@kernel("void(int32[::1], float32[::1], int32, int32, float32[::1])")
def rl_split_reduce(gate, partial, n_splits, size, out):
    """out[i] = sum_{s < n_splits} partial[s size + i], summed in split order (deterministic).

    Launch [ceil(size / ELEMWISE_BLOCK), ELEMWISE_BLOCK]. gate[0] == 0: writes nothing.
    """
    if gate[0] == 0:
        return
    i = cuda.grid(1)
    if i < size:
        acc = float32(0.0)
        for s in range(n_splits):
            acc += partial[s * size + i]
        out[i] = acc
