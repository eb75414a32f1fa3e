"""Losses of the five heads and their gradients with respect to the head outputs.

Each kernel runs one thread per sample (rl_c51_loss: one warp) and writes the per-sample loss and
d(mean loss)/d(head output) (already divided by the batch size), which the
GEMM backward then turns into weight and input gradients. Every head's loss is
a mean over its own batch: Q over the replay minibatch (n = M), the others over
the env batch (n = B); the encoder's gradient is the sum of the heads'.

- ``rl_c51_loss``: C51 cross-entropy against the projected Double-DQN target
  (a* from ``argmax_expected_q`` on the online net at s', the target net's
  distribution at (s', a*) shifted by r + gamma (1 - done) z and projected onto
  the supports), weighted by the replay importance weights.
- ``rl_ppo_loss``: PPO clipped surrogate with dual clip and entropy bonus.
- ``rl_scalar_loss``: value regression (Huber), BCE (sigmoid logit vs 0/1
  label) and AUX regression (MSE), one kernel selected by ``kind``.
- ``rl_loss_means``: the five batch means into the ISV loss slots.
"""
import math

from numba import cuda, float32, int32

from alpharl.cuda_kernels.nets.heads import (N_Q_OUT, adv_mean, dueling_logit, gained, log_softmax_inplace, log_sum_exp,
                                             reward_gain, support, support_grid)
from alpharl.cuda_kernels.nets.warp import WARP, WARP_ROWS, warp_rows_grid
from alpharl.cuda_kernels.reductions import REDUCE_BLOCK, tree_sum
from alpharl.cuda_kernels.registry import kernel
from alpharl.isv import (RL_ENTROPY_COEF, RL_GAMMA, RL_LOSS_PI, RL_LOSS_Q, RL_LOSS_V, RL_PPO_CLIP_EPS,
                         RL_PPO_RATIO_CLAMP)
from alpharl.sizes import N_ACTIONS, N_ATOMS

#: rl_scalar_loss kinds.
LOSS_HUBER = 0
LOSS_BCE = 1
LOSS_MSE = 2
#: Huber threshold of the value regression, in reward units. Returns are
#: heavy-tailed (a trade's PnL lands at its close): beyond |err| > HUBER_DELTA
#: the gradient is capped at HUBER_DELTA, so a few large closes cannot dominate
#: the value head's grad norm (the LR controller's signal); below it, MSE.
HUBER_DELTA = 1.0
#: Rows of the per-sample loss buffer: Q, pi, V, BCE, AUX (the ISV loss slots' order).
N_LOSSES = 5


def c51_grid(n):
    """Launch geometry of ``rl_c51_loss`` for n rows: (blocks, threads), one warp per row."""
    return warp_rows_grid(n)


@kernel("void(int32[::1], float32[::1], float32[::1], int32[::1], float32[::1], float32[::1], int32[::1], "
        "float32[::1], float32[::1], float32[::1], int32, float32[::1], "
        "float32[::1], float32[::1], float32[::1], float32[::1])")
def rl_c51_loss(gate, adv, val, actions, t_adv, t_val, a_star, reward, done, is_w, n, isv,
                d_adv, d_val, loss, td):
    """C51 loss of the dueling Q head for n replay transitions (s, a, r, done, s').

    adv[n, N_ACTIONS N_ATOMS], val[n, N_ATOMS]: online streams at s; t_adv, t_val:
    target-net streams at s'; a_star[n]: argmax_a E[Z_online(s', a)].
    r = reward[b] x the reward normaliser's gain (``reward_gain``: 1 without --reward-norm; the replay
    keeps rewards before the gain, so every stored reward is read at today's gain), and the support
    z_j = V_MIN + j DELTA_Z from the ISV (``support_grid``).
    Target: q = p_target(. | s', a*); Tz_j = clamp(r + gamma (1 - done) z_j, V_MIN, V_MAX),
    b_j = (Tz_j - V_MIN) / DELTA_Z, l = floor(b_j), u = ceil(b_j); m_l += q_j (u - b_j),
    m_u += q_j (b_j - l). When b_j is an exact integer, l == u and both shares
    are 0: all of q_j must go to l explicitly, or that mass is lost.
    Outputs: loss[b] = CE_b = -sum_z m_z log p(z | s, a) (unweighted: the new PER
    priority), td[b] = r + gamma (1 - done) E[Z_target(s', a*)] - E[Z(s, a)],
    and the gradient of L = (1/n) sum_b w_b CE_b: with g_z = (w_b / n)(p_z sum(m) - m_z)
    on the logits of action a, d_val = g, d_adv[k, z] = g_z ([k == a] - 1 / N_ACTIONS)
    (the dueling mean passes -1/N_ACTIONS of every logit's gradient to every action).

    One warp per row, lane z < N_ATOMS owning atom z (see nets/warp.py); the
    projection is a gather: lane z sums, in source order j, the shares of the
    target atoms j whose l or u is z, so no two lanes write one atom (no atomics)
    and every sum keeps the serial order. Launch ``c51_grid(n)``; any grid of
    WARP_ROW_BLOCK-thread blocks is correct (rows stride over the warps).
    gate[0] == 0: writes nothing.
    """
    if gate[0] == 0:
        return
    sh_t = cuda.shared.array((WARP_ROWS, N_ATOMS), float32)  # target logits at (s', a*)
    sh_o = cuda.shared.array((WARP_ROWS, N_ATOMS), float32)  # online logits at (s, a)
    sh_m = cuda.shared.array((WARP_ROWS, N_ATOMS), float32)  # projected target m
    c51_rows(cuda.blockIdx.x, cuda.gridDim.x, sh_t, sh_o, sh_m, adv, val, actions, t_adv, t_val, a_star, reward,
             done, is_w, n, isv, d_adv, d_val, loss, td)


