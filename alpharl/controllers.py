"""Host side of the controllers: the signal table and the launch order (SPEC §1 steps 14-15).

Only launches kernels: no host sync, no copies, so it can be captured in the
step's CUDA graph.
"""
from __future__ import annotations

import numpy as np
from numba import cuda

from alpharl import isv as S
from alpharl.cuda_kernels.controllers import reward_norm as RN
from alpharl.cuda_kernels.controllers.anchors import FLAG_ANCHORS, FLAG_K_NOISE, FLAG_PACE
from alpharl.cuda_kernels.controllers.signals import N_TABLE_COLS, SIGNAL_EMA_BLOCK
from alpharl.cuda_kernels.controllers.step import SCALAR_CONTROLLERS, STEP_CONTROLLERS_BLOCK, rl_step_controllers
from alpharl.reference import controllers as R

#: Decay of the batch-statistic EMAs (entropy, KL, kurtosis, variances, trades): ~100 steps.
SIGNAL_EMA_BETA = 0.99
#: Decay of the grad-norm EMAs the LR controller reads: ~10 steps, so LRs react quickly.
GRAD_NORM_EMA_BETA = 0.9

_NO_GATE = -1
#: The gate of the signals the PPO/V update produces (its sample count this step): with --rollout T > 1
#: they fold only on the steps that update PPO and V, and hold on the steps that only collect.
_PPO = S.RL_OBS_PPO_SAMPLES
#: The importance ratio's signals (KL, ratio tail) fold only where a ratio can leave 1 (rl_ppo_informed:
#: with --adaptive-anchors not on K = 1 steps; otherwise the same steps as _PPO).
_RATIO = S.RL_OBS_PPO_INFORMED
#: Grad-norm EMA slots of the modules only the PPO/V update trains.
_PPO_GRAD_NORM_EMAS = (S.RL_PI_GRAD_NORM_EMA, S.RL_V_GRAD_NORM_EMA)

#: (raw observation slot, EMA slot, gate slot or -1, beta). A gated row folds its
#: observation only when the gate slot holds a positive count (e.g. trades closed).
SIGNAL_TABLE: tuple[tuple[int, int, int, float], ...] = (
    *((ema + S.GRAD_NORM_OBS_OFFSET, ema, _PPO if ema in _PPO_GRAD_NORM_EMAS else _NO_GATE, GRAD_NORM_EMA_BETA)
      for ema in S.GRAD_NORM_EMA_SLOTS),
    (S.RL_OBS_ENTROPY, S.RL_ENTROPY_EMA, _PPO, SIGNAL_EMA_BETA),
    (S.RL_OBS_KL, S.RL_KL_EMA, _RATIO, SIGNAL_EMA_BETA),
    (S.RL_OBS_TD_KURTOSIS, S.RL_TD_KURTOSIS_EMA, _NO_GATE, SIGNAL_EMA_BETA),
    (S.RL_OBS_ADV_VAR, S.RL_ADV_VAR_EMA, _PPO, SIGNAL_EMA_BETA),
    (S.RL_OBS_RETURN_VAR, S.RL_RETURN_VAR_EMA, _PPO, SIGNAL_EMA_BETA),
    (S.RL_OBS_RATIO_MAX, S.RL_RATIO_TAIL_EMA, _RATIO, SIGNAL_EMA_BETA),
    (S.RL_OBS_DONE_RATE, S.RL_DONE_RATE_EMA, _NO_GATE, SIGNAL_EMA_BETA),
    (S.RL_OBS_REWARD_PER_TRADE, S.RL_REWARD_PER_TRADE_EMA, S.RL_OBS_TRADES, SIGNAL_EMA_BETA),
    (S.RL_OBS_LOSS_RATE, S.RL_LOSS_RATE_EMA, S.RL_OBS_TRADES, SIGNAL_EMA_BETA),
)
assert len(SIGNAL_TABLE) <= SIGNAL_EMA_BLOCK
assert len({row[1] for row in SIGNAL_TABLE}) == len(SIGNAL_TABLE), "one row per EMA slot"


def reward_flags(config) -> np.int32:
    """rl_reward_norm's flags from a TrainConfig: FLAG_NORM (--reward-norm), FLAG_SUPPORT (--adaptive-support)."""
    return np.int32((RN.FLAG_NORM if config.reward_norm else 0) | (RN.FLAG_SUPPORT if config.adaptive_support else 0))


def reward_statistics(config) -> bool:
    """Whether the step runs rl_reward_norm (in place of rl_scale): the normaliser and the support read
    its statistics."""
    return bool(config.reward_norm or config.adaptive_support)


def signal_table_host() -> tuple[np.ndarray, np.ndarray]:
    table = np.array([row[:N_TABLE_COLS] for row in SIGNAL_TABLE], dtype=np.int32)
    beta = np.array([row[3] for row in SIGNAL_TABLE], dtype=np.float32)
    return table, beta


class Controllers:
    """Device-side signal table + launches of the signal EMAs and every controller.

    anchors: --adaptive-anchors (the anchor stage writes the controllers' targets, ``FLAG_ANCHORS``); pace:
    --pace-policy (``FLAG_PACE``); k_noise: --k-noise-band (``FLAG_K_NOISE``)."""

    def __init__(self, stream=0, anchors: bool = False, pace: bool = False, k_noise: bool = False):
        self.stream = stream
        self.flags = anchor_flags(anchors, pace, k_noise)
        table, beta = signal_table_host()
        self.n_rows = np.int32(len(table))
        self.table_d = cuda.to_device(table, stream=stream)
        self.beta_d = cuda.to_device(beta, stream=stream)

    def launch_step(self, isv_d, counter_d) -> None:
        """The step's signal EMAs, the anchors, every controller but the V blend, and counter_d[0] += 1: one
        launch (the same as the unit kernels rl_signal_ema, rl_anchor_controller, rl_lr_controller,
        SCALAR_CONTROLLERS and the tick in sequence; the tests launch those one by one)."""
        heads = [np.int32(s) for s in S.GRAD_NORM_EMA_SLOTS]
        rl_step_controllers[1, STEP_CONTROLLERS_BLOCK, self.stream](isv_d, self.table_d, self.beta_d, self.n_rows,
                                                                    *heads, counter_d, self.flags)


def anchor_flags(anchors: bool, pace: bool = False, k_noise: bool = False) -> np.int32:
    """``flags`` of the anchor stage: --adaptive-anchors, --pace-policy, --k-noise-band."""
    return np.int32((FLAG_ANCHORS if anchors else 0) | (FLAG_PACE if pace else 0) | (FLAG_K_NOISE if k_noise else 0))


def reference_signal_emas(isv, anchors: bool = False) -> None:
    """The PPO signals' gate (``anchors``: --adaptive-anchors) and the signal EMAs."""
    R.rl_ppo_informed(isv, FLAG_ANCHORS if anchors else 0)
    table, beta = signal_table_host()
    R.rl_signal_ema(isv, table, beta, len(table))


def reference_controllers(isv, anchors: bool = False, pace: bool = False, k_noise: bool = False) -> None:
    """The anchors (their bootstraps only unless ``anchors``; ``pace``: --pace-policy; ``k_noise``:
    --k-noise-band), the LR controller, SCALAR_CONTROLLERS."""
    R.rl_anchor_controller(isv, anchor_flags(anchors, pace, k_noise))
    R.rl_lr_controller(isv, *S.GRAD_NORM_EMA_SLOTS)
    for ctrl in SCALAR_CONTROLLERS:
        getattr(R, ctrl.name)(isv)
