"""Scripted quoting policies on a study's training window and on its held-out window (a diagnosis).

A learner sees only the training window. Where no simple quoting rule earns there, "do not quote" is
what that window teaches, whatever the held-out window would have paid. This script asks the
training window directly: each policy runs through ``alpharl.evaluate`` (the study's simulator
settings from a config, B backtests, one pass over the window, the evaluation's seeds) on the
training window (in-sample) and on the held-out one, and prints PnL, trades and $ a trade.

Policies: the evaluation's baselines (``join``, ``improve``, ...), and two rules that condition on the
observation, each the join of both touches with one filter:

- ``join_flat``: quote only the side that does not grow |position| (both sides while flat): a market
  maker that never adds to its inventory.
- ``join_flat_imb:THETA``: the same, and a side only while the touch imbalance
  (bid size - ask size) / (sum) does not point against it by more than THETA: a bid only while
  imbalance > -THETA (a heavy ask side foretells a falling mid, which fills a resting bid just before
  it loses), an ask only while imbalance < THETA.

A side that has an order when its filter turns false is cancelled (CANCEL takes both sides' orders; the
side still wanted re-joins on the next steps, at the back of the queue).

After the table, the in-sample selection: per file, the rule (``hold`` included: it never trades, PnL
0) with the best in-sample PnL, and what it makes held out beside join and hold there. That is what a
learner that picks among these rules by its training window alone would get held out.

``--segments N`` cuts each file into N equal windows instead and runs every policy on each (a fresh
simulator per window): how a rule's PnL varies along the day. Each segment is in-sample (inside the
training window), held out (inside its complement) or neither; the summary gives, per file and policy,
the in-sample segments' mean and spread and how many of them the held-out segments' mean reaches. A
held-out result inside the spread of the training segments is one a learner could not have told from
what the training window showed.

    python benchmarks/quoting_heuristics.py --config CONFIG --data FILE [FILE ...]
        [--seeds 0,1,2] [--policies join,improve,join_flat,join_flat_imb:0.5] [--train-window 0:0.8]
        [--segments N] [--jobs 2] [--json OUT]
"""
from __future__ import annotations

import argparse
import json
import sys
from concurrent.futures import ProcessPoolExecutor
from functools import lru_cache
from pathlib import Path

import numpy as np

from alpharl import actions as A
from alpharl.sim import layout as L

DEFAULT_POLICIES = ("join", "improve", "join_flat", "join_flat_imb:0.5")


