"""One-step advantage and return on the blended baseline V_used (seed phase-4.4),
and the learning update's whole per-env-row tail in one launch.

``rl_env_rows`` runs, per env row, what would otherwise be seven launches in
sequence: the V blend at t and at t+1 (``v_blend_value``, alpha from the ISV
once ``rl_v_blend_alpha_controller`` has run), the advantage and return
(``advantage_return``), PPO (``ppo_row``) and the three scalar losses
(``scalar_loss_row``: Huber V to the return, BCE, MSE AUX). Every step only
reads its own row: PPO uses the raw one-step advantage (no batch statistic of
it), so nothing in between needs the whole batch.

Modes (``--rollout T``; the step's phase, known on the host when the step is
launched or captured):

- ENV_ONE_STEP (T = 1): as above, every step.
- ENV_COLLECT (T > 1, a step that only collects): V_used at t and t+1, BCE and
  AUX as above; PPO and V do not learn: d_pi and dv are 0 (so the encoder gets
  no gradient from them), and their losses, entropy, KL, ratio, advantage and
  return are not written.
- ENV_GAE (T > 1, every T-th step, the env rows are the rollout's T B rows):
  PPO on the rollout-normalised GAE advantage ``ppo_adv`` and V to the GAE
  return ``ret``, both written by ``rl_gae`` (cuda_kernels/nets/rollout.py);
  advantage and ret are inputs here, not written.
"""
from numba import cuda, float32

from alpharl.cuda_kernels.controllers.v_blend import v_blend_value
from alpharl.cuda_kernels.nets.losses import LOSS_BCE, LOSS_HUBER, LOSS_MSE, ppo_row, scalar_loss_row
from alpharl.cuda_kernels.registry import kernel
from alpharl.isv import RL_GAMMA, RL_LOSS_AUX, RL_LOSS_BCE, RL_LOSS_PI, RL_LOSS_Q, RL_LOSS_V, RL_V_BLEND_ALPHA
from alpharl.sizes import N_ACTIONS

#: Threads per block of rl_env_rows (one thread per env row).
ENV_ROWS_BLOCK = 128
#: rl_env_rows' modes (the step's phases: see the module docstring).
ENV_ONE_STEP = 0
ENV_COLLECT = 1
ENV_GAE = 2
#: Rows of the per-sample loss buffer ([N_LOSSES, stride], rl_loss_means' input) rl_env_rows writes:
#: the ISV loss slots' order.
LOSS_ROW_PI = RL_LOSS_PI - RL_LOSS_Q
LOSS_ROW_V = RL_LOSS_V - RL_LOSS_Q
LOSS_ROW_BCE = RL_LOSS_BCE - RL_LOSS_Q
LOSS_ROW_AUX = RL_LOSS_AUX - RL_LOSS_Q


@cuda.jit(device=True)
def advantage_return(reward, done, v_used, v_used_tp1, gamma):
    """(A, return) of one sample: A = r + gamma (1 - done) V_used(s') - V_used(s), return = A + V_used(s)."""
    a = reward + gamma * (float32(1.0) - done) * v_used_tp1 - v_used
    return a, a + v_used


@kernel("void(int32[::1], float32[::1], float32[::1], float32[::1], float32[::1], int32, float32[::1], "
        "float32[::1], float32[::1])", test_only=True)
def rl_compute_advantage_return(gate, reward, done, v_used, v_used_tp1, n, isv, advantage, ret):
    """A = r + gamma (1 - done) V_used(s') - V_used(s); return = A + V_used(s); gamma = isv[RL_GAMMA].

    Streaming 1-step mode (SPEC §1 step 9); with --rollout T > 1 ``rl_gae``
    (cuda_kernels/nets/rollout.py) replaces it with GAE(lambda) over the rollout.
    Launch [ceil(n / ELEMWISE_BLOCK), ELEMWISE_BLOCK]. gate[0] == 0: writes nothing.
    """
    if gate[0] == 0:
        return
    b = cuda.grid(1)
    if b < n:
        advantage[b], ret[b] = advantage_return(reward[b], done[b], v_used[b], v_used_tp1[b], isv[RL_GAMMA])


