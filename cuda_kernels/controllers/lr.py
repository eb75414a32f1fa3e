"""Signal-driven learning rates (seed signal-driven-lr): ``rl_lr_controller``.

Per head: observed = EMA ||grad_w||_2 read from the head's signal slot;
target = lr_prev x TARGET_GRAD_NORM / max(observed, eps) (multiplicative: a
thrashing head gets a calmer LR, a coasting one a bolder LR); Wiener-style blend
lr = w target + (1 - w) lr_prev with w = max(0.4, S / (S + N)), S = EMA^2 the
smoothed signal power and N = (raw - EMA)^2 this step's deviation from it (a
noisy observation moves the LR less); clamp [LR_MIN, LR_MAX].
Cold start: lr_prev at sentinel 0 -> LR_BOOTSTRAP; on the first observation the
EMA equals the raw value, N = 0, w = 1: the target replaces lr directly.
Signal slot -1: no signal for that head -> LR_BOOTSTRAP. Unobserved (0) or
non-finite signal: hold lr. The heads only the PPO/V update trains (pi, V: PPO_LR_SLOTS) hold on a
step without that update (a collect step of --rollout T > 1), so their rule steps once per update.
TARGET_GRAD_NORM is the head's isv[gn_target_*] slot (its EMA slot + GN_TARGET_OFFSET) where
positive: --adaptive-anchors writes it (controllers/anchors.py); only the target changes, the law
above is the seed's.
"""
from numba import cuda, float32, int32

from alpharl.cuda_kernels.controllers.common import clampf, finite, observed, ppo_updated
from alpharl.cuda_kernels.registry import kernel
from alpharl.isv import (GN_TARGET_OFFSET, GRAD_NORM_OBS_OFFSET, LR_BOOTSTRAP, LR_MAX, LR_MIN, LR_SLOTS, RL_LR_PI, RL_LR_Q,
                         RL_LR_V)

#: Grad-norm the controller steers every head toward (seed: 1.0).
TARGET_GRAD_NORM = 1.0
#: Floor of the Wiener blend weight (seed: 0.4).
LR_WIENER_FLOOR = 0.4
#: Guard of the division by the observed grad norm.
LR_EPS = 1.0e-8
#: Heads driven: Q, pi, V, BCE, AUX (the seed's five) and the shared encoder.
N_LR_HEADS = len(LR_SLOTS)
#: LR slots of the heads only the PPO/V update trains.
PPO_LR_SLOTS = (RL_LR_PI, RL_LR_V)
#: Launch: one thread per head.
LR_CTRL_BLOCK = 32


@cuda.jit(device=True)
def lr_law(lr_prev, signal_slot, isv, live):
    """The head's next LR; ``live`` False (its update did not run this step): hold after the bootstraps."""
    if signal_slot < 0:
        return float32(LR_BOOTSTRAP)
    if lr_prev == 0.0 or not finite(lr_prev):
        return float32(LR_BOOTSTRAP)
    if not live:
        return lr_prev
    ema = isv[signal_slot]
    if not observed(ema) or ema < 0.0:
        return lr_prev
    raw = isv[signal_slot + GRAD_NORM_OBS_OFFSET]
    gn_target = isv[signal_slot + GN_TARGET_OFFSET]
    if not (gn_target > float32(0.0)) or not finite(gn_target):
        gn_target = float32(TARGET_GRAD_NORM)
    target = lr_prev * gn_target / max(ema, float32(LR_EPS))
    s = ema * ema
    d = raw - ema if finite(raw) else ema
    w = max(float32(LR_WIENER_FLOOR), s / (s + d * d))
    return clampf(w * target + (float32(1.0) - w) * lr_prev, float32(LR_MIN), float32(LR_MAX))


@kernel("void(float32[::1], int32, int32, int32, int32, int32, int32)", test_only=True)
def rl_lr_controller(isv, q_signal_slot, pi_signal_slot, v_signal_slot, bce_signal_slot, aux_signal_slot,
                     enc_signal_slot):
    """Write lr_q, lr_pi, lr_v, lr_bce, lr_aux, lr_enc (slots 413-418) from their grad-norm EMA slots.

    Signal slots are ISV indices passed as arguments (seed); -1 = no signal.
    Launch [1, LR_CTRL_BLOCK]; thread h < N_LR_HEADS owns head h.
    """
    h = cuda.threadIdx.x
    if h >= N_LR_HEADS:
        return
    sig = int32(-1)
    if h == 0:
        sig = q_signal_slot
    elif h == 1:
        sig = pi_signal_slot
    elif h == 2:
        sig = v_signal_slot
    elif h == 3:
        sig = bce_signal_slot
    elif h == 4:
        sig = aux_signal_slot
    else:
        sig = enc_signal_slot
    slot = RL_LR_Q + h
    isv[slot] = lr_law(isv[slot], sig, isv, not (slot == RL_LR_PI or slot == RL_LR_V) or ppo_updated(isv))
