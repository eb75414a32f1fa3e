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

- ``rl_narrow_forward``: every narrow output, V_dq from q.val, and the target q.val.
- ``rl_narrow_backward_dx``: d(loss)/d(pre-activation of the encoder's last
  layer) on [s_t | s]: sum of dY W^T over the layers a row feeds, plus (rows s)
  the Q advantage stream's dX already there, times tanh' = 1 - h^2.
- ``rl_narrow_backward_dw`` + ``rl_narrow_dw_reduce``: [dW; db] of all five
  layers, split over the rows into per-chunk partials, then summed over the
  chunks in chunk order into each layer's block of the gradient buffer.

Determinism: every output is one thread's sum in a fixed order; no atomics.
"""
import numpy as np
from numba import cuda, float32

from alpharl.cuda_kernels.nets.heads import v_dq_of
from alpharl.cuda_kernels.registry import kernel
from alpharl.sizes import N_ACTIONS, N_ATOMS

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
#: Columns of every online row (q.val, v.out); columns from COL_PI on are the env rows' at t only.
N_ALL_ROW_COLS = COL_PI

#: Forward: rows of one block; one thread per (row, narrow column).
FWD_ROWS = 8
FWD_THREADS = FWD_ROWS * N_COLS
#: Forward: the block's q.val outputs kept for V_dq.
FWD_Q_SH = FWD_ROWS * N_ATOMS
#: Forward: hidden units staged through shared memory per step (any hidden runs in steps of this).
K_CHUNK = 32
#: Threads per block of the elementwise dX, the dW partials and the reduce.
NARROW_BLOCK = 256
#: dW split over rows: at least this many rows per chunk, at most this many chunks
#: (the reduce then sums at most that many partials per element).
DW_MIN_ROWS = 32
DW_MAX_CHUNKS = 128


def layer_offsets(layout) -> np.ndarray:
    """int32 [N_NARROW]: offset of each narrow layer's [W; b] block (NARROW_LAYERS order) in a NetLayout."""
    return np.array([layout.layers[name].offset for name in NARROW_LAYERS], np.int32)