@cuda.jit(device=True)
def env_row(b, mode, v_s, v_dq, v_s_tp1, v_dq_tp1, reward, done, pi_logits, actions, logp_old, ppo_adv, bce_out,
            label_up, aux_out, label_ret, n, n_next, isv, stride, v_used, v_used_tp1, advantage, ret, d_pi, entropy,
            kl, ratio, dv, dbce, daux, losses):
    """``rl_env_rows`` for env row b < n (its arguments; the fused small-batch update runs the same rows)."""
    alpha = isv[RL_V_BLEND_ALPHA]
    vu = v_blend_value(alpha, v_s[b], v_dq[b])
    v_used[b] = vu
    vu1 = float32(0.0)
    if b < n_next:
        vu1 = v_blend_value(alpha, v_s_tp1[b], v_dq_tp1[b])
        v_used_tp1[b] = vu1
    inv_n = float32(1.0) / float32(n)
    if mode == ENV_COLLECT:
        for j in range(N_ACTIONS):
            d_pi[b * N_ACTIONS + j] = float32(0.0)
        dv[b] = float32(0.0)
    else:
        if mode == ENV_GAE:
            a = ppo_adv[b]
            r = ret[b]
        else:
            a, r = advantage_return(reward[b], done[b], vu, vu1, isv[RL_GAMMA])
            advantage[b] = a
            ret[b] = r
        lp, ent, k3, rt = ppo_row(pi_logits, b * N_ACTIONS, actions[b], logp_old[b], a, isv, inv_n, d_pi)
        losses[LOSS_ROW_PI * stride + b] = lp
        entropy[b] = ent
        kl[b] = k3
        ratio[b] = rt
        losses[LOSS_ROW_V * stride + b], dv[b] = scalar_loss_row(LOSS_HUBER, v_s[b], r, inv_n)
    losses[LOSS_ROW_BCE * stride + b], dbce[b] = scalar_loss_row(LOSS_BCE, bce_out[b], label_up[b], inv_n)
    losses[LOSS_ROW_AUX * stride + b], daux[b] = scalar_loss_row(LOSS_MSE, aux_out[b], label_ret[b], inv_n)


@kernel("void(int32[::1], int32, float32[::1], float32[::1], float32[::1], float32[::1], float32[::1], "
        "float32[::1], float32[::1], int32[::1], float32[::1], float32[::1], float32[::1], float32[::1], "
        "float32[::1], float32[::1], int32, int32, float32[::1], int32, float32[::1], float32[::1], float32[::1], "
        "float32[::1], float32[::1], float32[::1], float32[::1], float32[::1], float32[::1], float32[::1], "
        "float32[::1], float32[::1])")
def rl_env_rows(gate, mode, v_s, v_dq, v_s_tp1, v_dq_tp1, reward, done, pi_logits, actions, logp_old, ppo_adv,
                bce_out, label_up, aux_out, label_ret, n, n_next, isv, stride, v_used, v_used_tp1, advantage, ret,
                d_pi, entropy, kl, ratio, dv, dbce, daux, losses):
    """The per-env-row tail of the learning update for rows b < n, in ``mode`` (see the module docstring).

    Inputs at t: V_scalar v_s, V_dq v_dq, pi_logits [n, N_ACTIONS], bce_out, aux_out;
    at t+1 (rows b < n_next): v_s_tp1, v_dq_tp1; the env batch's reward, done, actions,
    logp_old, label_up, label_ret; ENV_GAE: ppo_adv and ret; alpha = isv[RL_V_BLEND_ALPHA],
    gamma = isv[RL_GAMMA] and the PPO slots. Outputs: v_used, v_used_tp1 (b < n_next),
    advantage, ret (ENV_ONE_STEP); PPO's d_pi [n, N_ACTIONS], entropy, kl, ratio; dv (Huber
    of V_scalar to the return), dbce, daux (each d(mean loss)/d(head output)); losses[LOSS_ROW_*
    stride + b] the per-sample losses. ENV_ONE_STEP is the same maths, in the same order, as
    rl_v_blend x2, rl_compute_advantage_return, rl_ppo_loss and rl_scalar_loss x3.
    Launch [ceil(n / ENV_ROWS_BLOCK), ENV_ROWS_BLOCK]. gate[0] == 0: writes nothing.
    """
    if gate[0] == 0:
        return
    b = cuda.grid(1)
    if b < n:
        env_row(b, mode, v_s, v_dq, v_s_tp1, v_dq_tp1, reward, done, pi_logits, actions, logp_old, ppo_adv, bce_out,
                label_up, aux_out, label_ret, n, n_next, isv, stride, v_used, v_used_tp1, advantage, ret, d_pi, entropy,
                kl, ratio, dv, dbce, daux, losses)
