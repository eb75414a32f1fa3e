"""The ISV (internal state vector): the one registry of named slots.

The ISV is one float32 device array of length ``RL_SLOTS_END``. Controllers
read their signals from it and write their outputs into it; diagnostics name
every column by slot name. This module is the only place slot numbers appear.

Conventions (SPEC §2):

- sentinel 0 means "not yet observed": a controller that reads 0 in its own
  output slot writes the slot's bootstrap value (replace, no blend); an EMA
  that reads 0 takes its first observation as is;
- the seeds' indices are kept so their diagnostics still read: 404 K-loop
  multiplier (K x 2048 fixed point), 413-415 lr_q/lr_pi/lr_v, 424-426 grad-norm
  EMAs of Q/pi/V, 585-587 the V-blend controller.

Every slot carries a group (for dashboards), a bootstrap value (what a fresh
ISV holds after one bootstrap pass), a unit, a documented range and a one-line
description.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

from alpharl.sizes import V_MAX, V_MIN

# ---------------------------------------------------------------- constants
#: K-loop multiplier fixed point: K = round(isv[RL_K_LOOP_MULT] / K_FIXED_POINT).
K_FIXED_POINT = 2048.0
#: Upper bound of the K-loop (learning iterations per env step).
K_MAX = 4
#: Learning-rate controller bounds and bootstrap (seed signal-driven-lr).
LR_BOOTSTRAP = 1.0e-3
LR_MIN = 1.0e-5
LR_MAX = 3.0e-3
#: The discount factor held in the ISV.
GAMMA_BOOTSTRAP = 0.99
#: The C51 support's bootstrap (and its fixed value without --adaptive-support).
V_MIN_BOOTSTRAP = V_MIN
V_MAX_BOOTSTRAP = V_MAX
N_ACTIONS_LN = math.log(9.0)


@dataclass(frozen=True)
class Slot:
    index: int
    name: str
    group: str
    bootstrap: float
    unit: str
    lo: float
    hi: float
    description: str


SLOTS: list[Slot] = []


def _slot(index: int, name: str, group: str, bootstrap: float, unit: str, lo: float, hi: float, description: str) -> int:
    SLOTS.append(Slot(index, name, group, float(bootstrap), unit, float(lo), float(hi), description))
    return index


_INF = math.inf

# ------------------------------------------------------------ discount / PER
RL_GAMMA = _slot(400, "gamma", "returns", GAMMA_BOOTSTRAP, "1", 0.0, 1.0, "discount factor gamma (held; not adapted)")
RL_PER_ALPHA = _slot(401, "per_alpha", "replay", 0.6, "1", 0.2, 1.0, "PER priority exponent alpha (controller: effective-sample-size target)")
RL_PER_BETA = _slot(402, "per_beta", "replay", 0.4, "1", 0.4, 1.0, "PER importance-weight exponent beta (controller: sampling skew)")
RL_PER_ESS_FRAC = _slot(403, "per_ess_frac", "replay", 0.0, "1", 0.0, 1.0, "effective sample size / N of the replay sampling distribution (signal)")
# ------------------------------------------------------------------- K-loop
RL_K_LOOP_MULT = _slot(404, "k_loop_mult", "k_loop", K_FIXED_POINT, "K*2048", K_FIXED_POINT, K_MAX * K_FIXED_POINT, "K-loop multiplier: learning iterations per env step x 2048 (seed index)")
# --------------------------------------------------------------------- PPO
RL_PPO_CLIP_EPS = _slot(405, "ppo_clip_eps", "ppo", 0.2, "1", 0.05, 0.3, "PPO clip epsilon (controller: KL EMA vs KL target)")
RL_PPO_RATIO_CLAMP = _slot(406, "ppo_ratio_clamp", "ppo", 3.0, "1", 1.5, 10.0, "dual-clip ratio bound c (controller: observed ratio tail)")
RL_ENTROPY_COEF = _slot(407, "entropy_coef", "ppo", 0.01, "1", 1.0e-4, 0.1, "entropy bonus coefficient (controller: entropy vs target entropy)")
RL_TARGET_TAU = _slot(408, "target_tau", "target", 0.005, "1", 5.0e-4, 0.01, "target-network soft-update rate tau (controller: TD-error kurtosis)")
RL_KL_EMA = _slot(409, "kl_ema", "signals", 0.0, "nats", 0.0, _INF, "EMA of KL(pi_old || pi_new) per sample")
RL_ENTROPY_EMA = _slot(410, "entropy_ema", "signals", 0.0, "nats", 0.0, N_ACTIONS_LN, "EMA of the policy entropy")
RL_TD_KURTOSIS_EMA = _slot(411, "td_kurtosis_ema", "signals", 0.0, "1", 0.0, _INF, "EMA of the TD-error kurtosis m4/m2^2 (3 = Gaussian)")
RL_ADV_VAR_EMA = _slot(412, "adv_var_ema", "signals", 0.0, "$^2", 0.0, _INF, "EMA of the batch variance of the advantage")
# ----------------------------------------------------------- learning rates
RL_LR_Q = _slot(413, "lr_q", "lr", LR_BOOTSTRAP, "1", LR_MIN, LR_MAX, "Adam learning rate of the dueling Q head (seed index)")
RL_LR_PI = _slot(414, "lr_pi", "lr", LR_BOOTSTRAP, "1", LR_MIN, LR_MAX, "Adam learning rate of the pi head (seed index)")
RL_LR_V = _slot(415, "lr_v", "lr", LR_BOOTSTRAP, "1", LR_MIN, LR_MAX, "Adam learning rate of the value head (seed index)")
RL_LR_BCE = _slot(416, "lr_bce", "lr", LR_BOOTSTRAP, "1", LR_MIN, LR_MAX, "Adam learning rate of the BCE perception head")
RL_LR_AUX = _slot(417, "lr_aux", "lr", LR_BOOTSTRAP, "1", LR_MIN, LR_MAX, "Adam learning rate of the AUX perception head")
RL_LR_ENC = _slot(418, "lr_enc", "lr", LR_BOOTSTRAP, "1", LR_MIN, LR_MAX, "Adam learning rate of the shared encoder")
# ------------------------------------------------------------ more signals
RL_RETURN_VAR_EMA = _slot(419, "return_var_ema", "signals", 0.0, "$^2", 0.0, _INF, "EMA of the batch variance of the return target")
RL_RATIO_TAIL_EMA = _slot(420, "ratio_tail_ema", "signals", 0.0, "1", 0.0, _INF, "EMA of the largest importance ratio pi_new/pi_old in the batch")
RL_REWARD_PER_TRADE_EMA = _slot(421, "reward_per_trade_ema", "signals", 0.0, "$", -_INF, _INF, "EMA of the PnL per closed trade")
RL_DONE_RATE_EMA = _slot(422, "done_rate_ema", "signals", 0.0, "1", 0.0, 1.0, "EMA of the fraction of backtests done this step")
RL_LOSS_RATE_EMA = _slot(423, "loss_rate_ema", "signals", 0.0, "1", 0.0, 1.0, "EMA of the fraction of closed trades with negative PnL")
# ------------------------------------------------------ grad-norm EMAs (seed)
RL_Q_GRAD_NORM_EMA = _slot(424, "q_grad_norm_ema", "grad_norm", 0.0, "1", 0.0, _INF, "EMA of ||grad_w|| of the Q head (seed index)")
RL_PI_GRAD_NORM_EMA = _slot(425, "pi_grad_norm_ema", "grad_norm", 0.0, "1", 0.0, _INF, "EMA of ||grad_w|| of the pi head (seed index)")
RL_V_GRAD_NORM_EMA = _slot(426, "v_grad_norm_ema", "grad_norm", 0.0, "1", 0.0, _INF, "EMA of ||grad_w|| of the value head (seed index)")
RL_BCE_GRAD_NORM_EMA = _slot(427, "bce_grad_norm_ema", "grad_norm", 0.0, "1", 0.0, _INF, "EMA of ||grad_w|| of the BCE head")
RL_AUX_GRAD_NORM_EMA = _slot(428, "aux_grad_norm_ema", "grad_norm", 0.0, "1", 0.0, _INF, "EMA of ||grad_w|| of the AUX head")
RL_ENC_GRAD_NORM_EMA = _slot(429, "enc_grad_norm_ema", "grad_norm", 0.0, "1", 0.0, _INF, "EMA of ||grad_w|| of the encoder")
# ------------------------------------------- raw per-step observations (obs)
RL_OBS_Q_GRAD_NORM = _slot(430, "obs_q_grad_norm", "obs", 0.0, "1", 0.0, _INF, "this step's ||grad_w|| of the Q head (rl_l2_norm)")
RL_OBS_PI_GRAD_NORM = _slot(431, "obs_pi_grad_norm", "obs", 0.0, "1", 0.0, _INF, "this step's ||grad_w|| of the pi head")
RL_OBS_V_GRAD_NORM = _slot(432, "obs_v_grad_norm", "obs", 0.0, "1", 0.0, _INF, "this step's ||grad_w|| of the value head")
RL_OBS_BCE_GRAD_NORM = _slot(433, "obs_bce_grad_norm", "obs", 0.0, "1", 0.0, _INF, "this step's ||grad_w|| of the BCE head")
RL_OBS_AUX_GRAD_NORM = _slot(434, "obs_aux_grad_norm", "obs", 0.0, "1", 0.0, _INF, "this step's ||grad_w|| of the AUX head")
RL_OBS_ENC_GRAD_NORM = _slot(435, "obs_enc_grad_norm", "obs", 0.0, "1", 0.0, _INF, "this step's ||grad_w|| of the encoder")
RL_OBS_ENTROPY = _slot(436, "obs_entropy", "obs", 0.0, "nats", 0.0, N_ACTIONS_LN, "this step's mean policy entropy")
RL_OBS_KL = _slot(437, "obs_kl", "obs", 0.0, "nats", 0.0, _INF, "this step's mean KL(pi_old || pi_new)")
RL_OBS_TD_KURTOSIS = _slot(438, "obs_td_kurtosis", "obs", 0.0, "1", 0.0, _INF, "this step's TD-error kurtosis")
RL_OBS_ADV_VAR = _slot(439, "obs_adv_var", "obs", 0.0, "$^2", 0.0, _INF, "this step's advantage variance")
RL_OBS_RETURN_VAR = _slot(440, "obs_return_var", "obs", 0.0, "$^2", 0.0, _INF, "this step's return variance")
RL_OBS_RATIO_MAX = _slot(441, "obs_ratio_max", "obs", 0.0, "1", 0.0, _INF, "this step's largest importance ratio")
RL_OBS_REWARD_PER_TRADE = _slot(442, "obs_reward_per_trade", "obs", 0.0, "$", -_INF, _INF, "this step's mean PnL of closed trades")
RL_OBS_DONE_RATE = _slot(443, "obs_done_rate", "obs", 0.0, "1", 0.0, 1.0, "this step's fraction of backtests done")
RL_OBS_LOSS_RATE = _slot(444, "obs_loss_rate", "obs", 0.0, "1", 0.0, 1.0, "this step's fraction of closed trades that lost")
RL_OBS_TRADES = _slot(445, "obs_trades", "obs", 0.0, "trades", 0.0, _INF, "this step's number of closed trades")
RL_OBS_KL_FIRST = _slot(446, "obs_kl_first", "obs", 0.0, "nats", 0.0, _INF, "with --pace-policy: the mean KL(pi_old || pi) of the update's first K-loop iteration, before its own policy steps (the drift of the shared encoder since the rollout acted)")
# ------------------------------------------------------ rollout (GAE, --rollout T)
RL_OBS_PPO_SAMPLES = _slot(480, "obs_ppo_samples", "obs", 0.0, "samples", 0.0, _INF, "this step's samples of the PPO/V update (B; T*B on a rollout's update step, T*n_sub with rollout_rows, 0 on its collect steps): gates the PPO signals' EMAs")
RL_OBS_PPO_INFORMED = _slot(481, "obs_ppo_informed", "obs", 0.0, "samples", 0.0, _INF, "this step's PPO samples whose ratio can leave 1: obs_ppo_samples, or 0 with --adaptive-anchors when K = 1 (the batch used once, ratio 1): gates the KL and ratio-tail EMAs and the clip and ratio-bound controllers")
# ----------------------------------------------------------------- losses
RL_LOSS_Q = _slot(450, "loss_q", "losses", 0.0, "nats", 0.0, _INF, "C51 cross-entropy of the Q head (ln 21 = 3.04 is uniform)")
RL_LOSS_PI = _slot(451, "loss_pi", "losses", 0.0, "1", -_INF, _INF, "PPO clipped-surrogate loss incl. entropy bonus")
RL_LOSS_V = _slot(452, "loss_v", "losses", 0.0, "$^2", 0.0, _INF, "value-head regression loss")
RL_LOSS_BCE = _slot(453, "loss_bce", "losses", 0.0, "nats", 0.0, _INF, "BCE perception loss (next mid move up/down)")
RL_LOSS_AUX = _slot(454, "loss_aux", "losses", 0.0, "1", 0.0, _INF, "AUX perception loss (next-horizon mid return)")
# ------------------------------------------------------- non-finite guards
RL_NAN_SKIPS_Q = _slot(460, "nan_skips_q", "guard", 0.0, "count", 0.0, _INF, "updates of the Q head skipped for a non-finite loss/gradient")
RL_NAN_SKIPS_PI = _slot(461, "nan_skips_pi", "guard", 0.0, "count", 0.0, _INF, "updates of the pi head skipped for a non-finite loss/gradient")
RL_NAN_SKIPS_V = _slot(462, "nan_skips_v", "guard", 0.0, "count", 0.0, _INF, "updates of the value head skipped for a non-finite loss/gradient")
RL_NAN_SKIPS_BCE = _slot(463, "nan_skips_bce", "guard", 0.0, "count", 0.0, _INF, "updates of the BCE head skipped for a non-finite loss/gradient")
RL_NAN_SKIPS_AUX = _slot(464, "nan_skips_aux", "guard", 0.0, "count", 0.0, _INF, "updates of the AUX head skipped for a non-finite loss/gradient")
RL_NAN_SKIPS_ENC = _slot(465, "nan_skips_enc", "guard", 0.0, "count", 0.0, _INF, "updates of the encoder skipped for a non-finite gradient")
RL_NAN_SIGNALS = _slot(466, "nan_signals", "guard", 0.0, "count", 0.0, _INF, "non-finite signal observations refused by the signal EMAs")
# ----------------------------------- scale-free signals: reward/return scale, C51 support, anchors
# (written by rl_reward_norm at the start of a step and by the anchor stage of rl_step_controllers;
# with --no-reward-norm, --no-adaptive-support and --no-adaptive-anchors nothing writes them but their
# sentinel bootstraps, and every reader falls back to the fixed value it used before they existed)
RL_REWARD_MEAN_EMA = _slot(530, "reward_mean_ema", "reward_norm", 0.0, "r", -_INF, _INF, "running mean of the scaled reward r = reward x reward_scale (rl_reward_norm)")
RL_REWARD_SQ_EMA = _slot(531, "reward_sq_ema", "reward_norm", 0.0, "r^2", 0.0, _INF, "running mean of r^2")
RL_RETURN_SQ_EMA = _slot(532, "return_sq_ema", "reward_norm", 0.0, "r^2", 0.0, _INF, "running mean of R^2, R the per-backtest discounted return so far (R <- gamma R + r, 0 after done)")
RL_REWARD_NORM_COUNT = _slot(533, "reward_norm_count", "reward_norm", 0.0, "steps", 0.0, _INF, "steps folded into the running means (their average is plain until the EMA horizon, then exponential)")
RL_REWARD_GAIN = _slot(534, "reward_gain", "reward_norm", 1.0, "1/r", 0.0, _INF, "learning units per unit of r: 1 / RMS(R) with --reward-norm, else 1")
RL_SUPPORT_V_MIN = _slot(535, "support_v_min", "reward_norm", V_MIN_BOOTSTRAP, "learn", -_INF, 0.0, "lowest C51 atom z_0 (--adaptive-support: -V_MAX; else fixed)")
RL_SUPPORT_V_MAX = _slot(536, "support_v_max", "reward_norm", V_MAX_BOOTSTRAP, "learn", 0.0, _INF, "highest C51 atom z_20 (--adaptive-support: a multiple of the return RMS, moved at rate tau)")
RL_OBS_Q_REL_UPDATE = _slot(537, "obs_q_rel_update", "obs", 0.0, "1", 0.0, _INF, "this update's ||Adam step of W|| / ||W|| of the Q head (--adaptive-anchors)")
RL_OBS_PI_REL_UPDATE = _slot(538, "obs_pi_rel_update", "obs", 0.0, "1", 0.0, _INF, "this update's relative Adam step of the pi head")
RL_OBS_V_REL_UPDATE = _slot(539, "obs_v_rel_update", "obs", 0.0, "1", 0.0, _INF, "this update's relative Adam step of the value head")
RL_OBS_BCE_REL_UPDATE = _slot(540, "obs_bce_rel_update", "obs", 0.0, "1", 0.0, _INF, "this update's relative Adam step of the BCE head")
RL_OBS_AUX_REL_UPDATE = _slot(541, "obs_aux_rel_update", "obs", 0.0, "1", 0.0, _INF, "this update's relative Adam step of the AUX head")
RL_OBS_ENC_REL_UPDATE = _slot(542, "obs_enc_rel_update", "obs", 0.0, "1", 0.0, _INF, "this update's relative Adam step of the encoder")
RL_GN_TARGET_Q = _slot(543, "gn_target_q", "anchors", 0.0, "1", 0.0, _INF, "grad-norm target of lr_q's law (0: the fixed TARGET_GRAD_NORM)")
RL_GN_TARGET_PI = _slot(544, "gn_target_pi", "anchors", 0.0, "1", 0.0, _INF, "grad-norm target of lr_pi's law (0: fixed)")
RL_GN_TARGET_V = _slot(545, "gn_target_v", "anchors", 0.0, "1", 0.0, _INF, "grad-norm target of lr_v's law (0: fixed)")
RL_GN_TARGET_BCE = _slot(546, "gn_target_bce", "anchors", 0.0, "1", 0.0, _INF, "grad-norm target of lr_bce's law (0: fixed)")
RL_GN_TARGET_AUX = _slot(547, "gn_target_aux", "anchors", 0.0, "1", 0.0, _INF, "grad-norm target of lr_aux's law (0: fixed)")
RL_GN_TARGET_ENC = _slot(548, "gn_target_enc", "anchors", 0.0, "1", 0.0, _INF, "grad-norm target of lr_enc's law (0: fixed)")
RL_KL_TARGET = _slot(549, "kl_target", "anchors", 0.0, "nats", 0.0, _INF, "KL target of the PPO clip controller (0: the fixed KL_TARGET)")
RL_ENTROPY_TARGET = _slot(550, "entropy_target", "anchors", 0.0, "nats", 0.0, N_ACTIONS_LN, "target entropy of the entropy-coefficient controller (0: the fixed ENTROPY_TARGET)")
RL_K_RATIO_FLOOR = _slot(551, "k_ratio_floor", "anchors", 0.0, "1", 0.0, 1.0, "best var(A)/var(return) seen (a slowly forgetting minimum): the K controller's thresholds sit above it (0: none)")
RL_PI_REL_TARGET = _slot(552, "pi_rel_target", "anchors", 0.0, "1", 0.0, _INF, "relative Adam step the pi head's LR aims at with --pace-policy: paced by the KL this update's own steps add (obs_kl - obs_kl_first) against kl_target (0: the shared 1e-3)")
RL_CLIP_EPS_ANCHOR = _slot(553, "clip_eps_anchor", "anchors", 0.0, "1", 0.0, _INF, "PPO clip epsilon with --pace-policy: 2 sqrt(2 kl_target), twice the ratio spread of a policy moving kl_target (0: the clip's KL law)")
RL_K_RATIO_MEAN = _slot(554, "k_ratio_mean", "anchors", 0.0, "1", 0.0, 1.0, "--k-noise-band: running mean of var(A)/var(return) over the floor's memory (rate K_FLOOR_LEAK a PPO/V update; 0: none)")
RL_K_RATIO_VAR = _slot(555, "k_ratio_var", "anchors", 0.0, "1", 0.0, 1.0, "--k-noise-band: running variance of that ratio about its mean, same rate: K steps up only above mean + K_NOISE_Z sqrt(var) (0: none)")
# ------------------------------------------------------------- V blend (seed)
RL_V_BLEND_ALPHA = _slot(585, "v_blend_alpha", "v_blend", 1.0, "1", 0.0, 1.0, "alpha of V_used = alpha V_scalar + (1-alpha) V_dq (seed index)")
RL_V_TRACK_ERR_EMA = _slot(586, "v_track_err_ema", "v_blend", 0.0, "$", 0.0, _INF, "EMA of |V_dq - V_scalar| (seed index)")
RL_V_SCALAR_MAG_EMA = _slot(587, "v_scalar_mag_ema", "v_blend", 0.0, "$", 0.0, _INF, "EMA of |V_scalar|, the dead-signal floor (seed index)")

RL_SLOTS_END = 588

#: Each head's raw grad-norm slot sits at a fixed offset from its EMA slot, so
#: the LR controller (which takes the EMA slots as arguments, per the seed) finds
#: this step's raw observation for its Wiener weight.
GRAD_NORM_OBS_OFFSET = RL_OBS_Q_GRAD_NORM - RL_Q_GRAD_NORM_EMA
#: Learning-rate slots in head order (Q, pi, V, BCE, AUX, encoder): contiguous.
LR_SLOTS = (RL_LR_Q, RL_LR_PI, RL_LR_V, RL_LR_BCE, RL_LR_AUX, RL_LR_ENC)
#: Each head's relative-update slot sits at a fixed offset from its raw grad-norm slot (head order).
REL_UPDATE_OBS_OFFSET = RL_OBS_Q_REL_UPDATE - RL_OBS_Q_GRAD_NORM
#: Each head's grad-norm target slot sits at a fixed offset from its grad-norm EMA slot (head order).
GN_TARGET_OFFSET = RL_GN_TARGET_Q - RL_Q_GRAD_NORM_EMA
#: Grad-norm EMA slots in the same head order.
GRAD_NORM_EMA_SLOTS = (RL_Q_GRAD_NORM_EMA, RL_PI_GRAD_NORM_EMA, RL_V_GRAD_NORM_EMA,
                       RL_BCE_GRAD_NORM_EMA, RL_AUX_GRAD_NORM_EMA, RL_ENC_GRAD_NORM_EMA)

# ------------------------------------------------------------------ lookups
BY_NAME: dict[str, Slot] = {s.name: s for s in SLOTS}
BY_INDEX: dict[int, Slot] = {s.index: s for s in SLOTS}
GROUPS: tuple[str, ...] = tuple(dict.fromkeys(s.group for s in SLOTS))


def _check_registry() -> None:
    if len(BY_NAME) != len(SLOTS) or len(BY_INDEX) != len(SLOTS):
        raise AssertionError("ISV slot names and indices must be unique")
    for s in SLOTS:
        if not 0 <= s.index < RL_SLOTS_END:
            raise AssertionError(f"slot {s.name} index {s.index} outside [0, RL_SLOTS_END)")
        if not s.lo <= s.bootstrap <= s.hi:
            raise AssertionError(f"slot {s.name} bootstrap {s.bootstrap} outside its range")
    for ema in GRAD_NORM_EMA_SLOTS:
        if BY_INDEX[ema + GRAD_NORM_OBS_OFFSET].group != "obs":
            raise AssertionError(f"slot {BY_INDEX[ema].name}: no raw grad-norm slot at the fixed offset")
    for ema in GRAD_NORM_EMA_SLOTS:
        if not BY_INDEX[ema + GRAD_NORM_OBS_OFFSET + REL_UPDATE_OBS_OFFSET].name.endswith("_rel_update"):
            raise AssertionError(f"slot {BY_INDEX[ema].name}: no relative-update slot at the fixed offset")
        if not BY_INDEX[ema + GN_TARGET_OFFSET].name.startswith("gn_target_"):
            raise AssertionError(f"slot {BY_INDEX[ema].name}: no grad-norm target slot at the fixed offset")
    if list(LR_SLOTS) != list(range(RL_LR_Q, RL_LR_Q + len(LR_SLOTS))):
        raise AssertionError("learning-rate slots must be contiguous in head order")


_check_registry()


def bootstrap_vector():
    """A host float32 ISV holding every slot's bootstrap value (0 elsewhere)."""
    import numpy as np

    v = np.zeros(RL_SLOTS_END, dtype=np.float32)
    for s in SLOTS:
        v[s.index] = s.bootstrap
    return v


