"""Which side a policy quotes, by the position and the book it chose in (a diagnosis of the side skew).

A market maker's quote is two-sided; a policy that picks one action a step keeps both sides working only
if it sends the side that is missing. This script runs one held-out pass of each named policy (the
evaluation's setup: the run's held-out window, B backtests, the run's seed) and classes every (step,
backtest) by the state the action was chosen in — the position (short at the limit, short, flat, long,
long at the limit) and which sides had a limit order working — then reports per class its share of the
steps and the share of each action group sent there: a buy quote (join or improve the bid), a sell quote,
a market order, hold, cancel / flatten. For a trained policy it also gives the mean probability pi gave
the two quote groups in the class (what the sampled policy would send on average).

The summary of each policy: in the steps where exactly one side was missing and the position left room on
that side, the share in which the missing side was sent (``missing_sent``) and the share in which the side
already working was sent again (``working_sent``); its side bias, the step-weighted mean of P(sell quote) -
P(buy quote) over all steps (``side_bias``: a constant tilt to one side, whatever the state); and its lean,
the same difference when long minus when short within each book class, weighted by the smaller of the two
classes' steps (``lean``: > 0 where the quotes lean against the position, as an inventory-aware market
maker's do). Both read pi for a trained policy and the sent actions' shares for a baseline.

With ``--mirror`` a trained policy acts on its logits averaged with its mirror image's (alpharl.mirror):
the constant tilt cancels, the dependence on the state stays; each policy's held-out PnL, trades and book
(eval's statistics) come with its table, so the two can be set side by side.

    python benchmarks/side_choice.py RUN_DIR [--policy sampled --policy improve ...] [--b 16] [--mirror]
                                     [--json FILE]
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np

from alpharl import evaluate as E
from alpharl.actions import Action
from alpharl.reference.nets import log_softmax
from alpharl.rundir import read_dataset, read_run_config

#: Action groups (the report's columns): name -> action ids.
GROUPS = {"bid": (Action.JOIN_BID, Action.IMPROVE_BID), "ask": (Action.JOIN_ASK, Action.IMPROVE_ASK),
          "market": (Action.MARKET_BUY, Action.MARKET_SELL), "hold": (Action.HOLD,),
          "cancel": (Action.CANCEL, Action.FLATTEN)}
#: Position classes, by the position q against the limit m.
POSITIONS = ("short at limit", "short", "flat", "long", "long at limit")
SHORT_AT_LIMIT, LONG_AT_LIMIT = POSITIONS.index("short at limit"), POSITIONS.index("long at limit")
#: Book classes: which sides had a limit order working (bid, ask).
BOOKS = {(True, True): "both", (True, False): "bid only", (False, True): "ask only", (False, False): "none"}


def position_class(q: np.ndarray, limit: int) -> np.ndarray:
    """Index into POSITIONS of each position q (shares); "at limit" is |q| >= limit."""
    return np.select([q <= -limit, q < 0, q == 0, q < limit], [0, 1, 2, 3], 4)


def states_before(result) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(position, bid working, ask working) [T, B] as each step's action saw them: the state after the
    step before (a fresh backtest, flat with no orders, before the first)."""
    def shift(x, first):
        out = np.empty_like(x)
        out[0] = first
        out[1:] = x[:-1]
        return out

    return (shift(result.inventory, 0), shift(result.bid_working, False), shift(result.ask_working, False))


def side_table(result, limit: int, probs: np.ndarray | None = None) -> dict:
    """Per (position, book) class: steps share, action-group shares, and with ``probs`` [T, B, A] the
    mean pi of the bid and ask groups; and the missing-side summary."""
    q, bid, ask = states_before(result)
    pos = position_class(q, limit)
    act = result.actions
    group_of = {name: np.isin(act, [int(a) for a in ids]) for name, ids in GROUPS.items()}
    n = act.size
    rows = []
    for p_i, p_name in enumerate(POSITIONS):
        for (b, a), b_name in BOOKS.items():
            m = (pos == p_i) & (bid == b) & (ask == a)
            k = int(m.sum())
            if k == 0:
                continue
            row = {"position": p_name, "book": b_name, "steps": k / n}
            row.update({g: float(group_of[g][m].mean()) for g in GROUPS})
            if probs is not None:
                for g, ids in (("pi_bid", GROUPS["bid"]), ("pi_ask", GROUPS["ask"])):
                    row[g] = float(probs[m][:, [int(i) for i in ids]].sum(axis=1).mean())
            rows.append(row)
    # exactly one side missing, and room on it (a missing bid while long at the limit cannot be sent)
    bid_missing = ~bid & ask & (pos != LONG_AT_LIMIT)
    ask_missing = bid & ~ask & (pos != SHORT_AT_LIMIT)
    missing = bid_missing | ask_missing
    sent_missing = (bid_missing & group_of["bid"]) | (ask_missing & group_of["ask"])
    sent_working = (bid_missing & group_of["ask"]) | (ask_missing & group_of["bid"])
    k = int(missing.sum())
    summary = {"one_missing": k / n, "missing_sent": float(sent_missing.sum() / k) if k else None,
               "working_sent": float(sent_working.sum() / k) if k else None, **tilt(rows)}
    return {"rows": rows, "summary": summary}


