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

    python benchmarks/quoting_heuristics.py --config CONFIG --data FILE [FILE ...]
        [--seeds 0,1,2] [--policies join,improve,join_flat,join_flat_imb:0.5] [--train-window 0:0.8]
        [--jobs 2] [--json OUT]
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
    ap.add_argument("--jobs", type=int, default=1)
    ap.add_argument("--json", default=None)
    a = ap.parse_args(argv)
    train = parse_window(a.train_window)
    test = held_out(train)
    seeds = [int(s) for s in a.seeds.split(",")]
    policies = a.policies.split(",")
    loaded = load_files(find_sources(a.data, "--data"))
    labels = file_labels([md for _, md in loaded])
    jobs = [(a.config, path, label, w, role, p, s, a.b, a.steps)
            for (path, _), label in zip(loaded, labels)
            for role, w in (("in_sample", train), ("held_out", test)) if w is not None
            for p in policies for s in seeds]
    for p in policies:   # a bad name fails here, not in a worker
        make(p, 1, 0, 1)
    if a.jobs > 1:
        with ProcessPoolExecutor(a.jobs) as ex:
            rows = list(ex.map(one, jobs))
    else:
        rows = [one(j) for j in jobs]
    summary = summarise(rows)
    print(table(summary))
    if a.json:
        Path(a.json).write_text(json.dumps({"config": a.config, "train_window": list(train), "seeds": seeds,
                                            "b": a.b, "runs": rows, "summary": summary}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
