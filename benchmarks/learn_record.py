"""Learning on real data: train N steps on the embedded LOBSTER sample and record how
l_q, reward per trade, done rate and the controllers moved.

    python benchmarks/learn_record.py --steps 50000 --b 16 --out benchmarks/results

Writes ``learning_<date>.md`` (a table per quantity: first, last, min, max at
a few checkpoints of the run) next to the run's own diagnostics.
"""
from __future__ import annotations

import argparse
import math
import time
from pathlib import Path

import numpy as np

from alpharl.config import TrainConfig
from alpharl.diag import read_diagnostics
from alpharl.run import train

TRACKED = ["isv.loss_q", "isv.loss_pi", "isv.loss_v", "isv.loss_bce", "isv.loss_aux",
           "isv.reward_per_trade_ema", "isv.done_rate_ema", "isv.loss_rate_ema",
           "isv.lr_q", "isv.lr_pi", "isv.lr_v", "isv.lr_bce", "isv.lr_aux", "isv.lr_enc",
           "isv.v_blend_alpha", "isv.ppo_clip_eps", "isv.ppo_ratio_clamp", "isv.entropy_coef",
           "isv.entropy_ema", "isv.target_tau", "isv.k_loop_mult", "isv.per_alpha", "isv.per_beta",
           "isv.q_grad_norm_ema", "isv.pi_grad_norm_ema", "isv.v_grad_norm_ema",
           "pnl/total_trade_pnl", "trades/closed", "trades/win_rate", "trades/pnl_mean"]


def summarise(run_dir: Path, steps: int, b: int, wall: float) -> str:
    t = read_diagnostics(run_dir)
    step = np.array(t.column("step").to_pylist())
    marks = sorted({int(i) for i in np.linspace(0, len(step) - 1, 6)})
    lines = [f"# Learning record: {steps} steps at b={b} on the embedded sample",
             "", f"- date: {time.strftime('%Y-%m-%d %H:%M')}; wall {wall:.0f} s; ln 21 = {math.log(21):.3f}",
             "", "| quantity | " + " | ".join(f"step {step[i]}" for i in marks) + " | min | max |",
             "|---|" + "---|" * (len(marks) + 2)]
    for name in TRACKED:
        if name not in t.column_names:
            continue
        v = np.array(t.column(name).to_pylist(), dtype=np.float64)
        cells = [f"{v[i]:.4g}" for i in marks]
        lines.append(f"| {name} | " + " | ".join(cells) + f" | {np.nanmin(v):.4g} | {np.nanmax(v):.4g} |")
    lq = np.array(t.column("isv.loss_q").to_pylist())
    tail = lq[len(lq) // 2:]
    lines += ["", f"l_q over the second half of the run: mean {np.mean(tail):.4f}, min {np.min(tail):.4f} "
              f"(uniform ln 21 = {math.log(21):.4f}); below ln 21 at {np.mean(tail < math.log(21)) * 100:.0f}% "
              "of the diagnostic rows."]
    return "\n".join(lines) + "\n"


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=50_000)
    ap.add_argument("--b", type=int, default=16)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", default="benchmarks/results")
    ap.add_argument("--run-dir", default=None)
    a = ap.parse_args()
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    run_dir = Path(a.run_dir or out / f"learn_run_b{a.b}")
    cfg = TrainConfig(steps=a.steps, b=a.b, seed=a.seed, run_dir=str(run_dir), diag_every=max(1, a.steps // 500),
                      checkpoint_every=0)
    t0 = time.perf_counter()
    train(cfg)
    text = summarise(run_dir, a.steps, a.b, time.perf_counter() - t0)
    (out / f"learning_{time.strftime('%Y%m%d')}_b{a.b}.md").write_text(text)
    print(text)


if __name__ == "__main__":
    main()
