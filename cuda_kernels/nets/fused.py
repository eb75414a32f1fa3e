"""``rl_update_fused``: the whole learning update of a small batch in one cooperative launch.

At small batches (B = 16, M = 256: 544 encoder rows) every kernel of the launch
sequence (alpharl/learner.py) is a few µs of latency-bound work, and the update is
a chain of them. Here the same maths runs as nine phases of one kernel, separated
by grid barriers (``cuda.cg.this_grid().sync()``) instead of kernel boundaries,
every phase a grid-stride loop over its outputs, so any grid size is correct (the
CUDA simulator runs one block; the GPU FUSED_BLOCKS_PER_SM blocks per SM, all resident
as a cooperative launch needs). Phases (what each needs is done by the one before):

 A. encoder layer 1, online on all rows (read straight from the four observation
    batches: no stacked copy) and target on s';
 B. encoder layer 2, online and target;
 C. the Q advantage stream on [s | s'] (online) and s' (target), the target's value
    stream, every narrow layer of the online net on its rows (alpharl.cuda_kernels.nets.narrow);
 D. V_dq of every row; block 0: the V blend controller (``v_blend_alpha_emit``);
    every block: a* (``argmax_rows``) then the C51 loss (``c51_rows``) of its rows;
 E. the env rows (``env_row``: V_used, advantage, PPO, V, BCE, AUX), the Q advantage
    stream's [dW; db], dh on the replay rows s (Q advantage and Q value streams' dX, tanh');
 F. dh on the env rows s_t (the other narrow layers' dX, tanh'), the narrow layers' [dW; db];
 G. encoder layer 2's [dW; db] and dX (tanh'), the five loss means into the ISV;
 H. encoder layer 1's [dW; db]; each block's sums of squares for the grad guard;
 I. the guard's decision per module (``guard_finish``, block 0 writes it; every block
    derives the same armed flags and step counts from the same sums) and Adam.

Every output element is one thread's sum in a fixed order and the guard's sums are
reduced per block, then over the blocks in order: deterministic for a given grid
(the same grid at every launch). The results equal the launch sequence's up to
float32 summation order (tests: the learner suite with the fused path on).
The grad guard's sums are taken where each gradient element is written (every
thread adds the squares of the elements it writes), which saves a phase.

Measured on the H200 (benchmarks/results/NOTES.md, 2026-12-03): slower than the
sequence at every batch (98 against 68 µs at B = M = 16): a grid barrier costs about
a graph's kernel boundary (1.3 against 1.5 µs), and a phase whose outputs are each
one thread's loop waits on memory longer than the sequence's tiled kernels. So the
learner runs it only with ``--fused-update on``.
"""
import math

from numba import cuda, float32, int32

from alpharl import target
from alpharl.cuda_kernels.controllers.common import finite
from alpharl.cuda_kernels.controllers.v_blend import v_blend_alpha_emit
from alpharl.cuda_kernels.nets.adam import (COL_LR_SLOT, COL_N_W, COL_OFFSET, N_MODULES, STATE_ARMED, STATE_COLS,
                                            STATE_STEP, TABLE_COLS, adam_element, guard_finish, module_of,
                                            strided_update_sumsq)
from alpharl.cuda_kernels.nets.advantage import ENV_COLLECT, env_row
from alpharl.cuda_kernels.nets.heads import N_Q_OUT, support_grid, v_dq_of
from alpharl.cuda_kernels.nets.losses import N_LOSSES, c51_rows, loss_count, loss_mean_block
from alpharl.cuda_kernels.nets.narrow import COL_BCE, COL_PI, COL_V, N_COLS, col_layer
from alpharl.cuda_kernels.nets.warp import WARP_ROW_BLOCK, WARP_ROWS
from alpharl.cuda_kernels.reductions import tree_sum_rows
from alpharl.cuda_kernels.registry import kernel
from alpharl.cuda_kernels.sampling.argmax_expected_q import argmax_rows
from alpharl.sizes import N_ACTIONS, N_ATOMS