@cuda.jit(device=True)
def c51_rows(blk, n_blk, sh_t, sh_o, sh_m, adv, val, actions, t_adv, t_val, a_star, reward, done, is_w, n, isv,
             d_adv, d_val, loss, td):
    """``rl_c51_loss``'s rows as block blk of n_blk WARP_ROW_BLOCK-thread blocks (its arguments; sh_t, sh_o,
    sh_m: the block's shared [WARP_ROWS, N_ATOMS] rows, declared by the kernel: a shared array declared in
    a device function is what numba-cuda-mlir does not compile). The fused small-batch update runs the same
    rows. Every thread of the block must call it."""
    w = cuda.threadIdx.x // WARP
    z = cuda.threadIdx.x % WARP
    gamma = isv[RL_GAMMA]
    g_r = reward_gain(isv)
    v_min, v_max, dz = support_grid(isv)
    inv_a = float32(1.0) / float32(N_ACTIONS)
    # Rows stride over the grid's warps; the loop bounds are the same for the whole block,
    # so every thread reaches every syncthreads (idle lanes and rows >= n only skip the work).
    for base in range(blk * WARP_ROWS, n, n_blk * WARP_ROWS):
        b = base + w
        active = w < WARP_ROWS and b < n and z < N_ATOMS
        a = int32(0)
        ol = r = disc = lse_o = mz = e_target = float32(0.0)  # (typed on every path; set on active lanes)
        if active:
            a = actions[b]
            sh_t[w, z] = dueling_logit(t_adv, t_val, b, a_star[b], z, adv_mean(t_adv, b, z))
            ol = dueling_logit(adv, val, b, a, z, adv_mean(adv, b, z))
            sh_o[w, z] = ol
        cuda.syncthreads()
        if active:
            r = gained(reward[b], g_r)
            disc = gamma * (float32(1.0) - done[b])
            lse_t = log_sum_exp(sh_t[w], N_ATOMS)
            lse_o = log_sum_exp(sh_o[w], N_ATOMS)
            for j in range(N_ATOMS):
                qj = math.exp(sh_t[w, j] - lse_t)
                zj = support(j, v_min, dz)
                e_target += qj * zj
                tz = min(max(r + disc * zj, v_min), v_max)
                bj = min(max((tz - v_min) / dz, float32(0.0)), float32(N_ATOMS - 1))
                if not (bj >= float32(0.0) and bj <= float32(N_ATOMS - 1)):
                    bj = float32(0.0)  # NaN target: keep the indices in range; the mass is poisoned below
                lo = int32(math.floor(bj))
                hi = int32(math.ceil(bj))
                if lo == hi:
                    if lo == z:
                        mz += qj
                elif lo == z:
                    mz += qj * (float32(hi) - bj)
                elif hi == z:
                    mz += qj * (bj - float32(lo))
            if not (math.isfinite(r) and math.isfinite(disc)):
                # A non-finite reward/done: the target is NaN, so are the loss and gradients,
                # and the grad guard skips the Q update (nothing reaches the weights).
                mz = float32(math.nan)
            sh_m[w, z] = mz
        cuda.syncthreads()
        if active:
            m_sum = float32(0.0)
            for j in range(N_ATOMS):
                m_sum += sh_m[w, j]
            if z == 0:
                ce = float32(0.0)
                e_online = float32(0.0)
                for j in range(N_ATOMS):
                    lpj = sh_o[w, j] - lse_o
                    ce -= sh_m[w, j] * lpj
                    e_online += math.exp(lpj) * support(j, v_min, dz)
                loss[b] = ce
                td[b] = r + disc * e_target - e_online
            g = is_w[b] / float32(n) * (math.exp(ol - lse_o) * m_sum - mz)
            d_val[b * N_ATOMS + z] = g
            for k in range(N_ACTIONS):
                sel = float32(1.0) if k == a else float32(0.0)
                d_adv[b * N_Q_OUT + k * N_ATOMS + z] = g * (sel - inv_a)
        cuda.syncthreads()  # the next rows overwrite this block's shared rows


