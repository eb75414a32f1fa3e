"""The narrow layers on the encoder output h, forward and backward, in few launches.

Five layers read h and have few outputs: the Q value stream q.val (N_ATOMS),
V (v.out, 1), pi (pi.out, N_ACTIONS), BCE (bce.out, 1) and AUX (aux.out, 1).
Each alone is far too small to fill a GEMM launch, so they run together:
side by side they are one [hidden + 1, N_COLS] matrix whose columns are the
layers' outputs in ``NARROW_LAYERS`` order (q.val, v.out, pi.out, bce.out,
aux.out; "narrow column" c below). Every layer keeps its own [W; b] block in
the flat parameter buffer; ``offsets`` (int32 [N_NARROW], built once by
``layer_offsets``) holds each block's offset, so column c of layer l at input k
is params[offsets[l] + k n_out_l + j] (k = hidden: the bias).

Rows (the learner's stacked encoder rows): q.val and v.out run on every row,
pi, BCE and AUX on the first n_b rows (the env batch at t) only, and the
target network's q.val on its own encoder output at s'.

- forward (``alpharl.nets.Launcher.narrow_forward``): ``rl_narrow_gather_w`` puts the
  five [W; b] blocks side by side, the matrix kernel computes y = h W + b for all
  N_COLS columns at once, ``rl_narrow_scatter`` splits y into the layers' buffers and
  computes V_dq; the target's q.val is one GEMM on its own (a single layer). On an
  H200 a hand-tiled narrow forward measured 70 µs at 16384 + 4096 rows (36 µs at 64
  rows), slower than these launches together.
- ``rl_narrow_backward_dx``: d(loss)/d(pre-activation of the encoder's last
  layer) on [s_t | s]: sum of dY W^T over the layers a row feeds, plus (rows s)
  the Q advantage stream's dX already there, times tanh' = 1 - h^2.
- ``rl_narrow_backward_dw`` + ``rl_narrow_dw_reduce``: [dW; db] of all five
  layers, split over the rows into per-chunk partials, then summed over the
  chunks in chunk order into each layer's block of the gradient buffer.

Tiling. Every kernel stages its operands in shared memory once per block and
gives each thread a small register block, so that one shared load feeds
several FMAs (an SM issues about one warp-wide shared load per clock against
four warp-wide FMAs): the dW threads own COL_GROUP adjacent narrow
columns (``N_COL_GROUPS`` groups; q.val's columns are whole groups, so a group
belongs to the env rows or to the replay rows, never both) times a few hidden
units; the dX threads own a few rows of one hidden
unit. The dY of a tile is gathered into one [rows, N_COLS] shared block once
(``stage_dy``), with zeros where a row does not feed a layer: a zero term
leaves a float sum unchanged, so no thread branches per column.

Determinism: every output is one thread's sum in a fixed order; no atomics.
"""
import numpy as np
from numba import cuda, float32, int32, uint64

from alpharl.cuda_kernels.nets.heads import support_grid, v_dq_of
from alpharl.cuda_kernels.registry import kernel
from alpharl.sizes import N_ACTIONS, N_ATOMS, cdiv

#: The narrow layers, in narrow-column order (index = layer index l of ``offsets``).
NARROW_LAYERS = ("q.val", "v.out", "pi.out", "bce.out", "aux.out")
N_NARROW = len(NARROW_LAYERS)
LAYER_Q, LAYER_V, LAYER_PI, LAYER_BCE, LAYER_AUX = range(N_NARROW)
#: First narrow column of each layer, and the column count.
COL_Q = 0
COL_V = COL_Q + N_ATOMS
COL_PI = COL_V + 1
COL_BCE = COL_PI + N_ACTIONS
COL_AUX = COL_BCE + 1
N_COLS = COL_AUX + 1