def dw_split(rows: int) -> tuple[int, int]:
    """(n_chunks, rows per chunk) of the narrow dW over `rows` (the larger of the env batch and the minibatch)."""
    rows = max(int(rows), 1)
    want = min(-(-rows // DW_MIN_ROWS), DW_MAX_CHUNKS)
    chunk = -(-rows // want)
    return -(-rows // chunk), chunk


def dw_partial_size(rows: int, hidden: int) -> int:
    """Floats of scratch the dW partials over `rows` need."""
    return dw_split(rows)[0] * (hidden + 1) * N_COLS


def fwd_grid(n_rows: int, n_target: int) -> int:
    """Blocks of rl_narrow_forward: row tiles of the online rows, then of the target rows."""
    return -(-n_rows // FWD_ROWS) + -(-n_target // FWD_ROWS)


def dw_grid(rows: int, hidden: int) -> tuple[int, int]:
    """Grid of rl_narrow_backward_dw: (chunks, blocks over the (hidden + 1) N_COLS outputs)."""
    return dw_split(rows)[0], -(-(hidden + 1) * N_COLS // NARROW_BLOCK)


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
def narrow_dy(l, j, r, d_val, dv, d_pi, dbce, daux):
    """d(loss)/d(output j of layer l) at that layer's row r (q.val: replay row s; the others: env row t)."""
    if l == LAYER_Q:
        return d_val[r * N_ATOMS + j]
    if l == LAYER_V:
        return dv[r]
    if l == LAYER_PI:
        return d_pi[r * N_ACTIONS + j]
    if l == LAYER_BCE:
        return dbce[r]
    return daux[r]


@kernel("void(int32[::1], float32[::1], float32[::1], float32[::1], float32[::1], int32[::1], int32, int32, int32, "
        "int32, float32[::1], float32[::1], float32[::1], float32[::1], float32[::1], float32[::1], float32[::1])")
def rl_narrow_forward(gate, h, th, params, target, offsets, n_rows, n_b, n_t, hidden,
                      q_val, v_out, pi_logits, bce_out, aux_out, v_dq, t_val):
    """Every narrow layer's output on the encoder output h [n_rows, hidden], and the target q.val.

    Online rows r < n_rows: q_val[r, :] (N_ATOMS), v_out[r], v_dq[r] = V_dq of q_val[r, :];
    rows r < n_b also pi_logits[r, :] (N_ACTIONS), bce_out[r], aux_out[r]. Target rows
    r < n_t: t_val[r, :] = q.val of th [n_t, hidden] with the target parameters (the
    target buffer is the online buffer's prefix: same offsets). y = h W + b, the sum over
    k in order, then + b.

    A block owns FWD_ROWS rows of one kind (online tiles first, then target tiles) and
    runs one thread per (row, narrow column); h rows and W columns stage through shared
    memory K_CHUNK hidden units at a time. Launch [fwd_grid(n_rows, n_t), FWD_THREADS].
    gate[0] == 0: writes nothing.
    """
    if gate[0] == 0:
        return
    h_sh = cuda.shared.array((FWD_ROWS, K_CHUNK), float32)
    w_sh = cuda.shared.array((K_CHUNK, N_COLS), float32)
    q_sh = cuda.shared.array(FWD_Q_SH, float32)
    tid = cuda.threadIdx.x
    rr = tid // N_COLS
    c = tid - rr * N_COLS
    online_tiles = (n_rows + FWD_ROWS - 1) // FWD_ROWS
    online = cuda.blockIdx.x < online_tiles
    if online:
        r0 = cuda.blockIdx.x * FWD_ROWS
        n = n_rows
        x = h
        w = params
        n_cols = N_COLS
    else:
        r0 = (cuda.blockIdx.x - online_tiles) * FWD_ROWS
        n = n_t
        x = th
        w = target
        n_cols = N_ATOMS
    row = r0 + rr
    l, n_out, j = col_layer(c)
    active = row < n and c < n_cols and (c < N_ALL_ROW_COLS or row < n_b)
    acc = float32(0.0)
    for k0 in range(0, hidden, K_CHUNK):
        # Stage h[r0:r0 + FWD_ROWS, k0:k0 + K_CHUNK] and W[k0:k0 + K_CHUNK, :] (zeros outside).
        for i in range(tid, FWD_ROWS * K_CHUNK, FWD_THREADS):
            ri = i // K_CHUNK
            kk = i - ri * K_CHUNK
            v = float32(0.0)
            if r0 + ri < n and k0 + kk < hidden:
                v = x[(r0 + ri) * hidden + k0 + kk]
            h_sh[ri, kk] = v
        for i in range(tid, K_CHUNK * N_COLS, FWD_THREADS):
            kk = i // N_COLS
            ci = i - kk * N_COLS
            li, no, ji = col_layer(ci)
            v = float32(0.0)
            if ci < n_cols and k0 + kk < hidden:
                v = w[offsets[li] + (k0 + kk) * no + ji]
            w_sh[kk, ci] = v
        cuda.syncthreads()
        for kk in range(K_CHUNK):
            acc += h_sh[rr, kk] * w_sh[kk, c]
        cuda.syncthreads()
    if active:
        y = acc + w[offsets[l] + hidden * n_out + j]
        if not online:
            t_val[row * N_ATOMS + c] = y
        elif l == LAYER_Q:
            q_val[row * N_ATOMS + j] = y
            q_sh[rr * N_ATOMS + j] = y
        elif l == LAYER_V:
            v_out[row] = y
        elif l == LAYER_PI:
            pi_logits[row * N_ACTIONS + j] = y
        elif l == LAYER_BCE:
            bce_out[row] = y
        else:
            aux_out[row] = y
    cuda.syncthreads()
    if online and c == COL_Q and row < n:
        v_dq[row] = v_dq_of(q_sh, rr * N_ATOMS)


@kernel("void(int32[::1], float32[::1], float32[::1], int32[::1], float32[::1], float32[::1], float32[::1], "
        "float32[::1], float32[::1], int32, int32, int32, float32[::1])")
def rl_narrow_backward_dx(gate, h, params, offsets, d_val, dv, d_pi, dbce, daux, n_b, n_m, hidden, dh):
    """dh[r, k] on the rows [s_t (n_b) | s (n_m)] of h and dh ([n_b + n_m, hidden]), times (1 - h[r, k]^2).

    Rows r < n_b: dh = sum over v.out, pi.out, bce.out, aux.out of (dY W^T)[r, k] (written).
    Rows s = r - n_b: dh = dh (the Q advantage stream's dX, already there) + (d_val W_q^T)[s, k].
    The sum runs over the narrow columns in order. dY: d_val [n_m, N_ATOMS], dv, dbce,
    daux [n_b], d_pi [n_b, N_ACTIONS]. One thread per element of dh.
    Launch [ceil((n_b + n_m) hidden / NARROW_BLOCK), NARROW_BLOCK]. gate[0] == 0: writes nothing.
    """
    if gate[0] == 0:
        return
    i = cuda.grid(1)
    if i >= (n_b + n_m) * hidden:
        return
    r = i // hidden
    k = i - r * hidden
    acc = float32(0.0)
    if r < n_b:
        c_begin = COL_V
        c_end = N_COLS
        lr = r
    else:
        c_begin = COL_Q
        c_end = COL_Q + N_ATOMS
        lr = r - n_b
    for c in range(c_begin, c_end):
        l, n_out, j = col_layer(c)
        acc += narrow_dy(l, j, lr, d_val, dv, d_pi, dbce, daux) * params[offsets[l] + k * n_out + j]
    if r >= n_b:
        acc += dh[i]
    y = h[i]
    dh[i] = acc * (float32(1.0) - y * y)


@kernel("void(int32[::1], float32[::1], float32[::1], float32[::1], float32[::1], float32[::1], float32[::1], "
        "int32, int32, int32, int32, float32[::1])")
def rl_narrow_backward_dw(gate, h, d_val, dv, d_pi, dbce, daux, n_b, n_m, hidden, chunk_rows, partial):
    """Per-chunk partial [dW; db] of the five narrow layers.

    partial[z, k, c] (flat, [n_chunks, hidden + 1, N_COLS]) = sum over the layer's rows
    r in chunk z = [z chunk_rows, (z + 1) chunk_rows) of x[r, k] dY[r, c], x = h at the
    layer's rows (q.val: the replay rows s = h[n_b + r]; the others: h[r], r < n_b) and
    x[r, hidden] = 1 (the ones row: db). A chunk past a layer's rows writes 0.
    Launch grid dw_grid(max(n_b, n_m), hidden), chunk_rows from dw_split, block NARROW_BLOCK.
    gate[0] == 0: writes nothing.
    """
    if gate[0] == 0:
        return
    o = cuda.blockIdx.y * NARROW_BLOCK + cuda.threadIdx.x
    size = (hidden + 1) * N_COLS
    if o >= size:
        return
    k = o // N_COLS
    c = o - k * N_COLS
    l, n_out, j = col_layer(c)
    if l == LAYER_Q:
        n = n_m
        row0 = n_b
    else:
        n = n_b
        row0 = 0
    r_begin = cuda.blockIdx.x * chunk_rows
    r_end = min(n, r_begin + chunk_rows)
    acc = float32(0.0)
    for r in range(r_begin, r_end):
        dy = narrow_dy(l, j, r, d_val, dv, d_pi, dbce, daux)
        if k == hidden:
            acc += dy
        else:
            acc += h[(row0 + r) * hidden + k] * dy
    partial[cuda.blockIdx.x * size + o] = acc


@kernel("void(int32[::1], float32[::1], int32[::1], int32, int32, float32[::1])")
def rl_narrow_dw_reduce(gate, partial, offsets, n_chunks, hidden, grads):
    """grads[layer l's block][k, j] = sum over chunks z (in order) of partial[z, k, c], c = layer l's column j.

    Writes every element of the five narrow layers' [dW; db] blocks.
    Launch [ceil((hidden + 1) N_COLS / NARROW_BLOCK), NARROW_BLOCK]. gate[0] == 0: writes nothing.
    """
    if gate[0] == 0:
        return
    o = cuda.grid(1)
    size = (hidden + 1) * N_COLS
    if o >= size:
        return
    acc = float32(0.0)
    for z in range(n_chunks):
        acc += partial[z * size + o]
    k = o // N_COLS
    c = o - k * N_COLS
    l, n_out, j = col_layer(c)
    grads[offsets[l] + k * n_out + j] = acc
