"""The on-policy rollout of ``--rollout T`` env steps and its GAE(lambda) advantages.

With T > 1 the PPO and V updates run every T-th env step on the T x B transitions
of the last T steps instead of every step on the B of that step (Q, BCE and AUX
still learn every step). The rollout buffer holds, per slice t = step mod T, what
they need: s_t [B, obs_dim], a_t, log pi_old(a_t | s_t), r_t, done_t, the BCE and
AUX labels, and V_used(s_t) (the blended value at the parameters that acted).
Slot (t, b) is element t B + b of every [T B] array.

- ``rl_rollout_store``: slice t = step_count mod T <- this step's batch. The slice
  comes from the device step counter, so one captured graph serves every collect
  step. V_used(s_t) is stored on collect steps (the learning update's first
  iteration computed it); on the update step (t = T - 1) ``rl_gae`` writes it.
- ``rl_gae``: on the update step, inside the learning update's first iteration,
  after the V blend: V_used of the last slice and of s_T from that update's
  forward pass (alpha from the ISV), then per column b, backwards over t,
      delta_t = r_t + gamma (1 - done_t) V(s_{t+1}) - V(s_t),
      A_t = delta_t + gamma lambda (1 - done_t) A_{t+1},   A_T = 0,
      return_t = A_t + V(s_t),
  with V(s_{t+1}) = the stored V_used of slice t + 1 (s_{t+1} is the next slice's
  s_t: the simulator resets in place, and done_t cuts the bootstrap where an
  episode ended) and V(s_T) = V_used of the step's s_{t+1}. The PPO advantage is A
  normalised over the whole rollout: (A - mean) / (std + ADV_NORM_EPS), std the
  population standard deviation of the T B values; V regresses on the
  unnormalised return.
- ``rl_rollout_gather`` (``rollout_rows`` caps the rows an update learns from): on
  the update step, before the learning update, the whole trajectories of a subset
  of the backtests into a smaller rollout of the same layout, [T n_sub] (and s_T
  [n_sub, obs_dim]); GAE and PPO / V then run on it alone. The subset is the
  columns (u + stride i) mod B, i < n_sub, with u = step_count // T the rollout's
  index: spread over the whole batch (every file's backtests), disjoint from one
  update to the next, each backtest taken once in ``stride`` updates. The index
  comes from the device step counter, so one captured graph serves every update.
"""
import math

from numba import cuda, float32

from alpharl.cuda_kernels.controllers.v_blend import v_blend_value
from alpharl.cuda_kernels.reductions import tree_sum
from alpharl.cuda_kernels.registry import kernel
from alpharl.isv import RL_GAMMA, RL_V_BLEND_ALPHA

#: Threads per block of rl_rollout_store (one thread per element of s_t).
ROLLOUT_BLOCK = 256
#: Threads of rl_gae's single block (a power of two: tree_sum); thread i owns columns i, i + GAE_BLOCK, ...
GAE_BLOCK = 256
#: Guard of the advantage normalisation's division by the rollout's standard deviation.
ADV_NORM_EPS = 1.0e-8