#: Narrow columns of one dW thread, and the column groups; q.val is the first Q_COL_GROUPS groups.
COL_GROUP = 3
N_COL_GROUPS = N_COLS // COL_GROUP
Q_COL_GROUPS = N_ATOMS // COL_GROUP
assert N_COLS % COL_GROUP == 0 and N_ATOMS % COL_GROUP == 0, "a column group must not straddle q.val's end"

#: Hidden units staged through shared memory per step (any hidden runs in steps of this).
K_CHUNK = 32
#: Threads per block of the dX and the reduce.
NARROW_BLOCK = 256
#: dX: a block owns DX_ROWS rows x DX_K hidden units; thread (k, row group rg) sums rows rg + DX_GROUPS i.
DX_K = 32
DX_GROUPS = NARROW_BLOCK // DX_K
DX_PER = 4
DX_ROWS = DX_GROUPS * DX_PER
#: dW: a block owns one row chunk x DW_K hidden units (the ones row: the first k block); thread
#: (column group g, k group kg) owns k = kg + DW_GROUPS i, i < DW_PER; rows stage DW_R at a time.
DW_GROUPS = 16
DW_PER = 2
DW_K = DW_GROUPS * DW_PER
DW_THREADS = N_COL_GROUPS * DW_GROUPS
DW_ACC = DW_PER * COL_GROUP
DW_R = 32
#: dW: the replay rows' h tile follows the env rows' at this offset; the extra half bank row puts
#: the two tiles' reads of one warp in distinct banks.
DW_X_TILE = DW_R * DW_K + 16
#: dW split over rows: at least this many rows per chunk, at most this many chunks
#: (the reduce then sums at most that many partials per element).
DW_MIN_ROWS = 64
DW_MAX_CHUNKS = 32
#: Shared array sizes (the typer takes plain constants only), in floats.
DX_W_SH = N_COLS * DX_K
DX_DY_SH = DX_ROWS * N_COLS
DW_X_SH = DW_X_TILE + DW_R * DW_K
DW_DY_SH = DW_R * N_COLS
#: Reduce: partials loaded per step (loads in flight together; the sum stays in chunk order).
REDUCE_UNROLL = 4


def layer_offsets(layout) -> np.ndarray:
    """int32 [N_NARROW]: offset of each narrow layer's [W; b] block (NARROW_LAYERS order) in a NetLayout."""
    return np.array([layout.layers[name].offset for name in NARROW_LAYERS], np.int32)


def dw_split(rows: int) -> tuple[int, int]:
    """(n_chunks, rows per chunk) of the narrow dW over `rows` (the larger of the env batch and the minibatch)."""
    rows = max(int(rows), 1)
    want = min(cdiv(rows, DW_MIN_ROWS), DW_MAX_CHUNKS)
    chunk = cdiv(rows, want)
    return cdiv(rows, chunk), chunk


def dw_partial_size(rows: int, hidden: int) -> int:
    """Floats of scratch the dW partials over `rows` need."""
    return dw_split(rows)[0] * (hidden + 1) * N_COLS


def dw_grid(rows: int, hidden: int) -> tuple[int, int]:
    """Grid of rl_narrow_backward_dw: (chunks, blocks of DW_K hidden units)."""
    return dw_split(rows)[0], cdiv(hidden, DW_K)


def dx_grid(n_rows: int, hidden: int) -> tuple[int, int]:
    """Grid of rl_narrow_backward_dx over n_rows = n_b + n_m rows: (row tiles, blocks of DX_K hidden units)."""
    return cdiv(n_rows, DX_ROWS), cdiv(hidden, DX_K)


@cuda.jit(device=True)
def col_layer(c):
    """(layer index l, the layer's n_out, column j within the layer) of narrow column c."""
    if c < COL_V:
        return LAYER_Q, N_ATOMS, c - COL_Q
    if c < COL_PI:
        return LAYER_V, 1, 0
    if c < COL_BCE:
        return LAYER_PI, N_ACTIONS, c - COL_PI
    if c < COL_AUX:
        return LAYER_BCE, 1, 0
    return LAYER_AUX, 1, 0