@kernel("void(int32[::1], float32[::1], int32[::1], float32[::1], float32[::1], int32, float32[::1], "
        "float32[::1], float32[::1], float32[::1], float32[::1], float32[::1])", test_only=True)
def rl_ppo_loss(gate, logits, actions, logp_old, advantage, n, isv, d_logits, loss, entropy, kl, ratio_out):
    """PPO clipped surrogate with dual clip (Ye et al. 2020) and entropy bonus, per sample.

    logits[n, N_ACTIONS] at the current parameters; a = actions[b] was sampled
    from pi_old with log-prob logp_old[b]. ratio = exp(log pi(a) - logp_old);
    obj = min(ratio A, clip(ratio, 1 - eps, 1 + eps) A); for A < 0 obj = max(obj, c A)
    (dual clip: a very large ratio on a negative advantage cannot drive an
    unbounded step); loss_b = -obj - coef H(pi). eps = isv[RL_PPO_CLIP_EPS],
    c = isv[RL_PPO_RATIO_CLAMP], coef = isv[RL_ENTROPY_COEF].
    Gradient of the mean loss: d obj / d ratio = A when the unclipped branch is
    the active one, else 0; d ratio / d logit_j = ratio ([j == a] - pi_j);
    dH / d logit_j = -pi_j (log pi_j + H).
    Also: entropy[b] = H, kl[b] = (ratio - 1) - log ratio (the k3 estimator of
    KL(pi_old || pi_new) for a ~ pi_old: unbiased, non-negative), ratio_out[b].
    Launch [ceil(n / ROW_BLOCK), ROW_BLOCK]. gate[0] == 0: writes nothing.
    """
    if gate[0] == 0:
        return
    b = cuda.grid(1)
    if b >= n:
        return
    loss[b], entropy[b], kl[b], ratio_out[b] = ppo_row(logits, b * N_ACTIONS, actions[b], logp_old[b], advantage[b],
                                                       isv, float32(1.0) / float32(n), d_logits)


@cuda.jit(device=True)
def ppo_row(logits, off, a, logp_old, adv, isv, inv_n, d_logits):
    """rl_ppo_loss for one sample: logits[off:off + N_ACTIONS], action a; writes d_logits[off:off + N_ACTIONS]
    (times inv_n = 1 / batch) and returns (loss, entropy, kl, ratio)."""
    lp = cuda.local.array(N_ACTIONS, float32)
    for j in range(N_ACTIONS):
        lp[j] = logits[off + j]
    log_softmax_inplace(lp, N_ACTIONS)
    eps = isv[RL_PPO_CLIP_EPS]
    c = isv[RL_PPO_RATIO_CLAMP]
    coef = isv[RL_ENTROPY_COEF]
    log_ratio = lp[a] - logp_old
    ratio = math.exp(log_ratio)
    clipped = min(max(ratio, float32(1.0) - eps), float32(1.0) + eps)
    surr1 = ratio * adv
    surr2 = clipped * adv
    # d obj / d ratio of the active branch.
    if surr1 <= surr2:
        obj = surr1
        d_obj = adv
    else:
        obj = surr2
        d_obj = adv if clipped == ratio else float32(0.0)
    if adv < float32(0.0) and c * adv > obj:
        obj = c * adv
        d_obj = float32(0.0)
    h = float32(0.0)
    for j in range(N_ACTIONS):
        h -= math.exp(lp[j]) * lp[j]
    for j in range(N_ACTIONS):
        pj = math.exp(lp[j])
        sel = float32(1.0) if j == a else float32(0.0)
        d_logits[off + j] = inv_n * (-d_obj * ratio * (sel - pj) + coef * pj * (lp[j] + h))
    kl = max((ratio - float32(1.0)) - log_ratio, float32(0.0))  # >= 0; float32 rounding near ratio 1
    return -obj - coef * h, h, kl, ratio


