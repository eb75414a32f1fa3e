"""Adam with a non-finite guard, and the target network's soft update.

Parameters, gradients and both Adam moments of all six modules live in one
flat buffer each (alpharl.nets lays them out); a small int32 table gives each
module's [offset, size, n_w, lr slot, obs grad-norm slot, nan-skip slot], so
one guard launch and one Adam launch serve every module.

Per module and update: ``rl_grad_guard`` computes ||grad|| over the module's
whole flat gradient (one non-finite element makes it non-finite) and
||grad[:n_w]|| (the seeds' grad_w, the LR controller's signal, written to the
module's RL_OBS_*_GRAD_NORM slot). A finite norm advances the module's step
counter and arms the update; a non-finite one counts in RL_NAN_SKIPS_* and
leaves parameters, moments and step counter untouched. ``rl_adam`` then applies
bias-corrected Adam with the learning rate read from the ISV this step.

With ``rel_update`` (--adaptive-anchors) the guard also writes each module's relative update
rho = lr ||u[:n_w]|| / max(||params[:n_w]||, ||W_ref||), u = m_hat / (sqrt(v_hat) + eps) the
direction of the Adam step ``rl_adam`` is about to take (the same moments, bias corrections and
eps), into the module's relative-update slot (its grad-norm slot + REL_UPDATE_OBS_OFFSET): the
signal the LR controller's anchor reads (controllers/anchors.py). ||W_ref||^2 (COL_W_REF_SQ) is the
norm a LeCun-initialised W of the module's shape has: output layers start at x0.01 or x0.1 of it (so
that the policy and the C51 distribution start near uniform), and a step measured against that small
start would hold their learning rates at the floor until they had grown.
"""
import math

from numba import cuda, float32

from alpharl import target
from alpharl.cuda_kernels.controllers.common import finite
from alpharl.cuda_kernels.nets.gemm import ELEMWISE_BLOCK
from alpharl.cuda_kernels.reductions import strided_sumsq, tree_sum
from alpharl.cuda_kernels.registry import kernel
from alpharl.isv import REL_UPDATE_OBS_OFFSET, RL_TARGET_TAU

#: Adam hyper-parameters (Kingma & Ba defaults).
ADAM_BETA1 = 0.9
ADAM_BETA2 = 0.999
ADAM_EPS = 1.0e-8
#: 1 - beta and ln(beta), folded in double precision: float32(1) - float32(0.999) would
#: carry a 5e-5 relative error into every second-moment update.
ADAM_ONE_MINUS_BETA1 = 1.0 - ADAM_BETA1
ADAM_ONE_MINUS_BETA2 = 1.0 - ADAM_BETA2
ADAM_LOG_BETA1 = math.log(ADAM_BETA1)
ADAM_LOG_BETA2 = math.log(ADAM_BETA2)
#: Modules: Q, pi, V, BCE, AUX, encoder (the order of the ISV's per-head slots).
N_MODULES = 6
#: Columns of the module table.
COL_OFFSET = 0
COL_SIZE = 1
COL_N_W = 2
COL_LR_SLOT = 3
COL_OBS_SLOT = 4
COL_NAN_SLOT = 5
#: ||W||^2 of the module's grad_w at LeCun scale (the floor of the relative update's denominator).
COL_W_REF_SQ = 6
TABLE_COLS = 7
#: Threads of rl_grad_guard's one block per module (a power of two: tree_sum). Under the CUDA
#: simulator, whose cost is its thread count (a Python thread each), 32: the same code at another
#: power-of-two width.
GUARD_BLOCK = target.gpu_or_sim("nets.adam.GUARD_BLOCK", gpu=1024, sim=32)
#: rl_grad_guard's module mask with every module learning.
MASK_ALL = (1 << N_MODULES) - 1
#: Per-module device state, int32 [N_MODULES, STATE_COLS]: Adam step t, armed flag.
STATE_STEP = 0
STATE_ARMED = 1
STATE_COLS = 2