@cuda.jit(device=True)
def stage_col_table(offsets, col_base, col_stride, tid):
    """Thread tid < N_COLS: col_base[c] = offset of W[0, c] in the flat buffer, col_stride[c] = its row
    stride (the layer's n_out), c = tid; W[k, c] = params[col_base[c] + k col_stride[c]]."""
    if tid < N_COLS:
        l, n_out, j = col_layer(tid)
        col_base[tid] = offsets[l] + j
        col_stride[tid] = n_out


@cuda.jit(device=True)
def stage_w(w, col_base, col_stride, n_cols, k0, n_k, hidden, sh, s_k, s_c, tid, n_threads):
    """sh[kk s_k + c s_c] = W[k0 + kk, c] for kk < n_k, c < N_COLS (0 for c >= n_cols or k0 + kk >= hidden)."""
    for i in range(tid, n_k * N_COLS, n_threads):
        c = i // n_k
        kk = i - c * n_k
        v = float32(0.0)
        if c < n_cols and k0 + kk < hidden:
            v = w[col_base[c] + (k0 + kk) * col_stride[c]]
        sh[kk * s_k + c * s_c] = v


@cuda.jit(device=True)
def stage_rows(x, row0, n_valid, k0, hidden, sh, base, n_tile, stride, tid, n_threads):
    """sh[base + ri stride + kk] = x[row0 + ri, k0 + kk] (x: [*, hidden]) for ri < n_tile, kk < K_CHUNK;
    0 for ri >= n_valid or k0 + kk >= hidden."""
    for i in range(tid, n_tile * K_CHUNK, n_threads):
        ri = i // K_CHUNK
        kk = i - ri * K_CHUNK
        v = float32(0.0)
        if ri < n_valid and k0 + kk < hidden:
            v = x[(row0 + ri) * hidden + k0 + kk]
        sh[base + ri * stride + kk] = v


@cuda.jit(device=True)
def stage_dy(sh, n_tile, env0, n_env, rep0, n_rep, d_val, dv, d_pi, dbce, daux, tid, n_threads):
    """sh[rr, c] ([n_tile, N_COLS] flat) = d(loss)/d(narrow column c) of tile row rr: the q.val columns
    from replay row rep0 + rr (d_val, rows 0 <= . < n_rep), the others from env row env0 + rr (dv, d_pi,
    dbce, daux, rows 0 <= . < n_env); 0 where that row does not exist."""
    for i in range(tid, n_tile * N_ATOMS, n_threads):
        rr = i // N_ATOMS
        j = i - rr * N_ATOMS
        r = rep0 + rr
        v = float32(0.0)
        if 0 <= r < n_rep:
            v = d_val[r * N_ATOMS + j]
        sh[rr * N_COLS + COL_Q + j] = v
    for i in range(tid, n_tile * N_ACTIONS, n_threads):
        rr = i // N_ACTIONS
        j = i - rr * N_ACTIONS
        r = env0 + rr
        v = float32(0.0)
        if 0 <= r < n_env:
            v = d_pi[r * N_ACTIONS + j]
        sh[rr * N_COLS + COL_PI + j] = v
    for rr in range(tid, n_tile, n_threads):
        r = env0 + rr
        a = float32(0.0)
        b = float32(0.0)
        c = float32(0.0)
        if 0 <= r < n_env:
            a = dv[r]
            b = dbce[r]
            c = daux[r]
        sh[rr * N_COLS + COL_V] = a
        sh[rr * N_COLS + COL_BCE] = b
        sh[rr * N_COLS + COL_AUX] = c


