"""What one training step measures: step 14's batch statistics (into the ISV's
obs slots, one ``rl_batch_moments_multi`` launch) and the run totals of closed
trades that the diagnostics read as trainer metrics."""
from __future__ import annotations

from typing import NamedTuple

import numpy as np

from alpharl import isv as S
from alpharl.batches import LearnerOutputs
from alpharl.cuda_kernels.reductions import MomentSlots, moments_table
from alpharl.cuda_kernels.step_ops import ACC_REWARD, ACC_TRADE_PNL, ACC_TRADES, ACC_WINS
from alpharl.sim.layout import OUT_TRADE_DONE


class SignalMoment(NamedTuple):
    """One batch statistic of step 14: its input, length, weights and ISV slots."""

    x: str  #: the input: a learner output (entropy, kl, ratio, advantage, ret, td) or done / trade_pnl
    minibatch: bool  #: length M (a replay minibatch) instead of B (the env batch)
    slots: MomentSlots
    by_trade_done: bool = False  #: weighted by the closed-trade flag (else all weights 1)


#: Step 14's batch statistics, one block each of ``rl_batch_moments_multi`` (one launch for all).
SIGNAL_MOMENTS = (
    SignalMoment("entropy", False, MomentSlots(count=S.RL_OBS_PPO_SAMPLES, mean=S.RL_OBS_ENTROPY)),
    SignalMoment("kl", False, MomentSlots(mean=S.RL_OBS_KL)),
    SignalMoment("ratio", False, MomentSlots(max=S.RL_OBS_RATIO_MAX)),
    SignalMoment("advantage", False, MomentSlots(var=S.RL_OBS_ADV_VAR)),
    SignalMoment("ret", False, MomentSlots(var=S.RL_OBS_RETURN_VAR)),
    SignalMoment("td", True, MomentSlots(kurt=S.RL_OBS_TD_KURTOSIS)),
    SignalMoment("done", False, MomentSlots(mean=S.RL_OBS_DONE_RATE)),
    SignalMoment("trade_pnl", False, MomentSlots(count=S.RL_OBS_TRADES, mean=S.RL_OBS_REWARD_PER_TRADE,
                                                 neg_frac=S.RL_OBS_LOSS_RATE), by_trade_done=True),
)


#: --pace-policy: the mean KL right after the K-loop's first iteration, before this update's own policy steps.
#: On a rollout's update step it is the drift of the policy since the rollout acted (the shared encoder moved
#: under Q / BCE / AUX every collect step); obs_kl (the last iteration's) less it is what the update's own
#: policy steps added, the anchor's signal (cuda_kernels/controllers/anchors.py).
KL_FIRST = SignalMoment("kl", False, MomentSlots(mean=S.RL_OBS_KL_FIRST))


def kl_first_table(n_ppo: int) -> np.ndarray:
    """int32 [1, MOM_COLS]: the KL_FIRST statistic over the update's n_ppo PPO samples."""
    return moments_table([(n_ppo, KL_FIRST.slots)])


def kl_first_inputs(out: LearnerOutputs, ones) -> tuple[list, list]:
    """(inputs, weights) of the KL_FIRST row: the first iteration's per-sample KL, weights 1."""
    return [ones[:0] if out.kl is None else out.kl], [ones]


#: The SIGNAL_MOMENTS inputs that are per-sample outputs of the PPO/V update (entropy's count is its sample
#: count, RL_OBS_PPO_SAMPLES); the simulator's inputs (B rows each).
PPO_SIGNALS = ("entropy", "kl", "ratio", "advantage", "ret")
SIM_SIGNALS = ("done", "trade_pnl")
assert {r.x for r in SIGNAL_MOMENTS} >= set(PPO_SIGNALS) | set(SIM_SIGNALS)


def signal_moments_table(b: int, m: int, n_ppo: int | None = None) -> np.ndarray:
    """int32 [len(SIGNAL_MOMENTS), MOM_COLS]: n and slots of step 14's statistics (built once per trainer and
    phase). n_ppo: the PPO/V update's samples (b; a rollout's T b on its update step, 0 on its collect steps:
    then those rows only write RL_OBS_PPO_SAMPLES = 0, their other slots and the EMAs gated on it hold)."""
    n_ppo = b if n_ppo is None else n_ppo
    return moments_table([(m if r.minibatch else n_ppo if r.x in PPO_SIGNALS else b, r.slots)
                          for r in SIGNAL_MOMENTS])


def signal_inputs(out: LearnerOutputs, sim, ones) -> tuple[list, list]:
    """(inputs, weights) of the SIGNAL_MOMENTS rows: the learner's outputs, the simulator's done and
    closed-trade PnL; weights the closed-trade flag or ``ones`` (float32 [>= every row's n]). An output the
    update did not produce (None: the numpy backend's collect step, whose table reads 0 of it) is ``ones[:0]``."""
    env = {"done": sim.done, "trade_pnl": sim.trade_pnl}
    trade_done = sim.output(OUT_TRADE_DONE)
    xs = [env[r.x] if r.x in env else getattr(out, r.x) for r in SIGNAL_MOMENTS]
    xs = [ones[:0] if x is None else x for x in xs]
    return xs, [trade_done if r.by_trade_done else ones for r in SIGNAL_MOMENTS]


#: Trainer metrics written to the diagnostics next to the ISV (name: meaning).
METRICS = {
    "pnl/total_reward": "sum over all backtests and steps of the reward (equity change after fees), $",
    "pnl/total_trade_pnl": "sum of the PnL of every closed trade, $",
    "pnl/equity_mean": "mean over backtests of the current episode's equity, $",
    "trades/closed": "closed round trips so far (all backtests)",
    "trades/win_rate": "fraction of closed trades with positive PnL",
    "trades/pnl_mean": "mean PnL per closed trade, $",
}

#: The run totals of closed trades (cumulative): PnL and count, whose differences between diagnostic rows
#: are the realised PnL a trade and a step over that stretch (benchmarks/studies/ablation.py).
TRADE_TOTALS = ("pnl/total_trade_pnl", "trades/closed")
assert set(TRADE_TOTALS) <= set(METRICS)


#: With several files, each file's metrics are METRICS' names followed by this and the file's label
#: (``trades/win_rate@GOOG_2012-06-21_5``: alpharl.dataset.file_labels).
STREAM_SEP = "@"


def stream_metric_names(labels: list[str]) -> list[str]:
    """The diagnostics columns of the per-file metrics, file by file ([] for no labels)."""
    return [f"{name}{STREAM_SEP}{label}" for label in labels for name in METRICS]


def name_stream_metrics(labels: list[str], per_stream: list[dict[str, float]]) -> dict[str, float]:
    """Per-file metrics (one dict per file, stream order) under their diagnostics names."""
    return {f"{name}{STREAM_SEP}{label}": v for label, m in zip(labels, per_stream) for name, v in m.items()}


def metrics(acc: np.ndarray, equity: np.ndarray) -> dict[str, float]:
    """METRICS from the host run totals ``acc`` (float64 [N_ACC]) and the backtests' equity [B]."""
    n = float(acc[ACC_TRADES])
    return {
        "pnl/total_reward": float(acc[ACC_REWARD]),
        "pnl/total_trade_pnl": float(acc[ACC_TRADE_PNL]),
        "pnl/equity_mean": float(np.mean(equity)),
        "trades/closed": n,
        "trades/win_rate": float(acc[ACC_WINS]) / n if n else float("nan"),
        "trades/pnl_mean": float(acc[ACC_TRADE_PNL]) / n if n else float("nan"),
    }