def sentinel_vector():
    """A fresh ISV: all sentinel 0 ("not yet observed")."""
    import numpy as np

    return np.zeros(RL_SLOTS_END, dtype=np.float32)


def alloc_isv(stream=0, bootstrap: bool = True):
    """Allocate the device ISV (length RL_SLOTS_END) with every slot at its
    bootstrap value, or all sentinel 0 with ``bootstrap=False``."""
    from numba import cuda

    host = bootstrap_vector() if bootstrap else sentinel_vector()
    return cuda.to_device(host, stream=stream)


def slots_matching(pattern: str) -> list[Slot]:
    """Slots whose name matches a shell-style pattern (``lr_*``) or a group name."""
    import fnmatch

    return [s for s in SLOTS if fnmatch.fnmatchcase(s.name, pattern) or s.group == pattern]


def decode_k(isv) -> int:
    """K, the learning iterations per env step, from a host ISV (``k_of_mult`` of isv[404])."""
    return k_of_mult(isv[RL_K_LOOP_MULT])


def k_of_mult(mult) -> int:
    """K from the K-loop multiplier (isv[404], e.g. a diagnostics column's value):
    clamp(round(mult / 2048), 1, K_MAX).

    The division is float32, as on the device (``rl_k_gate``), so host and device agree on every value."""
    import numpy as np

    k = round(float(np.float32(mult) / np.float32(K_FIXED_POINT)))
    return int(min(max(k, 1), K_MAX))