@kernel("void(int32[::1], float32[::1], int32[::1], int32, float32[::1])")
def rl_narrow_gather_w(gate, params, offsets, hidden, w_out):
    """w_out [hidden + 1, N_COLS] (row-major) = the five narrow layers' [W; b] side by side in
    narrow-column order, gathered from their blocks of the flat buffer ``params``.

    With it the narrow forward is one ordinary GEMM (``Launcher.narrow_forward``): the
    register-tiled matrix kernel instead of a hand-written one. One thread per element.
    Launch [ceil((hidden + 1) N_COLS / NARROW_BLOCK), NARROW_BLOCK]. gate[0] == 0: writes nothing.
    """
    if gate[0] == 0:
        return
    o = cuda.grid(1)
    if o >= (hidden + 1) * N_COLS:
        return
    k = o // N_COLS
    c = o - k * N_COLS
    l, n_out, j = col_layer(c)
    w_out[o] = params[offsets[l] + k * n_out + j]


@kernel("void(int32[::1], float32[::1], int32, int32, float32[::1], float32[::1], float32[::1], float32[::1], "
        "float32[::1], float32[::1], float32[::1])")
def rl_narrow_scatter(gate, y, n_rows, n_b, isv, q_val, v_out, pi_logits, bce_out, aux_out, v_dq):
    """Split the narrow outputs y [n_rows, N_COLS] into the layers' buffers.

    Rows r < n_rows: q_val[r, :] (N_ATOMS), v_out[r], v_dq[r] = V_dq of q_val[r, :] (on the ISV's
    support); rows r < n_b
    also pi_logits[r, :] (N_ACTIONS), bce_out[r], aux_out[r]. One thread per element of y (reads
    coalesce; the thread of a row's V column also computes its V_dq).
    Launch [ceil(n_rows N_COLS / NARROW_BLOCK), NARROW_BLOCK]. gate[0] == 0: writes nothing.
    """
    if gate[0] == 0:
        return
    i = cuda.grid(1)
    if i >= n_rows * N_COLS:
        return
    r = i // N_COLS
    c = i - r * N_COLS
    if c < COL_V:
        q_val[r * N_ATOMS + c - COL_Q] = y[i]
    elif c == COL_V:
        v_out[r] = y[i]
        v_min, _, dz = support_grid(isv)
        v_dq[r] = v_dq_of(y, r * N_COLS + COL_Q, v_min, dz)
    elif r < n_b:
        if c < COL_BCE:
            pi_logits[r * N_ACTIONS + c - COL_PI] = y[i]
        elif c == COL_BCE:
            bce_out[r] = y[i]
        else:
            aux_out[r] = y[i]


@kernel("void(int32[::1], float32[::1], float32[::1], int32[::1], float32[::1], float32[::1], float32[::1], "
        "float32[::1], float32[::1], int32, int32, int32, float32[::1])")
