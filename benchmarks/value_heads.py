"""What the value heads of a trained run predict, against the return its policy realised (a diagnosis).

The V blend (seed phase-4.4) uses V_dq, the dueling C51 head's value-stream expectation, in place of the
scalar value V_scalar only when the two track each other. This script says what each one estimates. It
reads a run's checkpoint: the weights, the ISV and the prioritized replay, whose ring holds the last
capacity / B steps of every backtest in order (step k's B transitions side by side). Per backtest it
computes the realised discounted return in learning units,

    G_t = r_t g + gamma (1 - done_t) G_{t+1}     (g the reward gain, r the stored reward),

backwards over the replay (the last TAIL steps left out: gamma^TAIL makes the cut-off negligible),
and at every state s_t the run's V_scalar, V_dq, E_pi Q = sum_a pi(a|s) E Z(s, a), max_a E Z(s, a) and
E Z(s, a_t) for the action taken. Then the one-step residuals of the Q head on the replay's transitions
(online weights at s'): against the greedy target r + gamma max_a' Q(s', a') and against the policy's
own r + gamma E_pi Q(s'), and their difference gamma E[max_a' Q - E_pi Q] (s'): what acting greedily adds
per step, which a value learnt with a greedy (Double-DQN) target accumulates over about 1 / (1 - gamma)
steps and a policy's realised return does not.

Where the replay holds too few steps of each backtest for the return (at B = 4096 the default ring
keeps 16), the realised-return columns are left out (None) and the heads are compared with each
other and with the one-step targets over every held state.

    python benchmarks/value_heads.py RUN_DIR [RUN_DIR ...] [--json FILE]
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np

from alpharl import isv as S
from alpharl.checkpoint import load_checkpoint
from alpharl.cuda_kernels.replay.per import META_CURSOR, META_SIZE
from alpharl.nets import NetLayout
from alpharl.reference import nets as RN
from alpharl.reference.learner import encode
from alpharl.reference.narrow import layer_wb
from alpharl.sizes import HIDDEN

#: Steps at the newest end of the replay whose return is not used (gamma^600 = 0.0024 at gamma = 0.99).
TAIL = 600


def _heads(p, lay: NetLayout, obs, support):
    """V_scalar, V_dq, E Z(s, a) [n, N_ACTIONS] and pi [n, N_ACTIONS] at obs [n, obs_dim] (float64)."""
    _, h = encode(p, lay, obs)
    w = lambda name: layer_wb(p, lay, name)  # noqa: E731
    val, adv = RN.linear(h, *w("q.val")), RN.linear(h, *w("q.adv"))
    pi = np.exp(RN.log_softmax(RN.linear(h, *w("pi.out"))))
    return RN.linear(h, *w("v.out")).ravel(), RN.v_dq(val, support), RN.expected_q(adv, val, support), pi


def _layout(obs_dim: int, n_params: int) -> NetLayout:
    """The networks' layout whose parameter count is the checkpoint's (the hidden width is not recorded)."""
    for hidden in (HIDDEN, *range(1, 4 * HIDDEN + 1)):
        lay = NetLayout(obs_dim, hidden)
        if lay.n_params == n_params:
            return lay
    raise SystemExit(f"no hidden width gives {n_params} parameters for obs_dim {obs_dim}")


def diagnose(run_dir, tail: int = TAIL) -> dict:
    """The numbers of the module docstring for one run directory (``tail``: newest steps whose return is
    not used)."""
    a, meta = load_checkpoint(Path(run_dir))
    b, isv = int(meta["b"]), a["isv"]
    cap, size, cursor = int(a["replay.capacity"]), int(a["replay.meta"][META_SIZE]), int(a["replay.meta"][META_CURSOR])
    n_steps = size // b
    if n_steps < 2:
        raise SystemExit(f"{run_dir}: the replay holds {n_steps} step of each backtest; needs at least 2")
    short = n_steps <= tail + 1  # no realised return: too few steps held
    first = (cursor - n_steps * b) % cap  # the oldest whole step still held
    rows = ((first + np.arange(n_steps * b)) % cap).reshape(n_steps, b)
    lay = _layout(int(a["replay.obs_dim"]), a["nets.params"].size)
    p, support = a["nets.params"].astype(np.float64), RN.support_of(isv)
    gamma, gain = float(isv[S.RL_GAMMA]), float(isv[S.RL_REWARD_GAIN])
    obs = a["replay.obs_s"][rows.ravel()].astype(np.float64)
    obs2 = a["replay.obs_s2"][rows.ravel()].astype(np.float64)
    done = a["replay.done"][rows].astype(np.float64)
    # the ring's order: a step's s' is the next step's s wherever the episode went on
    chained = np.all(np.isclose(obs2.reshape(n_steps, b, -1)[:-1], obs.reshape(n_steps, b, -1)[1:]), axis=2)
    r = a["replay.reward"][rows].astype(np.float64) * gain
    g, ret = np.zeros(b), np.zeros_like(r)
    for t in range(n_steps - 1, -1, -1):
        g = r[t] + gamma * (1.0 - done[t]) * g
        ret[t] = g
    keep = np.arange(n_steps * b) < (n_steps * b if short else (n_steps - tail) * b)
    G = None if short else ret.ravel()[keep]
    v_s, v_dq, q, pi = _heads(p, lay, obs, support)
    act = a["replay.action"][rows.ravel()]
    estimates = {"V_scalar": v_s, "V_dq": v_dq, "E_pi Q": (pi * q).sum(1), "max_a Q": q.max(1),
                 "Q(s, a taken)": q[np.arange(act.size), act]}
    out = {"run": str(run_dir), "steps_per_backtest": n_steps, "states": int(keep.sum()), "gamma": gamma,
           "reward_gain": gain, "support": [float(support[0]), float(support[1])],
           "alpha": float(isv[S.RL_V_BLEND_ALPHA]), "chained": float(chained[done[:-1] == 0].mean()),
           "return_mean": None if short else float(G.mean()), "return_std": None if short else float(G.std()),
           "policy_max_prob": float(pi.max(1).mean()),
           "policy_entropy": float(-(pi * np.log(np.maximum(pi, 1e-30))).sum(1).mean()), "heads": {}}
    for name, v in estimates.items():
        x = v[keep]
        out["heads"][name] = {"mean": float(x.mean()), "std": float(x.std()),
                              "corr_return": None if short else float(np.corrcoef(x, G)[0, 1]),
                              "explained_variance": None if short else float(1.0 - np.var(G - x) / np.var(G)),
                              "off_v_scalar": float(np.abs(x - v_s[keep]).mean() / np.abs(v_s[keep]).mean())}
    _, _, q2, pi2 = _heads(p, lay, obs2, support)
    nd, q_sa = 1.0 - done.ravel(), estimates["Q(s, a taken)"]
    out["residual_greedy"] = float(np.mean(r.ravel() + gamma * nd * q2.max(1) - q_sa))
    out["residual_policy"] = float(np.mean(r.ravel() + gamma * nd * (pi2 * q2).sum(1) - q_sa))
    out["greedy_gain_per_step"] = float(gamma * np.mean(nd * (q2.max(1) - (pi2 * q2).sum(1))))
    return out


def report(d: dict) -> str:
    lines = [f"{d['run']}: {d['states']:,} states ({d['steps_per_backtest']} steps a backtest), gamma {d['gamma']:.3f}, "
             f"gain {d['reward_gain']:.3f}, support [{d['support'][0]:.2f}, {d['support'][1]:.2f}], alpha {d['alpha']:.2f}, "
             f"chained {d['chained']:.3f}",
             (f"  realised return G: mean {d['return_mean']:+.3f}, std {d['return_std']:.3f}" if d["return_mean"] is not None
              else "  realised return G: not measured (too few steps held)") + f"; policy: max prob "
             f"{d['policy_max_prob']:.2f}, entropy {d['policy_entropy']:.2f} nats",
             f"  {'estimate':14s} {'mean':>7s} {'std':>6s} {'corr(G)':>8s} {'expl.var':>9s} {'|x-V_s|/|V_s|':>14s}"]
    for name, h in d["heads"].items():
        corr, ev = (("-", "-") if h["corr_return"] is None
                    else (f"{h['corr_return']:+.3f}", f"{h['explained_variance']:+.3f}"))
        lines.append(f"  {name:14s} {h['mean']:+7.3f} {h['std']:6.3f} {corr:>8s} {ev:>9s} {h['off_v_scalar']:14.2f}")
    lines.append(f"  Q's one-step residual: greedy target {d['residual_greedy']:+.4f}, the policy's own "
                 f"{d['residual_policy']:+.4f}; gamma E[max Q - E_pi Q](s') = {d['greedy_gain_per_step']:+.4f} a step")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("runs", nargs="+", help="run directories (each with its checkpoint)")
    ap.add_argument("--json", help="also write every number to this file")
    ap.add_argument("--tail", type=int, default=TAIL, help="newest steps of each backtest whose return is not used")
    args = ap.parse_args(argv)
    results = [diagnose(r, args.tail) for r in args.runs]
    print("\n".join(report(d) for d in results))
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