@kernel("void(int32[::1], float32[::1], float32[::1], int32, int32, float32[::1], float32[::1])", test_only=True)
def rl_scalar_loss(gate, pred, target, n, kind, d_pred, loss):
    """Per-sample loss of a one-output head and d(mean loss)/d pred.

    kind LOSS_HUBER (value head vs return): 0.5 e^2 for |e| <= HUBER_DELTA, else
    HUBER_DELTA (|e| - 0.5 HUBER_DELTA), e = pred - target.
    kind LOSS_BCE (pred is a logit, target a 0/1 label): softplus(x) - y x,
    written max(x, 0) - y x + log1p(exp(-|x|)) so no exp overflows; grad sigmoid(x) - y.
    kind LOSS_MSE (AUX vs the next-horizon mid return): 0.5 e^2.
    Launch [ceil(n / ROW_BLOCK), ROW_BLOCK]. gate[0] == 0: writes nothing.
    """
    if gate[0] == 0:
        return
    b = cuda.grid(1)
    if b >= n:
        return
    loss[b], d_pred[b] = scalar_loss_row(kind, pred[b], target[b], float32(1.0) / float32(n))


@cuda.jit(device=True)
def scalar_loss_row(kind, x, y, inv_n):
    """rl_scalar_loss for one sample: (loss, inv_n d loss / d x) of prediction x against target y."""
    if kind == LOSS_BCE:
        return (max(x, float32(0.0)) - y * x + math.log1p(math.exp(-abs(x))),
                inv_n * (float32(1.0) / (float32(1.0) + math.exp(-x)) - y))
    e = x - y
    if kind == LOSS_HUBER and abs(e) > float32(HUBER_DELTA):
        return float32(HUBER_DELTA) * (abs(e) - float32(0.5 * HUBER_DELTA)), inv_n * math.copysign(
            float32(HUBER_DELTA), e)
    return float32(0.5) * e * e, inv_n * e


@cuda.jit(device=True)
def loss_count(r, n_q, n_b, n_pv):
    """Samples of loss row r (rl_loss_means): n_q for Q, n_pv for pi and V, n_b for BCE and AUX."""
    cnt = n_b
    if r == 0:
        cnt = n_q
    elif r == RL_LOSS_PI - RL_LOSS_Q or r == RL_LOSS_V - RL_LOSS_Q:
        cnt = n_pv
    return cnt


@cuda.jit(device=True)
def loss_mean_block(losses, r, stride, cnt, isv, sh, tid, width):
    """isv[RL_LOSS_Q + r] = mean of losses[r stride : r stride + cnt] by one block of ``width`` threads (a power
    of two; sh: its [width] shared floats), block-stride sums then the tree: a fixed order. Not written
    when cnt == 0. Every thread of the block must call it (rl_loss_means, the fused update)."""
    acc = float32(0.0)
    for i in range(tid, cnt, width):
        acc += losses[r * stride + i]
    sh[tid] = acc
    cuda.syncthreads()
    tree_sum(sh, tid, width)
    if tid == 0 and cnt > 0:
        isv[RL_LOSS_Q + r] = sh[0] / float32(cnt)


@kernel("void(int32[::1], float32[::1], int32, int32, int32, int32, float32[::1])")
def rl_loss_means(gate, losses, stride, n_q, n_b, n_pv, isv):
    """isv[RL_LOSS_Q + r] = mean of losses[r, 0:n_r], r = Q, pi, V, BCE, AUX.

    losses is [N_LOSSES, stride]; row 0 (Q) has n_q = M samples, pi and V n_pv, BCE
    and AUX n_b = B (n_pv = n_b but on a rollout's collect steps, where PPO and V do
    not learn: n_pv = 0 holds their slots). Block r reduces row r in a fixed order
    (deterministic). The Q slot gets the unweighted mean CE (ln 21 = uniform), not the
    importance-weighted loss the gradient follows. A row of no samples is not written.
    Launch [N_LOSSES, REDUCE_BLOCK]. gate[0] == 0: writes nothing.
    """
    if gate[0] == 0:
        return
    sh = cuda.shared.array(REDUCE_BLOCK, float32)
    r = cuda.blockIdx.x
    loss_mean_block(losses, r, stride, loss_count(r, n_q, n_b, n_pv), isv, sh, cuda.threadIdx.x, REDUCE_BLOCK)