@cuda.jit(device=True)
def adam_moments(m, v, g):
    """This step's Adam moments (m', v') of one element from the last (m, v) and the gradient g."""
    mi = float32(ADAM_BETA1) * m + float32(ADAM_ONE_MINUS_BETA1) * g
    vi = float32(ADAM_BETA2) * v + float32(ADAM_ONE_MINUS_BETA2) * g * g
    return mi, vi


@cuda.jit(device=True)
def adam_bias(t):
    """The bias corrections (1 - beta1^t, 1 - beta2^t) at step t, as -expm1(t ln beta): no cancellation at small t."""
    return -math.expm1(t * float32(ADAM_LOG_BETA1)), -math.expm1(t * float32(ADAM_LOG_BETA2))


@cuda.jit(device=True)
def strided_update_sumsq(grad, params, m, v, begin, end, tid, stride, t):
    """(sum of u_i^2, sum of params_i^2) over i = begin + tid + j stride < end, u the Adam direction
    m_hat / (sqrt(v_hat) + eps) at step t (one thread's share of a block-stride sum)."""
    c1, c2 = adam_bias(t)
    su = float32(0.0)
    sp = float32(0.0)
    i = begin + tid
    while i < end:
        mi, vi = adam_moments(m[i], v[i], grad[i])
        u = (mi / c1) / (math.sqrt(vi / c2) + float32(ADAM_EPS))
        su += u * u
        pv = params[i]
        sp += pv * pv
        i += stride
    return su, sp


@kernel("void(int32[::1], float32[::1], float32[::1], float32[::1], float32[::1], int32[::1], float32[::1], "
        "int32[::1], int32, int32)")
def rl_grad_guard(gate, grad, params, m, v, table, isv, state, module_mask, rel_update):
    """Block k: norms of module k's gradient; arm (t += 1) or skip (nan count += 1); with rel_update != 0
    and a finite gradient, the relative update rho of the step about to be taken (module docstring).

    Only modules whose bit (1 << k) is set in module_mask learn (MASK_ALL but on a
    rollout's collect steps, where pi and V do not): a module outside it is disarmed
    and writes nothing else (its grad-norm slot and step counter hold).
    Launch [N_MODULES, GUARD_BLOCK]. gate[0] == 0: writes nothing.
    Fixed-order block-stride sums + tree reduce: deterministic. A module is up to ~27k
    floats read by one block: GUARD_BLOCK threads with four loads in flight each keep
    that a few rounds of memory latency instead of ~100.
    """
    if gate[0] == 0:
        return
    s_w = cuda.shared.array(GUARD_BLOCK, float32)
    s_all = cuda.shared.array(GUARD_BLOCK, float32)
    s_u = cuda.shared.array(GUARD_BLOCK, float32)
    s_p = cuda.shared.array(GUARD_BLOCK, float32)
    k = cuda.blockIdx.x
    tid = cuda.threadIdx.x
    if (module_mask >> k) & 1 == 0:   # the whole block leaves: no barrier is skipped by part of it
        if tid == 0:
            state[k * STATE_COLS + STATE_ARMED] = 0
        return
    off = table[k * TABLE_COLS + COL_OFFSET]
    size = table[k * TABLE_COLS + COL_SIZE]
    n_w = table[k * TABLE_COLS + COL_N_W]
    s_w[tid] = strided_sumsq(grad, off, off + n_w, tid, GUARD_BLOCK)
    s_all[tid] = strided_sumsq(grad, off + n_w, off + size, tid, GUARD_BLOCK)
    if rel_update != 0:
        # Read before thread 0 advances the step count below (after the barriers): t of the coming step.
        t_next = float32(state[k * STATE_COLS + STATE_STEP] + 1)
        s_u[tid], s_p[tid] = strided_update_sumsq(grad, params, m, v, off, off + n_w, tid, GUARD_BLOCK, t_next)
        cuda.syncthreads()
        tree_sum(s_u, tid, GUARD_BLOCK)
        tree_sum(s_p, tid, GUARD_BLOCK)
    cuda.syncthreads()
    tree_sum(s_w, tid, GUARD_BLOCK)
    tree_sum(s_all, tid, GUARD_BLOCK)
    if tid == 0:
        guard_finish(k, s_w[0], s_all[0], s_u[0], s_p[0], table, isv, state, rel_update)