def gather_grid(n_sub: int, t_len: int, dim: int) -> int:
    """Blocks of rl_rollout_gather for n_sub columns of t_len slices (and s_T) of dim observation columns."""
    return max(1, -(-((t_len + 1) * n_sub * dim) // ROLLOUT_BLOCK))


def store_grid(n_b: int, dim: int) -> int:
    """Blocks of rl_rollout_store for B = n_b rows of dim observation columns."""
    return max(1, -(-(n_b * dim) // ROLLOUT_BLOCK))


@cuda.jit(device=True)
def _copy_transition(i, action, logp, reward, done, label_up, label_ret, o, d_action, d_logp, d_reward, d_done,
                     d_label_up, d_label_ret):
    """Element o of the d_* per-row fields <- element i of theirs (a transition's action, log pi_old, reward,
    done and labels)."""
    d_action[o] = action[i]
    d_logp[o] = logp[i]
    d_reward[o] = reward[i]
    d_done[o] = done[i]
    d_label_up[o] = label_up[i]
    d_label_ret[o] = label_ret[i]


@kernel("void(int64[::1], int32, int32, int32, int32, float32[::1], int32[::1], float32[::1], float32[::1], "
        "float32[::1], float32[::1], float32[::1], float32[::1], float32[::1], int32[::1], float32[::1], "
        "float32[::1], float32[::1], float32[::1], float32[::1], float32[::1])")
def rl_rollout_store(step_count, t_len, n_b, dim, with_v, obs, action, logp, reward, done, label_up, label_ret, v_used,
                     r_obs, r_action, r_logp, r_reward, r_done, r_label_up, r_label_ret, r_v_used):
    """Slice t = step_count[0] mod t_len of the rollout <- this step's batch of n_b rows.

    r_obs [t_len n_b dim] <- obs [n_b dim]; r_action, r_logp, r_reward, r_done, r_label_up,
    r_label_ret [t_len n_b] <- the per-row inputs; r_v_used <- v_used only if with_v != 0.
    Launch [store_grid(n_b, dim), ROLLOUT_BLOCK].
    """
    i = cuda.grid(1)
    t = step_count[0] % t_len   # int64: t n_b dim may pass 2^31 at large B and T
    if i < n_b * dim:
        r_obs[t * n_b * dim + i] = obs[i]
    if i < n_b:
        o = t * n_b + i
        _copy_transition(i, action, logp, reward, done, label_up, label_ret, o, r_action, r_logp, r_reward, r_done,
                         r_label_up, r_label_ret)
        if with_v != 0:
            r_v_used[o] = v_used[i]


@kernel("void(int32[::1], float32[::1], float32[::1], float32[::1], float32[::1], float32[::1], float32[::1], "
        "float32[::1], int32, int32, float32, float32[::1], float32[::1], float32[::1], float32[::1])")
def rl_gae(gate, reward, done, v_used, v_s_last, v_dq_last, v_s_next, v_dq_next, t_len, n_b, lam, isv,
           advantage, ret, ppo_adv):
    """GAE(lambda) over a rollout of t_len slices of n_b columns (see the module docstring).

    Inputs: the rollout's reward, done, v_used [t_len n_b] (slices < t_len - 1 read);
    V_scalar and V_dq of the last slice (v_s_last, v_dq_last [n_b]) and of s_T
    (v_s_next, v_dq_next [n_b]) at the update's parameters; alpha = isv[RL_V_BLEND_ALPHA],
    gamma = isv[RL_GAMMA], lambda = lam. Outputs: v_used's last slice, advantage (A),
    ret (A + V_used) and ppo_adv (A normalised over the rollout), [t_len n_b] each.
    One block: the normalisation needs the rollout's mean and variance, reduced in a
    fixed order (two passes, deterministic). Launch [1, GAE_BLOCK]. gate[0] == 0: writes nothing.
    """
    if gate[0] == 0:
        return
    sh = cuda.shared.array(GAE_BLOCK, float32)
    tid = cuda.threadIdx.x
    alpha = isv[RL_V_BLEND_ALPHA]
    gamma = isv[RL_GAMMA]
    gl = gamma * lam
    last = (t_len - 1) * n_b
    acc = float32(0.0)
    for b in range(tid, n_b, GAE_BLOCK):
        v_next = v_blend_value(alpha, v_s_next[b], v_dq_next[b])
        v_used[last + b] = v_blend_value(alpha, v_s_last[b], v_dq_last[b])
        a = float32(0.0)
        for tt in range(t_len):
            o = (t_len - 1 - tt) * n_b + b
            v = v_used[o]
            nd = float32(1.0) - done[o]
            delta = reward[o] + gamma * nd * v_next - v
            a = delta + gl * nd * a
            advantage[o] = a
            ret[o] = a + v
            acc += a
            v_next = v
    n = float32(t_len * n_b)
    sh[tid] = acc
    cuda.syncthreads()
    tree_sum(sh, tid, GAE_BLOCK)
    mean = sh[0] / n
    cuda.syncthreads()  # every thread has read the sum before sh is reused
    acc = float32(0.0)
    for b in range(tid, n_b, GAE_BLOCK):
        for tt in range(t_len):
            d = advantage[tt * n_b + b] - mean
            acc += d * d
    sh[tid] = acc
    cuda.syncthreads()
    tree_sum(sh, tid, GAE_BLOCK)
    inv = float32(1.0) / (math.sqrt(sh[0] / n) + float32(ADV_NORM_EPS))
    for b in range(tid, n_b, GAE_BLOCK):
        for tt in range(t_len):
            o = tt * n_b + b
            ppo_adv[o] = (advantage[o] - mean) * inv


@kernel("void(int64[::1], int32, int32, int32, int32, int32, float32[::1], int32[::1], float32[::1], float32[::1], "
        "float32[::1], float32[::1], float32[::1], float32[::1], float32[::1], float32[::1], int32[::1], "
        "float32[::1], float32[::1], float32[::1], float32[::1], float32[::1], float32[::1], float32[::1])")
def rl_rollout_gather(step_count, t_len, n_b, stride, n_sub, dim, r_obs, r_action, r_logp, r_reward, r_done,
                      r_label_up, r_label_ret, r_v_used, obs_next, s_obs, s_action, s_logp, s_reward, s_done,
                      s_label_up, s_label_ret, s_v_used, s_obs_next):
    """The trajectories of n_sub of the rollout's n_b columns into the s_* rollout [t_len n_sub] (see the module
    docstring): column i of s_* is column c = (u + stride i) mod n_b of r_*, u = step_count[0] // t_len;
    s_obs_next [n_sub dim] <- row c of obs_next [n_b dim] (s_T). stride n_sub <= n_b keeps the columns distinct.
    Launch [gather_grid(n_sub, t_len, dim), ROLLOUT_BLOCK]: one thread per observation element (slice t or s_T,
    column i, element j); element j = 0 also copies the slice's per-row fields.
    """
    k = cuda.grid(1)
    if k >= (t_len + 1) * n_sub * dim:
        return
    j = k % dim
    i = (k // dim) % n_sub
    t = k // (dim * n_sub)
    c = (step_count[0] // t_len + stride * i) % n_b   # int64: the step counter passes 2^31 in long runs
    if t == t_len:
        s_obs_next[i * dim + j] = obs_next[c * dim + j]
        return
    src = t * n_b + c
    dst = t * n_sub + i
    s_obs[dst * dim + j] = r_obs[src * dim + j]
    if j == 0:
        _copy_transition(src, r_action, r_logp, r_reward, r_done, r_label_up, r_label_ret, dst, s_action, s_logp,
                         s_reward, s_done, s_label_up, s_label_ret)
        s_v_used[dst] = r_v_used[src]
