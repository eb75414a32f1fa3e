"""Anchors of the controllers from observed, scale-free signals (--adaptive-anchors):
``rl_anchor_controller``, run inside ``rl_step_controllers`` between the signal EMAs and the controllers.

A controller whose signal does not respond to its output ends on a clamp whenever its fixed anchor
differs from where the signal happens to sit (benchmarks/results/LEARNING.md). Each anchor below is
written into an ISV slot; a slot at 0 (the anchors off, or not yet observed) makes its controller use
the fixed constant it used before, so with the switch off every controller is unchanged bit for bit.
The controllers' laws stay as they are: only the value each aims at changes.

- LR (seed law, unchanged): target = lr x T / G with G the head's grad-norm EMA. Under Adam the step a
  head takes is lr u, u = m_hat / (sqrt(v_hat) + eps), whatever the gradient's size: G does not
  respond to lr, so a fixed T = 1 drives lr to a clamp (G ~ 0.1-0.4 -> LR_MAX, the BCE head's G > 1 ->
  LR_MIN). Anchor: T_h = G_h rho* / rho_h, rho_h = lr_h ||u_h|| / ||W_h|| the head's relative update
  of the last Adam step (``rl_grad_guard``), rho* = REL_UPDATE_TARGET. The law's ratio T / G becomes
  rho* / rho_h, and since rho_h is proportional to lr_h the law has the fixed point rho_h = rho*:
  lr_h* = rho* ||W_h|| / ||u_h||, reached geometrically (lr' = (1 - w) lr + w lr*, w >= 0.4).
  rho* = 1e-3: a step that changes a weight matrix by a thousandth of its norm, the common rule of
  thumb for the update-to-weight ratio; dimensionless, the same for every head and market.
- KL target of the PPO clip: KL* = KL_PER_NAT x H, H the policy's entropy EMA, KL_PER_NAT =
  KL_TARGET / ENTROPY_TARGET (today's pair, 0.01 nats at half of ln 9, kept as a ratio): a trust
  region relative to the policy's spread (a policy with little entropy flips its choice with a small
  KL; a broad one can move further). With K = 1 the batch is used once and its ratio is 1: the clip
  acts on nothing and the KL says nothing about it, so those steps neither fold into the KL EMA nor
  step the clip (``rl_ppo_informed``: RL_OBS_PPO_INFORMED = 0 on them).
- Entropy target: H* = the entropy of a policy that gives each of the N_ACTIONS - 1 non-greedy
  actions probability p = tau (the target network's rate, isv[RL_TARGET_TAU]):
  H* = -(1 - (N-1) p) ln(1 - (N-1) p) - (N-1) p ln p. A backtest then still tries every action about
  once per target-network time constant 1 / tau, so the C51 critic's targets keep covering every
  action; tau = 0.005 gives 0.25 nats.
- K's advantage-variance ratio: the controller compares var(A) / var(return) with 0.5 and 0.1, levels
  the ratio may never reach: how much of the one-step target's variance a baseline can explain depends
  on how predictable the market's rewards are (one-step TD on a fill-driven reward stays near 1 with any
  baseline), so K sat on K_MAX. Anchor: the best fit the baseline has shown, f = a running minimum of
  the ratio that forgets at K_FLOOR_LEAK per PPO/V update (f <- min(ratio, f + leak (ratio - f))), into
  RL_K_RATIO_FLOOR; the K controller's thresholds become f + 0.5 (1 - f) and f + 0.1 (1 - f): more
  updates when the baseline has fallen behind the fit it reached (more than half-way from f to 1),
  fewer when it is within a tenth of it. Both sides are ratios capped at 1, so where the baseline has
  explained nothing lately (f = 1) the band closes at 1 and K holds.
- K's band and the ratio's scatter (--k-noise-band, FLAG_K_NOISE, with the anchors). f is a minimum, so
  it sits at the ratio's deepest dips: where the ratio's own scatter is not small against 1 - f (B = 16: a
  ratio of 0.93-0.99 with dips to 0.90, LEARNING.md) the ratio is above f + 0.5 (1 - f) most of the time
  with no change of the baseline's fit, and K walks to K_MAX on noise. Measured: the ratio's running mean
  m and variance s^2 about it (RL_K_RATIO_MEAN, RL_K_RATIO_VAR; rate a = K_FLOOR_LEAK, the floor's memory,
  so s is the scatter the floor's dips come from: m <- m + a d, s^2 <- (1 - a)(s^2 + a d^2), d = ratio -
  m); the K controller's upper threshold becomes max(f + 0.5 (1 - f), m + k_loop.K_NOISE_Z s): more
  iterations only where the fit is also worse than its usual level beyond the scatter. s builds up from 0
  over the floor's memory, so early in a run the band is as before; where the scatter is small (a large
  batch) m + K_NOISE_Z s stays below the band's edge and the rule is the band's.
- The policy head's step and the clip (--pace-policy, FLAG_PACE, with the anchors). With the shared
  rho* = 1e-3 a PPO update moved the policy a fifth of the KL the clip's anchor KL* asks for, and the clip
  controller, whose KL did not answer epsilon, walked it to its upper bound (LEARNING.md). Paced, the KL is
  the policy step's signal and the clip follows the trust region:
  rho*_pi (RL_PI_REL_TARGET, the pi head's relative-update target in place of rho*) <- rho*_pi
  (KL* / dKL)^PACE_GAIN on every PPO update whose own steps moved the policy: dKL = obs_kl - obs_kl_first,
  the last K-loop iteration's KL less the first's (alpharl.signals.KL_FIRST). The first iteration's KL is
  the drift since the rollout acted (the shared encoder moves under Q / BCE / AUX on every collect step;
  a sharp policy turns that into a KL the pi head's step cannot answer), so only the difference is the
  update's own; with K = 1 it is 0 and rho*_pi holds. Per update, not its EMA: the EMA's ~100-update lag
  would turn the loop into an oscillation. In logs, log rho*_pi moves by PACE_GAIN (log KL* - log dKL),
  so it settles where the median update adds KL* (dKL ~ rho^2 for small steps: the loop gain per update is
  2 PACE_GAIN), within [PI_REL_MIN, PI_REL_MAX]. Bootstrap: rho*.
  RL_CLIP_EPS_ANCHOR = CLIP_RMS_MULT sqrt(2 KL*): for a small policy change E[(r - 1)^2] ~ 2 KL, so a
  policy moving KL* per update has ratios spread sqrt(2 KL*) about 1, and the clip cuts the samples that
  move more than CLIP_RMS_MULT times that: a guard against outliers, moving with the entropy. The clip
  controller takes it where positive (its KL law otherwise): with the step on the KL, a second
  integrator on the same signal would only fight it.

Bootstraps (always, also with the anchors off): the reward gain (1) and the support (+-10) on sentinel 0.
Launch [1, 1] (the unit kernel); the fused step runs it on thread 0.
"""
import math