#: Threads per block: the C51 and a* rows run as one warp per row in WARP_ROW_BLOCK-thread blocks.
FUSED_BLOCK = WARP_ROW_BLOCK
#: The grad guard's sums per module: ||grad_w||^2, ||rest of grad||^2, and with relative updates
#: ||Adam direction||^2 and ||params_w||^2 (rl_grad_guard's four).
GUARD_SUMS = 4
#: Blocks per SM of the cooperative grid (all must be resident at once): 2 measured fastest of 1, 2, 4 on the
#: H200 (benchmarks/fused_phases.py; a barrier costs 1.26 / 1.63 / 2.47 µs, more warps hide the loads better).
FUSED_BLOCKS_PER_SM = 2
#: Most blocks per SM a grid may have (the guard's scratch is sized for it).
FUSED_MAX_BLOCKS_PER_SM = 8
#: Phases of the update (A .. I).
N_PHASES = 9
#: Shared floats of the block reductions: the guard's sums are the widest.
_RED_COLS = N_MODULES * GUARD_SUMS
_RED_SIZE = _RED_COLS * FUSED_BLOCK


def fused_grid(per_sm: int = FUSED_BLOCKS_PER_SM) -> int:
    """Blocks of the cooperative grid: per_sm per SM on the GPU; one under the CUDA simulator (its grid
    barrier is a block barrier, so it runs cooperative grids of one block only)."""
    if target.active() != target.GPU:
        return 1
    return cuda.get_current_device().MULTIPROCESSOR_COUNT * min(per_sm, FUSED_MAX_BLOCKS_PER_SM)


def guard_partial_size(grid: int) -> int:
    """Floats of the per-block guard sums of a grid of ``grid`` blocks."""
    return grid * _RED_COLS


@cuda.jit(device=True)
def barrier(grid):
    """A grid barrier, then a block barrier: the grid barrier orders the block's threads too, but
    compute-sanitizer's racecheck models only the block barrier between one phase's shared-memory reads
    and the next phase's writes (without it: warnings, no errors)."""
    grid.sync()
    cuda.syncthreads()


@cuda.jit(device=True)
def dot_col(x, xo, w, wo, stride, n):
    """sum_k x[xo + k] w[wo + k stride] over k < n: one output of x W (W row-major, column wo). Four
    partial sums over k mod 4 (four loads in flight instead of one dependent chain), added in a fixed order."""
    a0 = float32(0.0)
    a1 = float32(0.0)
    a2 = float32(0.0)
    a3 = float32(0.0)
    k = 0
    while k + 3 < n:
        a0 += x[xo + k] * w[wo + k * stride]
        a1 += x[xo + k + 1] * w[wo + (k + 1) * stride]
        a2 += x[xo + k + 2] * w[wo + (k + 2) * stride]
        a3 += x[xo + k + 3] * w[wo + (k + 3) * stride]
        k += 4
    while k < n:
        a0 += x[xo + k] * w[wo + k * stride]
        k += 1
    return (a0 + a1) + (a2 + a3)


@cuda.jit(device=True)
def dot_row(x, xo, w, wo, n):
    """sum_c x[xo + c] w[wo + c] over c < n: one output of dY W^T (W's row wo); dot_col's order."""
    return dot_col(x, xo, w, wo, 1, n)


@cuda.jit(device=True)
def dense_out(x, xo, w, off, j, n_out, k_in):
    """Output j of a dense layer on one row: x[xo : xo + k_in] W[:, j] + b[j], the layer's [W; b] block at
    w[off:] (W row-major k_in x n_out, then b)."""
    return dot_col(x, xo, w, off + j, n_out, k_in) + w[off + k_in * n_out + j]


@cuda.jit(device=True)
def col_sum(x, xo, x_stride, dy, dyo, dy_stride, n, ones):
    """sum_r x[xo + r x_stride] dy[dyo + r dy_stride] over r < n (the ones row: x = 1): one element of
    [X^T dY; 1^T dY]; four partial sums over r mod 4, added in a fixed order."""
    a0 = float32(0.0)
    a1 = float32(0.0)
    a2 = float32(0.0)
    a3 = float32(0.0)
    r = 0
    if ones:
        while r + 3 < n:
            a0 += dy[dyo + r * dy_stride]
            a1 += dy[dyo + (r + 1) * dy_stride]
            a2 += dy[dyo + (r + 2) * dy_stride]
            a3 += dy[dyo + (r + 3) * dy_stride]
            r += 4
        while r < n:
            a0 += dy[dyo + r * dy_stride]
            r += 1
    else:
        while r + 3 < n:
            a0 += x[xo + r * x_stride] * dy[dyo + r * dy_stride]
            a1 += x[xo + (r + 1) * x_stride] * dy[dyo + (r + 1) * dy_stride]
            a2 += x[xo + (r + 2) * x_stride] * dy[dyo + (r + 2) * dy_stride]
            a3 += x[xo + (r + 3) * x_stride] * dy[dyo + (r + 3) * dy_stride]
            r += 4
        while r < n:
            a0 += x[xo + r * x_stride] * dy[dyo + r * dy_stride]
            r += 1
    return (a0 + a1) + (a2 + a3)