@cuda.jit(device=True)
def guard_finish(k, sum_w, sum_rest, sum_u, sum_p, table, isv, state, rel_update):
    """rl_grad_guard's decision for module k (one thread) from its sums of squares: grad_w (sum_w), the rest of
    its gradient (sum_rest) and, with rel_update, the Adam direction (sum_u) and grad_w's parameters (sum_p)."""
    norm_w = math.sqrt(sum_w)
    total = math.sqrt(sum_w + sum_rest)
    obs_slot = table[k * TABLE_COLS + COL_OBS_SLOT]
    isv[obs_slot] = norm_w
    if rel_update != 0 and finite(total):
        ref = max(sum_p, float32(table[k * TABLE_COLS + COL_W_REF_SQ]))
        rho = float32(0.0)
        if ref > float32(0.0):
            rho = isv[table[k * TABLE_COLS + COL_LR_SLOT]] * math.sqrt(sum_u) / math.sqrt(ref)
        isv[obs_slot + REL_UPDATE_OBS_OFFSET] = rho if finite(rho) else float32(0.0)
    if finite(total):
        state[k * STATE_COLS + STATE_STEP] += 1
        state[k * STATE_COLS + STATE_ARMED] = 1
    else:
        state[k * STATE_COLS + STATE_ARMED] = 0
        isv[table[k * TABLE_COLS + COL_NAN_SLOT]] += float32(1.0)


@kernel("void(int32[::1], float32[::1], float32[::1], float32[::1], float32[::1], int32, int32[::1], "
        "float32[::1], int32[::1])")
def rl_adam(gate, params, grad, m, v, n_total, table, isv, state):
    """Bias-corrected Adam on params[0:n_total] for every armed module (after rl_grad_guard).

    m <- b1 m + (1 - b1) g; v <- b2 v + (1 - b2) g^2;
    p <- p - lr (m / (1 - b1^t)) / (sqrt(v / (1 - b2^t)) + eps), lr = isv[module's lr slot],
    t = the module's step counter, already advanced by rl_grad_guard.
    Launch [ceil(n_total / ELEMWISE_BLOCK), ELEMWISE_BLOCK]. gate[0] == 0: writes nothing.
    """
    if gate[0] == 0:
        return
    i = cuda.grid(1)
    if i >= n_total:
        return
    k = module_of(i, table)
    if state[k * STATE_COLS + STATE_ARMED] == 0:
        return
    adam_element(i, params, grad, m, v, isv[table[k * TABLE_COLS + COL_LR_SLOT]],
                 float32(state[k * STATE_COLS + STATE_STEP]))


@cuda.jit(device=True)
def module_of(i, table):
    """The module k whose [offset, offset + size) slice of the flat buffers holds element i."""
    k = 0
    for j in range(N_MODULES):
        off = table[j * TABLE_COLS + COL_OFFSET]
        if off <= i < off + table[j * TABLE_COLS + COL_SIZE]:
            k = j
    return k


@cuda.jit(device=True)
def adam_element(i, params, grad, m, v, lr, t):
    """One element's bias-corrected Adam step at step t (>= 1) with learning rate lr (rl_adam)."""
    mi, vi = adam_moments(m[i], v[i], grad[i])
    m[i] = mi
    v[i] = vi
    c1, c2 = adam_bias(t)
    m_hat = mi / c1
    v_hat = vi / c2
    params[i] -= lr * m_hat / (math.sqrt(v_hat) + float32(ADAM_EPS))


@kernel("void(float32[::1], float32[::1], int32, float32[::1])")
def rl_soft_update(target, online, n, isv):
    """target <- tau online + (1 - tau) target over [0, n), tau = isv[RL_TARGET_TAU].

    Once per env step (not K-gated). Launch [ceil(n / ELEMWISE_BLOCK), ELEMWISE_BLOCK].
    """
    i = cuda.grid(1)
    if i < n:
        tau = isv[RL_TARGET_TAU]
        target[i] = tau * online[i] + (float32(1.0) - tau) * target[i]