class FilteredJoin:
    """Join both touches (bid on even steps, ask on odd, as ``join``), each side only while its filter
    holds (module doc); cancel where an order rests on a side whose filter failed."""

    def __init__(self, b: int, obs_levels: int, theta: float | None):
        base = L.obx_base(obs_levels)
        self.imb, self.pos = base + L.OBX_IMB1, base + L.OBX_POSITION
        self.buy, self.sell = base + L.OBX_BUY_FLAG, base + L.OBX_SELL_FLAG
        self.b, self.theta, self.t = b, theta, 0

    def wanted(self, obs: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(bid wanted, ask wanted) per backtest."""
        pos = obs[:, self.pos]
        bid_ok, ask_ok = pos <= 0.0, pos >= 0.0
        if self.theta is not None:
            imb = obs[:, self.imb]
            bid_ok &= imb > -self.theta
            ask_ok &= imb < self.theta
        return bid_ok, ask_ok

    def __call__(self, obs: np.ndarray) -> np.ndarray:
        t, self.t = self.t, self.t + 1
        bid_ok, ask_ok = self.wanted(obs)
        has_bid, has_ask = obs[:, self.buy] > 0, obs[:, self.sell] > 0   # live or pending
        need_bid, need_ask = bid_ok & ~has_bid, ask_ok & ~has_ask
        a = np.full(self.b, A.HOLD, np.int32)
        # this step's side first, the other side where only it is needed
        if t % 2 == 0:
            a[need_ask], a[need_bid] = A.JOIN_ASK, A.JOIN_BID
        else:
            a[need_bid], a[need_ask] = A.JOIN_BID, A.JOIN_ASK
        a[(has_bid & ~bid_ok) | (has_ask & ~ask_ok)] = A.CANCEL
        return a


def make(name: str, b: int, seed: int, obs_levels: int):
    """The policy called ``name`` (module doc) for B backtests."""
    from alpharl import evaluate as E

    if name == "join_flat":
        return FilteredJoin(b, obs_levels, None)
    if name.startswith("join_flat_imb:"):
        return FilteredJoin(b, obs_levels, float(name.split(":", 1)[1]))
    return E.Baseline(name, b, seed)


@lru_cache(maxsize=None)
def _market(path: str):
    """A data file, read once per process (every job of a worker on that file shares it)."""
    from alpharl.dataset import find_sources, load_files

    (_, md), = load_files(find_sources([path], "--data"))
    return md


@lru_cache(maxsize=None)
def _config(config_path: str | None):
    from alpharl.config import TrainConfig

    return TrainConfig() if config_path is None else TrainConfig.from_toml(config_path)


def one(job: tuple) -> dict:
    """One policy, one file, one window, one seed: the evaluation's trade statistics."""
    config_path, path, label, window, role, name, seed, b, steps = job
    from alpharl import evaluate as E

    config = _config(config_path)
    setup = E.make_setup(config, _market(path), *window, b, steps, seed, False)
    r = E.run_policy(setup, make(name, b, seed, config.sim.obs_levels))
    st = E.trade_stats(r.reward, r.trade_done, r.trade_pnl, setup.seconds_per_step)
    return {"file": label, "window": list(window), "role": role, "policy": name, "seed": seed,
            "pnl": st["pnl"], "trades": st["trades"], "avg_trade": st["avg_trade"]}


def summarise(rows: list[dict]) -> list[dict]:
    """Mean over seeds per (file, role, policy), with the seeds' PnL."""
    keys = list(dict.fromkeys((r["file"], r["role"], r["policy"]) for r in rows))
    out = []
    for f, role, p in keys:
        rs = sorted((r for r in rows if (r["file"], r["role"], r["policy"]) == (f, role, p)), key=lambda r: r["seed"])
        pnl = float(np.mean([r["pnl"] for r in rs]))
        trades = float(np.mean([r["trades"] for r in rs]))
        out.append({"file": f, "role": role, "policy": p, "pnl": pnl, "trades": trades,
                    "per_trade": pnl / trades if trades else None, "seeds": [r["pnl"] for r in rs]})
    return out


def select_in_sample(summary: list[dict]) -> list[dict]:
    """Per file: the policy with the best in-sample mean PnL among those run and ``hold`` (PnL 0: it never
    trades), with its held-out PnL and the held-out PnL of ``join`` (None if join was not run)."""
    out = []
    for f in dict.fromkeys(s["file"] for s in summary):
        pnl = {(s["role"], s["policy"]): s["pnl"] for s in summary if s["file"] == f}
        ins = {"hold": 0.0, **{p: x for (role, p), x in pnl.items() if role == "in_sample"}}
        best = max(ins, key=ins.get)
        held = 0.0 if best == "hold" else pnl.get(("held_out", best))
        out.append({"file": f, "policy": best, "in_sample": ins[best], "held_out": held,
                    "join_held_out": pnl.get(("held_out", "join"))})
    return out


def selection_table(sel: list[dict]) -> str:
    """Markdown: per file, the in-sample pick and its held-out PnL against join and hold."""
    lines = ["| day | best in-sample (PnL) | its held-out PnL | join held out | hold |", "|---|---|---|---|---|"]
    for r in sel:
        held = "" if r["held_out"] is None else f"{r['held_out']:,.0f}"
        join = "" if r["join_held_out"] is None else f"{r['join_held_out']:,.0f}"
        lines.append(f"| {r['file']} | {r['policy']} ({r['in_sample']:,.0f}) | {held} | {join} | 0 |")
    return "\n".join(lines)


def segment_role(seg: tuple[float, float], train: tuple[float, float], test: tuple[float, float] | None) -> str:
    """``in_sample`` for a segment inside the training window, ``held_out`` inside its complement,
    ``other`` for one that straddles a boundary or lies in neither."""
    def inside(w):
        return w is not None and w[0] <= seg[0] and seg[1] <= w[1]
    return "in_sample" if inside(train) else "held_out" if inside(test) else "other"


def summarise_segments(rows: list[dict]) -> list[dict]:
    """Per (file, policy): each segment's PnL (mean over seeds), then the in-sample segments' mean, sample
    standard deviation and count above zero, the held-out segments' mean, and how many in-sample
    segments that mean is at or above.

    Two statistics read the held-out result against the in-sample spread: t = mean / (sd / sqrt(n)), the
    in-sample mean over its standard error (how clearly the training segments say the rule earns), and
    z = (H - m mean) / (sqrt(m) sd), the held-out total H of its m segments against what m independent
    in-sample segments would sum to (how unusual the held-out window is for the training window)."""
    from alpharl.study import mean_std   # here, not at the top: the study module's imports cost ~1.5 s
    out = []
    for f, p in dict.fromkeys((r["file"], r["policy"]) for r in rows):
        segs = {}
        for r in rows:
            if (r["file"], r["policy"]) == (f, p):
                segs.setdefault(r["segment"], []).append(r)
        pnl = [float(np.mean([r["pnl"] for r in segs[i]])) for i in sorted(segs)]
        role = [segs[i][0]["role"] for i in sorted(segs)]
        ins = np.array([x for x, ro in zip(pnl, role) if ro == "in_sample"])
        held = np.array([x for x, ro in zip(pnl, role) if ro == "held_out"])
        held_mean = float(held.mean()) if held.size else None
        total = float(held.sum()) if held.size else None
        mean, sd = mean_std(ins)
        spread = sd is not None and sd > 0.0
        t = mean / (sd / np.sqrt(ins.size)) if spread else None
        z = (total - held.size * mean) / (np.sqrt(held.size) * sd) if spread and held.size else None
        out.append({"file": f, "policy": p, "segment_pnl": pnl, "segment_role": role,
                    "in_sample_mean": mean, "in_sample_sd": sd, "in_sample_t": t,
                    "held_out_total": total, "held_out_z": z,
                    "in_sample_positive": int((ins > 0).sum()), "in_sample_segments": int(ins.size),
                    "held_out_mean": held_mean,
                    "held_out_reaches": None if held_mean is None else int((held_mean >= ins).sum())})
    return out


def segment_table(summary: list[dict]) -> str:
    """Markdown: per file and policy, each segment's PnL in k$ (held-out ones in brackets), and the
    in-sample segments against the held-out mean."""
    lines = ["| day | policy | PnL a segment, k$ ([held out]) | in-sample mean ± sd (t), > 0 | held-out mean,"
             " ≥ in-sample segments | held-out total (z) |", "|---|---|---|---|---|---|"]
    for s in summary:
        cells = " ".join(f"[{x / 1e3:.1f}]" if ro == "held_out" else f"{x / 1e3:.1f}"
                         for x, ro in zip(s["segment_pnl"], s["segment_role"]))
        n = s["in_sample_segments"]
        t = "" if s["in_sample_t"] is None else f" ({s['in_sample_t']:+.1f})"
        ins = "" if not n else (f"{s['in_sample_mean'] / 1e3:.1f} ± {(s['in_sample_sd'] or 0) / 1e3:.1f}{t},"
                                f" {s['in_sample_positive']}/{n}")
        held = "" if s["held_out_mean"] is None else f"{s['held_out_mean'] / 1e3:.1f}, {s['held_out_reaches']}/{n}"
        total = "" if s["held_out_total"] is None else f"{s['held_out_total'] / 1e3:+.1f}"
        if s["held_out_z"] is not None:
            total += f" ({s['held_out_z']:+.1f})"
        lines.append(f"| {s['file']} | {s['policy']} | {cells} | {ins} | {held} | {total} |")
    return "\n".join(lines)


def table(summary: list[dict]) -> str:
    """Markdown: per file and policy, in-sample and held-out mean PnL ($ a trade)."""
    files = list(dict.fromkeys(s["file"] for s in summary))
    policies = list(dict.fromkeys(s["policy"] for s in summary))
    cell = {(s["file"], s["policy"], s["role"]): s for s in summary}
    lines = ["| day | policy | in-sample PnL ($ / trade) | held-out PnL ($ / trade) |", "|---|---|---|---|"]
    for f in files:
        for p in policies:
            txt = []
            for role in ("in_sample", "held_out"):
                s = cell.get((f, p, role))
                txt.append("" if s is None else f"{s['pnl']:,.0f} ({s['per_trade'] or 0:+.2f})")
            lines.append(f"| {f} | {p} | {txt[0]} | {txt[1]} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    from alpharl.dataset import file_labels, find_sources, load_files
    from alpharl.windows import held_out, parse_window

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--config", default=None, help="a run config (TOML): the simulator settings")
    ap.add_argument("--data", nargs="+", required=True, help="LOBSTER files (zip or message/orderbook pairs)")
    ap.add_argument("--seeds", default="0,1,2")
    ap.add_argument("--policies", default=",".join(DEFAULT_POLICIES))
    ap.add_argument("--train-window", default="0:0.8")
    ap.add_argument("--b", type=int, default=16)
    ap.add_argument("--steps", type=int, default=None, help="steps per run (default: one pass over the window)")
    ap.add_argument("--segments", type=int, default=0,
                    help="cut each file into N equal windows and run each policy on every one (module doc)")
    ap.add_argument("--jobs", type=int, default=1)
    ap.add_argument("--json", default=None)
    a = ap.parse_args(argv)
    if a.segments < 0:
        ap.error(f"--segments {a.segments}: must be >= 0")
    train = parse_window(a.train_window)
    test = held_out(train)
    seeds = [int(s) for s in a.seeds.split(",")]
    policies = a.policies.split(",")
    loaded = load_files(find_sources(a.data, "--data"))
    labels = file_labels([md for _, md in loaded])
    if a.segments:
        windows = [(i / a.segments, (i + 1) / a.segments) for i in range(a.segments)]
        windows = [(segment_role(w, train, test), w) for w in windows]
    else:
        windows = [(role, w) for role, w in (("in_sample", train), ("held_out", test)) if w is not None]
    jobs = [(a.config, path, label, w, role, p, s, a.b, a.steps)
            for (path, _), label in zip(loaded, labels)
            for role, w in windows for p in policies for s in seeds]
    for p in policies:   # a bad name fails here, not in a worker
        make(p, 1, 0, 1)
    if a.jobs > 1:
        with ProcessPoolExecutor(a.jobs) as ex:
            rows = list(ex.map(one, jobs))
    else:
        rows = [one(j) for j in jobs]
    selection = None
    if a.segments:
        for r in rows:
            r["segment"] = int(round(r["window"][0] * a.segments))
        summary = summarise_segments(rows)
        print(segment_table(summary))
    else:
        summary = summarise(rows)
        print(table(summary))
        if test is not None:
            selection = select_in_sample(summary)
            print()
            print(selection_table(selection))
    if a.json:
        Path(a.json).write_text(json.dumps({"config": a.config, "train_window": list(train), "seeds": seeds,
                                            "b": a.b, "segments": a.segments, "runs": rows,
                                            "summary": summary, "selection": selection}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