@cuda.jit(device=True)
def obs_row(r, d, b, m, obs_t, obs_s, obs_sp, obs_tp1):
    """(batch, offset) of encoder row r of [s_t (b) | s (m) | s' (m) | s_t+1]: its d observation values."""
    if r < b:
        return obs_t, r * d
    if r < b + m:
        return obs_s, (r - b) * d
    if r < b + 2 * m:
        return obs_sp, (r - b - m) * d
    return obs_tp1, (r - b - 2 * m) * d


@cuda.jit(device=True)
def env_col(c, dv, d_pi, dbce, daux):
    """(array, offset, row stride) of d(loss)/d(narrow column c >= COL_V) over the env rows: row t's value is
    array[offset + t stride]."""
    if c == COL_V:
        return dv, 0, 1
    if c < COL_BCE:
        return d_pi, c - COL_PI, N_ACTIONS
    if c == COL_BCE:
        return dbce, 0, 1
    return daux, 0, 1


@cuda.jit(device=True)
def guard_add(acc, i, g, grads, params, m, v, table, state, rel_update):
    """Add gradient element i (= g, already written to grads) to this thread's guard sums acc [N_MODULES
    GUARD_SUMS]: its square to grad_w's or the rest's, and with rel_update its Adam direction's and
    parameter's squares (``strided_update_sumsq`` on the one element, at the module's coming step)."""
    k = module_of(i, table)
    if i < table[k * TABLE_COLS + COL_OFFSET] + table[k * TABLE_COLS + COL_N_W]:
        acc[k * GUARD_SUMS] += g * g
        if rel_update != 0:
            t_next = float32(state[k * STATE_COLS + STATE_STEP] + 1)
            su, sp = strided_update_sumsq(grads, params, m, v, i, i + 1, 0, 1, t_next)
            acc[k * GUARD_SUMS + 2] += su
            acc[k * GUARD_SUMS + 3] += sp
    else:
        acc[k * GUARD_SUMS + 1] += g * g


_F, _I, _S = "float32[::1]", "int32[::1]", "int32"
#: rl_update_fused's argument types, in order (see its docstring).
_FUSED_ARGS = ([_I, _S] + [_F] * 6 + [_I] * 3 + [_S] * 7   # gate, mode, isv .. adam_v, table, state, offsets, d .. n_params
               + [_F] * 4 + [_I] + [_F] * 4                # obs_t, obs_tp1, reward, done, action, logp_old .. ppo_adv
               + [_F] * 2 + [_I] + [_F] * 3                # obs_s, obs_sp, r_action, r_reward, r_done, is_w
               + [_S] * 7                                  # b, m, n_next, stride, module_mask, rel_update, last_phase
               + [_F] * 13 + [_I] + [_F] * 18)             # h1 .. aux_out, a_star, d_adv .. guard_partial