def tilt(rows: list[dict]) -> dict:
    """``side_bias`` and ``lean`` (module doc) of ``side_table``'s rows: pi where the rows have it, else the
    action shares; ``lean`` None where no book class was seen both long and short."""
    sell, buy = ("pi_ask", "pi_bid") if rows and "pi_ask" in rows[0] else ("ask", "bid")
    w = np.array([r["steps"] for r in rows])
    d = np.array([r[sell] - r[buy] for r in rows])
    bias = float((w * d).sum() / w.sum())
    num = den = 0.0
    for book in BOOKS.values():
        sides = []
        for positions in (POSITIONS[3:], POSITIONS[:2]):   # long (incl. at the limit), short (incl. at it)
            m = np.array([r["book"] == book and r["position"] in positions for r in rows])
            sides.append((w[m].sum(), (w[m] * d[m]).sum() / w[m].sum() if m.any() else 0.0))
        (w_long, d_long), (w_short, d_short) = sides
        if w_long > 0 and w_short > 0:
            num += min(w_long, w_short) * (d_long - d_short)
            den += min(w_long, w_short)
    return {"side_bias": bias, "lean": float(num / den) if den else None}


class _Recorder:
    """A NetPolicy that keeps pi of every step (softmax of its logits) for the table's pi columns."""

    def __init__(self, policy):
        self.policy, self.probs = policy, []

    def __call__(self, obs):
        act = self.policy(obs)
        self.probs.append(np.exp(log_softmax(self.policy.last_logits, axis=1)))
        return act


def run(run_dir: Path, policies: list[str], b: int, steps: int | None, mirror: bool = False) -> dict:
    config = read_run_config(run_dir)
    params = E.run_params(run_dir) if any(p in E.POLICIES for p in policies) else None
    record = read_dataset(run_dir) or E.derived_record(config, f"{run_dir}: its data")
    mirror = mirror or config.mirror_policy   # a run trained with --mirror-policy acts mirror-averaged
    files, _ = E.plan(record, None, config, None, False)
    out = {}
    for name in policies:
        tables = []
        for f in files:
            setup = E.make_setup(config, f.market, *f.window, b, steps, config.seed, False)
            policy = E.make_policy(name, setup, params, mirror=mirror)
            rec = _Recorder(policy) if name in E.POLICIES else None
            result = E.run_policy(setup, rec or policy)
            probs = np.stack(rec.probs) if rec else None
            limit = setup.sim_params.max_position
            stats = E.run_stats(result, setup.seconds_per_step, limit)
            tables.append({"file": f.label, "mirror": mirror and name in E.POLICIES,
                           **{k: stats[k] for k in ("pnl", "trades", "book")}, **side_table(result, limit, probs)})
        out[name] = tables
    return out


def markdown(out: dict) -> str:
    lines = []
    for name, tables in out.items():
        for t in tables:
            s = t["summary"]
            fmt = lambda x: "-" if x is None else f"{x:.2f}"  # noqa: E731
            lines += [f"### {name}{' (mirror-averaged)' if t['mirror'] else ''} on {t['file']}", "",
                      f"Held out: {t['pnl']:,.0f} $ over {t['trades']} trades; both sides working in "
                      f"{t['book']['two_sided']:.2f} of the steps, at the position limit in "
                      f"{t['book']['at_limit']:.2f}.",
                      "",
                      f"One side missing (with room on it) in {s['one_missing']:.2f} of the steps: the missing side "
                      f"sent in {fmt(s['missing_sent'])} of them, the working side in {fmt(s['working_sent'])}. "
                      f"Side bias (sell - buy) {s['side_bias']:+.2f}; lean against the position {fmt(s['lean'])}.",
                      "",
                      "| position | book | steps | bid | ask | market | hold | cancel | pi bid | pi ask |",
                      "|---|---|---|---|---|---|---|---|---|---|"]
            for r in t["rows"]:
                if r["steps"] < 0.005:
                    continue
                lines.append(f"| {r['position']} | {r['book']} | {r['steps']:.3f} | " +
                             " | ".join(f"{r[g]:.2f}" for g in GROUPS) + " | " +
                             " | ".join(fmt(r.get(g)) for g in ("pi_bid", "pi_ask")) + " |")
            lines.append("")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("run", type=Path, help="a trained run directory")
    ap.add_argument("--policy", action="append", choices=E.ALL, help="policies (default: sampled, improve)")
    ap.add_argument("--b", type=int, default=16, help="backtests of the held-out pass")
    ap.add_argument("--steps", type=int, default=None, help="steps (default: one pass over the window)")
    ap.add_argument("--mirror", action="store_true", help="trained policies averaged with their mirror image")
    ap.add_argument("--json", type=Path, default=None, help="write the tables as JSON here too")
    args = ap.parse_args(argv)
    try:
        out = run(args.run, args.policy or ["sampled", "improve"], args.b, args.steps, args.mirror)
    except (E.EvalError, OSError, ValueError) as e:
        print(f"side_choice: {e}", file=sys.stderr)
        return 2
    print(markdown(out))
    if args.json:
        args.json.write_text(json.dumps(out, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