def rl_narrow_backward_dx(gate, h, params, offsets, d_val, dv, d_pi, dbce, daux, n_b, n_m, hidden, dh):
    """dh[r, k] on the rows [s_t (n_b) | s (n_m)] of h and dh ([n_b + n_m, hidden]), times (1 - h[r, k]^2).

    Rows r < n_b: dh = sum over v.out, pi.out, bce.out, aux.out of (dY W^T)[r, k] (written).
    Rows s = r - n_b: dh = dh (the Q advantage stream's dX, already there) + (d_val W_q^T)[s, k].
    The sum runs over the narrow columns in order. dY: d_val [n_m, N_ATOMS], dv, dbce,
    daux [n_b], d_pi [n_b, N_ACTIONS].

    A block owns DX_ROWS rows x DX_K hidden units: it stages that slice of W^T and its rows'
    dY (``stage_dy``: zero in the columns a row does not feed), then thread (k, rg) sums
    rows rg + DX_GROUPS i over the columns the block's rows feed (COL_V.. for env rows,
    ..COL_V for replay rows, all where the tile holds both: the added terms are zeros).
    Launch [dx_grid(n_b + n_m, hidden), NARROW_BLOCK]. gate[0] == 0: writes nothing.
    """
    if gate[0] == 0:
        return
    wt_sh = cuda.shared.array(DX_W_SH, float32)
    dy_sh = cuda.shared.array(DX_DY_SH, float32)
    col_base = cuda.shared.array(N_COLS, int32)
    col_stride = cuda.shared.array(N_COLS, int32)
    acc = cuda.local.array(DX_PER, float32)
    tid = cuda.threadIdx.x
    kx = tid % DX_K
    rg = tid // DX_K
    r0 = cuda.blockIdx.x * DX_ROWS
    k0 = cuda.blockIdx.y * DX_K
    n = n_b + n_m
    stage_col_table(offsets, col_base, col_stride, tid)
    cuda.syncthreads()
    stage_w(params, col_base, col_stride, N_COLS, k0, DX_K, hidden, wt_sh, 1, DX_K, tid, NARROW_BLOCK)
    stage_dy(dy_sh, DX_ROWS, r0, n_b, r0 - n_b, n_m, d_val, dv, d_pi, dbce, daux, tid, NARROW_BLOCK)
    cuda.syncthreads()
    c_begin = COL_V
    if r0 + DX_ROWS > n_b:   # the tile holds replay rows
        c_begin = COL_Q
    c_end = N_ATOMS
    if r0 < n_b:             # the tile holds env rows
        c_end = N_COLS
    for i in range(DX_PER):
        acc[i] = float32(0.0)
    dk = uint64(rg * N_COLS + c_begin)   # running shared offsets
    wk = uint64(c_begin * DX_K + kx)
    for _ in range(c_end - c_begin):
        wv = wt_sh[wk]
        for i in range(DX_PER):
            acc[i] += dy_sh[dk + uint64(i * DX_GROUPS * N_COLS)] * wv
        dk += uint64(1)
        wk += uint64(DX_K)
    k = k0 + kx
    for i in range(DX_PER):
        r = r0 + rg + DX_GROUPS * i
        if r < n and k < hidden:
            o = r * hidden + k
            a = acc[i]
            if r >= n_b:
                a += dh[o]
            y = h[o]
            dh[o] = a * (float32(1.0) - y * y)


@kernel("void(int32[::1], float32[::1], float32[::1], float32[::1], float32[::1], float32[::1], float32[::1], "
        "int32, int32, int32, int32, float32[::1])")