from numba import float32, int32

from alpharl.cuda_kernels.controllers.common import adv_var_ratio, clampf, finite, observed, ppo_informed
from alpharl.cuda_kernels.controllers.k_loop import k_of
from alpharl.cuda_kernels.controllers.ppo import ENTROPY_TARGET, KL_TARGET
from alpharl.cuda_kernels.controllers.target_tau import TAU_BOOTSTRAP
from alpharl.cuda_kernels.registry import kernel
from alpharl.isv import (GN_TARGET_OFFSET, GRAD_NORM_EMA_SLOTS, GRAD_NORM_OBS_OFFSET, LR_SLOTS, REL_UPDATE_OBS_OFFSET,
                         RL_CLIP_EPS_ANCHOR, RL_ENTROPY_EMA, RL_ENTROPY_TARGET, RL_K_RATIO_FLOOR, RL_K_RATIO_MEAN,
                         RL_K_RATIO_VAR,
                         RL_KL_TARGET, RL_LR_PI, RL_OBS_KL, RL_OBS_KL_FIRST, RL_OBS_PPO_INFORMED, RL_OBS_PPO_SAMPLES,
                         RL_PI_REL_TARGET, RL_Q_GRAD_NORM_EMA, RL_REWARD_GAIN, RL_SUPPORT_V_MAX,
                         RL_SUPPORT_V_MIN, RL_TARGET_TAU, V_MAX_BOOTSTRAP, V_MIN_BOOTSTRAP)