@kernel(f"void({', '.join(_FUSED_ARGS)})")
def rl_update_fused(gate, mode, isv, params, tparams, grads, adam_m, adam_v, table, adam_state, offsets,
                    d, h, o_e1, o_e2, o_qa, o_qv, n_params,
                    obs_t, obs_tp1, reward, done, action, logp_old, label_up, label_ret, ppo_adv,
                    obs_s, obs_sp, r_action, r_reward, r_done, is_w,
                    b, m, n_next, stride, module_mask, rel_update, last_phase,
                    h1, hh, th1, th, q_adv, q_val, t_adv, t_val, pi_logits, v_out, v_dq, bce_out, aux_out, a_star,
                    d_adv, d_val, td, losses, v_used, v_used_next, advantage, ret, d_pi, entropy, kl, ratio,
                    dv, dbce, daux, dh, dh1, guard_partial):
    """One whole learning update (alpharl/learner.py's sequence, the module docstring's phases).

    Networks: the flat ``params`` / ``tparams`` (target) / ``grads`` / Adam buffers, the module
    ``table`` and ``adam_state`` (rl_grad_guard, rl_adam), the narrow layers' ``offsets``; encoder
    input width d, hidden width h; o_e1, o_e2, o_qa, o_qv: the [W; b] blocks of enc.l1, enc.l2, q.adv
    and q.val. Env batch (b rows at t, n_next at t+1) and replay batch (m rows): as Learner.update
    takes them. mode: ENV_ONE_STEP, ENV_COLLECT or ENV_GAE (a later iteration of a rollout's update:
    ppo_adv and ret are inputs). The rest: the learner's buffers, written as the launch sequence
    writes them; guard_partial: [grid, N_MODULES GUARD_SUMS] scratch. last_phase: the phases run are
    A .. the last_phase-th (N_PHASES: the whole update; fewer only to time the phases one by one).
    Launch [fused_grid(), FUSED_BLOCK] (cooperative). gate[0] == 0: writes nothing.
    """
    if gate[0] == 0:
        return
    grid = cuda.cg.this_grid()
    red = cuda.shared.array(_RED_SIZE, float32)
    sh_x = cuda.shared.array((WARP_ROWS, N_ACTIONS, N_ATOMS), float32)   # a*'s rows (argmax_rows)
    sh_e = cuda.shared.array((WARP_ROWS, N_ACTIONS), float32)
    sh_t = cuda.shared.array((WARP_ROWS, N_ATOMS), float32)              # the C51 rows (c51_rows)
    sh_o = cuda.shared.array((WARP_ROWS, N_ATOMS), float32)
    sh_m = cuda.shared.array((WARP_ROWS, N_ATOMS), float32)
    armed = cuda.shared.array(N_MODULES, int32)
    t_step = cuda.shared.array(N_MODULES, float32)
    gacc = cuda.local.array(_RED_COLS, float32)
    for i in range(_RED_COLS):
        gacc[i] = float32(0.0)
    tid = cuda.threadIdx.x
    blk = cuda.blockIdx.x
    n_blk = cuda.gridDim.x
    g0 = cuda.grid(1)
    gs = n_blk * FUSED_BLOCK
    rows = b + 2 * m + n_next
    grows = b + m
    o_s = b
    o_sp = b + m
    o_tp1 = b + 2 * m
    nq = N_Q_OUT

    # A. encoder layer 1: online on every row, target on s'
    n_on = rows * h
    for o in range(g0, n_on + m * h, gs):
        if o < n_on:
            r = o // h
            j = o - r * h
            x, xo = obs_row(r, d, b, m, obs_t, obs_s, obs_sp, obs_tp1)
            h1[o] = math.tanh(dense_out(x, xo, params, o_e1, j, h, d))
        else:
            q = o - n_on
            r = q // h
            j = q - r * h
            th1[q] = math.tanh(dense_out(obs_sp, r * d, tparams, o_e1, j, h, d))
    barrier(grid)

    if last_phase == 1:
        return
    # B. encoder layer 2
    for o in range(g0, n_on + m * h, gs):
        if o < n_on:
            r = o // h
            j = o - r * h
            hh[o] = math.tanh(dense_out(h1, r * h, params, o_e2, j, h, h))
        else:
            q = o - n_on
            r = q // h
            j = q - r * h
            th[q] = math.tanh(dense_out(th1, r * h, tparams, o_e2, j, h, h))
    barrier(grid)

    if last_phase == 2:
        return
    # C. Q advantage stream (online on [s | s'], target on s'), target value stream, online narrow layers
    n_qa = 2 * m * nq
    n_nar = rows * N_COLS
    n_ta = m * nq
    for o in range(g0, n_qa + n_nar + n_ta + m * N_ATOMS, gs):
        if o < n_qa:
            r = o // nq
            j = o - r * nq
            q_adv[o] = dense_out(hh, (o_s + r) * h, params, o_qa, j, nq, h)
        elif o < n_qa + n_nar:
            q = o - n_qa
            r = q // N_COLS
            c = q - r * N_COLS
            if c < COL_PI or r < b:   # q.val and V on every row; pi, BCE, AUX on the env rows at t only
                lay, n_out, jj = col_layer(c)
                y = dense_out(hh, r * h, params, offsets[lay], jj, n_out, h)
                if c < COL_V:
                    q_val[r * N_ATOMS + jj] = y
                elif c == COL_V:
                    v_out[r] = y
                elif c < COL_BCE:
                    pi_logits[r * N_ACTIONS + jj] = y
                elif c == COL_BCE:
                    bce_out[r] = y
                else:
                    aux_out[r] = y
        elif o < n_qa + n_nar + n_ta:
            q = o - n_qa - n_nar
            r = q // nq
            j = q - r * nq
            t_adv[q] = dense_out(th, r * h, tparams, o_qa, j, nq, h)
        else:
            q = o - n_qa - n_nar - n_ta
            r = q // N_ATOMS
            j = q - r * N_ATOMS
            t_val[q] = dense_out(th, r * h, tparams, o_qv, j, N_ATOMS, h)
    barrier(grid)

    if last_phase == 3:
        return
    # D. V_dq of every row; the V blend controller (block 0, on s_t); a* and the C51 loss per replay row
    v_min, _, dz = support_grid(isv)
    for r in range(g0, rows, gs):
        v_dq[r] = v_dq_of(q_val, r * N_ATOMS, v_min, dz)
    if blk == 0:   # V_dq of s_t again here: other blocks write those rows' v_dq in this same phase
        a_err = float32(0.0)
        a_mag = float32(0.0)
        for i in range(tid, b, FUSED_BLOCK):
            vs = v_out[i]
            a_err += abs(v_dq_of(q_val, i * N_ATOMS, v_min, dz) - vs)
            a_mag += abs(vs)
        red[tid] = a_err
        red[FUSED_BLOCK + tid] = a_mag
        cuda.syncthreads()
        tree_sum_rows(red, 2, tid, FUSED_BLOCK)
        if tid == 0:
            v_blend_alpha_emit(isv, red[0], red[FUSED_BLOCK], b)
    argmax_rows(blk, n_blk, sh_x, sh_e, q_adv[m * nq:], q_val[o_sp * N_ATOMS:], m, isv, a_star)
    cuda.syncthreads()   # a* of this block's rows (written by their lane 0) before the C51 rows read it
    c51_rows(blk, n_blk, sh_t, sh_o, sh_m, q_adv, q_val[o_s * N_ATOMS:], r_action, t_adv, t_val, a_star, r_reward,
             r_done, is_w, m, isv, d_adv, d_val, losses, td)
    barrier(grid)

    if last_phase == 4:
        return
    # E. env rows; the Q advantage stream's [dW; db]; dh on the replay rows s
    n_dw = (h + 1) * nq
    for o in range(g0, b + n_dw + m * h, gs):
        if o < b:
            env_row(o, mode, v_out, v_dq, v_out[o_tp1:], v_dq[o_tp1:], reward, done, pi_logits, action, logp_old,
                    ppo_adv, bce_out, label_up, aux_out, label_ret, b, n_next, isv, stride, v_used, v_used_next,
                    advantage, ret, d_pi, entropy, kl, ratio, dv, dbce, daux, losses)
        elif o < b + n_dw:
            q = o - b
            i = q // nq
            j = q - i * nq
            g = col_sum(hh, o_s * h + i, h, d_adv, j, nq, m, i == h)
            grads[o_qa + q] = g
            guard_add(gacc, o_qa + q, g, grads, params, adam_m, adam_v, table, adam_state, rel_update)
        else:
            q = o - b - n_dw
            s = q // h
            k = q - s * h
            acc = dot_row(d_adv, s * nq, params, o_qa + k * nq, nq) + dot_row(d_val, s * N_ATOMS, params,
                                                                              o_qv + k * N_ATOMS, N_ATOMS)
            y = hh[(o_s + s) * h + k]
            dh[(o_s + s) * h + k] = acc * (float32(1.0) - y * y)
    barrier(grid)

    if last_phase == 5:
        return
    # F. dh on the env rows s_t; the narrow layers' [dW; db]
    n_ndw = (h + 1) * N_COLS
    for o in range(g0, b * h + n_ndw, gs):
        if o < b * h:
            t = o // h
            k = o - t * h
            acc = float32(0.0)
            for c in range(COL_V, N_COLS):
                lay, n_out, jj = col_layer(c)
                dy, dyo, dys = env_col(c, dv, d_pi, dbce, daux)
                acc += dy[dyo + t * dys] * params[offsets[lay] + k * n_out + jj]
            y = hh[o]
            dh[o] = acc * (float32(1.0) - y * y)
        else:
            q = o - b * h
            k = q // N_COLS
            c = q - k * N_COLS
            lay, n_out, jj = col_layer(c)
            if c < COL_V:   # q.val: the replay rows s
                acc = col_sum(hh, o_s * h + k, h, d_val, jj, N_ATOMS, m, k == h)
            else:   # the others: the env rows s_t
                dy, dyo, dys = env_col(c, dv, d_pi, dbce, daux)
                acc = col_sum(hh, k, h, dy, dyo, dys, b, k == h)
            i = offsets[lay] + k * n_out + jj
            grads[i] = acc
            guard_add(gacc, i, acc, grads, params, adam_m, adam_v, table, adam_state, rel_update)
    barrier(grid)

    if last_phase == 6:
        return
    # G. encoder layer 2: [dW; db] and dX (times tanh' of layer 1) over [s_t | s]; the loss means
    n_e2 = (h + 1) * h
    for o in range(g0, n_e2 + grows * h, gs):
        if o < n_e2:
            i = o // h
            j = o - i * h
            g = col_sum(h1, i, h, dh, j, h, grows, i == h)
            grads[o_e2 + o] = g
            guard_add(gacc, o_e2 + o, g, grads, params, adam_m, adam_v, table, adam_state, rel_update)
        else:
            q = o - n_e2
            r = q // h
            i = q - r * h
            y = h1[q]
            dh1[q] = dot_row(dh, r * h, params, o_e2 + i * h, h) * (float32(1.0) - y * y)
    n_pv = 0 if mode == ENV_COLLECT else b
    for lr_ in range(blk, N_LOSSES, n_blk):   # block-uniform: every thread reaches the barriers
        loss_mean_block(losses, lr_, stride, loss_count(lr_, m, b, n_pv), isv, red, tid, FUSED_BLOCK)
        cuda.syncthreads()   # red is the next row's
    barrier(grid)

    if last_phase == 7:
        return
    # H. encoder layer 1's [dW; db] over [s_t | s]; the block's guard sums
    for o in range(g0, (d + 1) * h, gs):
        i = o // h
        j = o - i * h
        acc = col_sum(obs_t, i, d, dh1, j, h, b, i == d) + col_sum(obs_s, i, d, dh1, b * h + j, h, m, i == d)
        grads[o_e1 + o] = acc
        guard_add(gacc, o_e1 + o, acc, grads, params, adam_m, adam_v, table, adam_state, rel_update)
    for c in range(_RED_COLS):
        red[c * FUSED_BLOCK + tid] = gacc[c]
    cuda.syncthreads()
    tree_sum_rows(red, _RED_COLS, tid, FUSED_BLOCK)
    if tid < _RED_COLS:
        guard_partial[blk * _RED_COLS + tid] = red[tid * FUSED_BLOCK]
    if tid < N_MODULES:
        t_step[tid] = float32(adam_state[tid * STATE_COLS + STATE_STEP] + 1)
    barrier(grid)

    if last_phase == 8:
        return
    # I. the guard per module (every block the same sums: each thread a fixed set of blocks, then the tree),
    # block 0 writes its decision; then Adam on the armed modules
    for c in range(_RED_COLS):
        red[c * FUSED_BLOCK + tid] = float32(0.0)
    for z in range(tid, n_blk, FUSED_BLOCK):
        for c in range(_RED_COLS):
            red[c * FUSED_BLOCK + tid] += guard_partial[z * _RED_COLS + c]
    cuda.syncthreads()
    tree_sum_rows(red, _RED_COLS, tid, FUSED_BLOCK)
    if tid < N_MODULES:
        k = tid
        s0 = red[(k * GUARD_SUMS) * FUSED_BLOCK]
        s1 = red[(k * GUARD_SUMS + 1) * FUSED_BLOCK]
        on = (module_mask >> k) & 1 != 0
        armed[k] = 1 if on and finite(s0 + s1) else 0
        if blk == 0:
            if on:
                guard_finish(k, s0, s1, red[(k * GUARD_SUMS + 2) * FUSED_BLOCK], red[(k * GUARD_SUMS + 3) * FUSED_BLOCK],
                             table, isv, adam_state, rel_update)
            else:
                adam_state[k * STATE_COLS + STATE_ARMED] = 0
    cuda.syncthreads()
    for i in range(g0, n_params, gs):
        k = module_of(i, table)
        if armed[k] != 0:
            adam_element(i, params, grads, adam_m, adam_v, isv[table[k * TABLE_COLS + COL_LR_SLOT]], t_step[k])


@kernel("void(int32)", test_only=True)
def rl_grid_barriers(n):
    """n grid barriers and nothing else (cooperative): what a barrier of rl_update_fused's grid costs, beside
    n launches of it with n = 0, a chain of n empty graph nodes (benchmarks/fused_phases.py)."""
    grid = cuda.cg.this_grid()
    for _ in range(n):
        barrier(grid)