def rl_narrow_backward_dw(gate, h, d_val, dv, d_pi, dbce, daux, n_b, n_m, hidden, chunk_rows, partial):
    """Per-chunk partial [dW; db] of the five narrow layers.

    partial[z, k, c] (flat, [n_chunks, hidden + 1, N_COLS]) = sum over the layer's rows
    r in chunk z = [z chunk_rows, (z + 1) chunk_rows) of x[r, k] dY[r, c], in row order,
    x = h at the layer's rows (q.val: the replay rows s = h[n_b + r]; the others: h[r],
    r < n_b) and x[r, hidden] = 1 (the ones row: db). A chunk past a layer's rows writes 0.

    Block (z, y) owns chunk z and hidden units [y DW_K, (y + 1) DW_K); blocks y = 0 also the
    ones row. Per DW_R rows it stages the env rows' and the replay rows' h slices and the
    rows' dY (``stage_dy``); thread (g, kg) accumulates columns COL_GROUP g + 0..2 at
    k = kg + DW_GROUPS i from the tile its group reads (g < Q_COL_GROUPS: replay rows).
    Launch grid dw_grid(max(n_b, n_m), hidden), chunk_rows from dw_split, block DW_THREADS.
    gate[0] == 0: writes nothing.
    """
    if gate[0] == 0:
        return
    x_sh = cuda.shared.array(DW_X_SH, float32)
    dy_sh = cuda.shared.array(DW_DY_SH, float32)
    acc = cuda.local.array(DW_ACC, float32)
    ones = cuda.local.array(COL_GROUP, float32)
    tid = cuda.threadIdx.x
    g = tid % N_COL_GROUPS
    kg = tid // N_COL_GROUPS
    z = cuda.blockIdx.x
    k0 = cuda.blockIdx.y * DW_K
    with_ones = cuda.blockIdx.y == 0
    r_begin = z * chunk_rows
    r_stop = min(r_begin + chunk_rows, max(n_b, n_m))
    for i in range(DW_ACC):
        acc[i] = float32(0.0)
    for j in range(COL_GROUP):
        ones[j] = float32(0.0)
    xb = uint64(kg)
    if g < Q_COL_GROUPS:
        xb += uint64(DW_X_TILE)
    cb = uint64(g * COL_GROUP)
    for rt in range(r_begin, r_stop, DW_R):
        stage_rows(h, rt, n_b - rt, k0, hidden, x_sh, 0, DW_R, DW_K, tid, DW_THREADS)
        stage_rows(h, n_b + rt, n_m - rt, k0, hidden, x_sh, DW_X_TILE, DW_R, DW_K, tid, DW_THREADS)
        stage_dy(dy_sh, DW_R, rt, n_b, rt, n_m, d_val, dv, d_pi, dbce, daux, tid, DW_THREADS)
        cuda.syncthreads()
        dk = cb   # running shared offsets
        xk = xb
        for _ in range(min(DW_R, r_stop - rt)):
            d0 = dy_sh[dk]
            d1 = dy_sh[dk + uint64(1)]
            d2 = dy_sh[dk + uint64(2)]
            dk += uint64(N_COLS)
            for i in range(DW_PER):
                xv = x_sh[xk + uint64(i * DW_GROUPS)]
                acc[COL_GROUP * i] += xv * d0
                acc[COL_GROUP * i + 1] += xv * d1
                acc[COL_GROUP * i + 2] += xv * d2
            if with_ones:
                ones[0] += d0
                ones[1] += d1
                ones[2] += d2
            xk += uint64(DW_K)
        cuda.syncthreads()
    size = (hidden + 1) * N_COLS
    base = z * size + g * COL_GROUP
    for i in range(DW_PER):
        k = k0 + kg + DW_GROUPS * i
        if k < hidden:
            for j in range(COL_GROUP):
                partial[base + k * N_COLS + j] = acc[COL_GROUP * i + j]
    if with_ones and kg == 0:
        for j in range(COL_GROUP):
            partial[base + hidden * N_COLS + j] = ones[j]


@kernel("void(int32[::1], float32[::1], int32[::1], int32, int32, float32[::1])")
def rl_narrow_dw_reduce(gate, partial, offsets, n_chunks, hidden, grads):
    """grads[layer l's block][k, j] = sum over chunks z (in order) of partial[z, k, c], c = layer l's column j.

    Writes every element of the five narrow layers' [dW; db] blocks. The partials load
    REDUCE_UNROLL at a time (in flight together); the adds stay in chunk order.
    Launch [ceil((hidden + 1) N_COLS / NARROW_BLOCK), NARROW_BLOCK]. gate[0] == 0: writes nothing.
    """
    if gate[0] == 0:
        return
    o = cuda.grid(1)
    size = (hidden + 1) * N_COLS
    if o >= size:
        return
    part = cuda.local.array(REDUCE_UNROLL, float32)
    acc = float32(0.0)
    z = 0
    while z + REDUCE_UNROLL <= n_chunks:
        for u in range(REDUCE_UNROLL):
            part[u] = partial[(z + u) * size + o]
        for u in range(REDUCE_UNROLL):
            acc += part[u]
        z += REDUCE_UNROLL
    while z < n_chunks:
        acc += partial[z * size + o]
        z += 1
    k = o // N_COLS
    c = o - k * N_COLS
    l, n_out, j = col_layer(c)
    grads[offsets[l] + k * n_out + j] = acc