from alpharl.sizes import N_ACTIONS

#: ``flags`` bits of rl_step_controllers / rl_anchor_controller: --adaptive-anchors, --pace-policy (acts only
#: with FLAG_ANCHORS: it moves one of the anchors' targets).
FLAG_ANCHORS = 1
FLAG_PACE = 2
#: --k-noise-band (acts only with FLAG_ANCHORS): the ratio's running mean and variance for K's upper threshold.
FLAG_K_NOISE = 4
#: rho*: the relative update ||lr u|| / ||W|| every head's learning rate aims at.
REL_UPDATE_TARGET = 1.0e-3
#: KL target per nat of policy entropy (today's KL_TARGET at today's ENTROPY_TARGET).
KL_PER_NAT = KL_TARGET / ENTROPY_TARGET
#: Per-step rate at which K's floor (the best advantage-variance ratio seen) forgets: ~1000 steps,
#: ten times the horizon of the variance EMAs it is taken from.
K_FLOOR_LEAK = 1.0e-3
#: Heads of the LR controller, and the offset from a head's EMA slot to its relative-update slot.
N_HEADS = len(LR_SLOTS)
PI_HEAD = LR_SLOTS.index(RL_LR_PI)
#: --pace-policy: exponent of rho*_pi <- rho*_pi (KL* / dKL)^PACE_GAIN per informed PPO update (a KL twice
#: the anchor shrinks the step 3.5 %; the loop's gain 2 x 0.05 averages a noisy KL over ~10 updates);
#: rho*_pi's range, a tenth to ten times rho*; the clip's multiple of the paced ratio spread sqrt(2 KL*).
PACE_GAIN = 0.05
CLIP_RMS_MULT = 2.0
PI_REL_MIN = REL_UPDATE_TARGET / 10.0
PI_REL_MAX = REL_UPDATE_TARGET * 10.0
REL_FROM_EMA = GRAD_NORM_OBS_OFFSET + REL_UPDATE_OBS_OFFSET
assert list(GRAD_NORM_EMA_SLOTS) == list(range(RL_Q_GRAD_NORM_EMA, RL_Q_GRAD_NORM_EMA + N_HEADS))


def entropy_with_floor(p: float, n_actions: int = N_ACTIONS) -> float:
    """Host twin of the entropy target's formula: a greedy action and n_actions - 1 others at p each."""
    q = 1.0 - (n_actions - 1) * p
    return -q * math.log(q) - (n_actions - 1) * p * math.log(p)


@kernel("void(float32[::1], int32)", test_only=True)
def rl_ppo_informed(isv, flags):
    """isv[RL_OBS_PPO_INFORMED]: this step's PPO samples whose importance ratio can leave 1; runs before the
    signal EMAs, which fold the KL and the ratio tail only where it is positive.

    With K = 1 the PPO batch is used once, by the weights that acted on it: every ratio is 1, the KL 0.
    Folded, those zeros pull the KL EMA toward 0 on every K = 1 step, so after a stretch of them the clip
    controller reads a KL far below its target that says nothing about the clip, and walks epsilon to its
    upper bound (LEARNING.md: at a bound in 88-99 % of the rows). With FLAG_ANCHORS the samples count only
    when K > 1; without it, the count is RL_OBS_PPO_SAMPLES (every controller unchanged). Launch [1, 1]."""
    n = isv[RL_OBS_PPO_SAMPLES]
    if (flags & FLAG_ANCHORS) != 0 and k_of(isv) == int32(1):
        n = float32(0.0)
    isv[RL_OBS_PPO_INFORMED] = n


@kernel("void(float32[::1], int32)", test_only=True)
def rl_anchor_controller(isv, flags):
    """Bootstrap the gain and the support on sentinel; with FLAG_ANCHORS write every anchor slot
    (module docstring): gn_target_* (hold while rho or G is unobserved), kl_target, pi_rel_target and
    clip_eps_anchor (FLAG_PACE), entropy_target, k_ratio_floor, k_ratio_mean and k_ratio_var (FLAG_K_NOISE;
    each holds while its inputs are unobserved; the floor and the mean take their first ratio as is).
    Launch [1, 1]."""
    if not (isv[RL_REWARD_GAIN] > float32(0.0)):
        isv[RL_REWARD_GAIN] = float32(1.0)
    if not (isv[RL_SUPPORT_V_MAX] > float32(0.0)):
        isv[RL_SUPPORT_V_MAX] = float32(V_MAX_BOOTSTRAP)
        isv[RL_SUPPORT_V_MIN] = float32(V_MIN_BOOTSTRAP)
    if (flags & FLAG_ANCHORS) == 0:
        return
    h_ema = isv[RL_ENTROPY_EMA]
    if observed(h_ema) and h_ema > float32(0.0):
        isv[RL_KL_TARGET] = float32(KL_PER_NAT) * h_ema
    rho_pi = float32(REL_UPDATE_TARGET)
    if (flags & FLAG_PACE) != 0:
        kl_star = isv[RL_KL_TARGET]
        rho_pi = isv[RL_PI_REL_TARGET]
        kl = isv[RL_OBS_KL] - isv[RL_OBS_KL_FIRST]
        if not (rho_pi > float32(0.0)) or not finite(rho_pi):
            rho_pi = float32(REL_UPDATE_TARGET)
        elif ppo_informed(isv) and observed(kl) and kl > float32(0.0) and kl_star > float32(0.0):
            rho_pi = rho_pi * math.exp(float32(PACE_GAIN) * math.log(kl_star / kl))
        rho_pi = clampf(rho_pi, float32(PI_REL_MIN), float32(PI_REL_MAX))
        isv[RL_PI_REL_TARGET] = rho_pi
        if kl_star > float32(0.0):
            isv[RL_CLIP_EPS_ANCHOR] = float32(CLIP_RMS_MULT) * math.sqrt(float32(2.0) * kl_star)
    for h in range(N_HEADS):
        ema = isv[RL_Q_GRAD_NORM_EMA + h]
        rho = isv[RL_Q_GRAD_NORM_EMA + h + REL_FROM_EMA]
        target = float32(REL_UPDATE_TARGET)
        if h == PI_HEAD:
            target = rho_pi
        if observed(ema) and ema > float32(0.0) and observed(rho) and rho > float32(0.0):
            isv[RL_Q_GRAD_NORM_EMA + h + GN_TARGET_OFFSET] = ema * target / rho
    tau = isv[RL_TARGET_TAU]
    if not (tau > float32(0.0)) or not finite(tau):
        tau = float32(TAU_BOOTSTRAP)
    p = min(tau, float32(0.5 / (N_ACTIONS - 1)))
    q = float32(1.0) - float32(N_ACTIONS - 1) * p
    isv[RL_ENTROPY_TARGET] = -q * math.log(q) - float32(N_ACTIONS - 1) * p * math.log(p)
    ratio = adv_var_ratio(isv)
    if ratio > float32(0.0):
        if (flags & FLAG_K_NOISE) != 0:
            m = isv[RL_K_RATIO_MEAN]
            if m > float32(0.0):
                d = ratio - m
                isv[RL_K_RATIO_MEAN] = m + float32(K_FLOOR_LEAK) * d
                isv[RL_K_RATIO_VAR] = float32(1.0 - K_FLOOR_LEAK) * (isv[RL_K_RATIO_VAR] + float32(K_FLOOR_LEAK) * d * d)
            else:
                isv[RL_K_RATIO_MEAN] = ratio
        f = isv[RL_K_RATIO_FLOOR]
        if f > float32(0.0):
            ratio = min(ratio, f + float32(K_FLOOR_LEAK) * (ratio - f))
        isv[RL_K_RATIO_FLOOR] = ratio
