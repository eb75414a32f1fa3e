"""The ablation table of the learning work: several `alpharl study` folders side by side.

For every dataset and variant (a study folder may hold several variants): the trained policy's
held-out PnL against the `join` and `hold` baselines run under the same settings (paired by seed),
and, from the trials' diagnostics (or, where the run folders are gone, the traces their result.json
keep), the learning issue's in-sample targets over the second half of each run: share of diagnostic
rows with each learning rate off its clamps, K at K_MAX, the PPO clip at a bound, whether alpha left
1, the reward per trade EMA at the end and its trend.

With ``--against VARIANT``: each other variant's held-out PnL minus VARIANT's on the same dataset and
seed (what a change bought, paired, with its bootstrap interval).

A (dataset, variant) whose seeds were run in several study folders (a study extended later with
``alpharl study --seed-list``) is one row over all its seeds: its summary is recomputed from the trials
of every folder (``alpharl.study.summarize``, the same bootstrap); a seed in two folders is an error.

Usage: python benchmarks/studies/ablation.py STUDY_DIR [STUDY_DIR ...] [--policy sampled] [--against VARIANT]
       [--out FILE.md] [--runs FILE.json]
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np

from alpharl import isv as S
from alpharl.actions import Action
from alpharl.report import ReportError, load_run
from alpharl.signals import TRADE_TOTALS
from alpharl.study import OK, RESULT_FILE, STUDY_FILE, paired_comparison, read_json, summarize, trial_folder

#: The learning rates whose clamps the targets speak of (bounds: the ISV's slots, S.BY_NAME).
LR_SLOTS = ("lr_q", "lr_pi", "lr_v")
#: Every column ``run_targets`` reads.
TARGET_COLUMNS = LR_SLOTS + ("k_loop_mult", "ppo_clip_eps", "v_blend_alpha", "reward_per_trade_ema")
#: Consecutive blocks the second half is cut into for the realised trends. The reward per trade EMA
#: folds a step's mean trade PnL with beta 0.99 on steps that close trades (a memory of a few hundred
#: steps), so its end value and slope wander with the last few hundred trades; a block of a tenth of the
#: half holds thousands of trades and is long against one trade's life, so the blocks' per-trade PnL are
#: close to independent and the least-squares slope over them has a t interval.
TREND_BLOCKS = 10
#: Two-sided 95 % quantile of Student's t with TREND_BLOCKS - 2 degrees of freedom.
T_975_DOF8 = 2.306
assert TREND_BLOCKS == 10, "T_975_DOF8 is the quantile for 8 degrees of freedom"
#: A run counts as having K pinned at K_MAX when K is there in at least this share of its second half's rows.
K_PINNED_SHARE = 0.5
#: The resting-quote actions of each side (eval's action_share names them in lower case).
QUOTE_SIDES = ((Action.JOIN_BID, Action.IMPROVE_BID), (Action.JOIN_ASK, Action.IMPROVE_ASK))
#: A seed quotes one-sidedly when one side's quotes take at least this share of its held-out steps: a side
#: the policy seldom picks is seldom re-posted after a fill, so the position runs to one side and the trades
#: dry up (study_2026-12-05_knoise: the three seeds below join at 0.87-0.92, every other run at most 0.81).
#: Action shares say what was sent: with refilled quotes a quoted side needs no action, so read the
#: two-sided column (eval's book) there.
ONE_SIDED_SHARE = 0.85


def _money(x: float | None) -> str:
    return "-" if x is None else f"{x:,.0f}"


def _ci_low(ci) -> float | None:
    """The interval's lower end; None where there is none (one seed: ci None)."""
    return None if not ci or ci[0] is None else ci[0]


def _ci(ci) -> str:
    return "-" if _ci_low(ci) is None else f"[{ci[0]:,.0f}, {ci[1]:,.0f}]"


def held_out_rows(study: dict, policy: str) -> list[dict]:
    """One row per (dataset, variant): policy and baseline means, the paired difference to join,
    improve's mean and the seeds at or above it (None in a study from before the improve baseline), and
    the seeds that quoted one-sidedly (``one_sided_seeds``; None before eval kept action shares), and the
    mean share of held-out steps with both sides working of the policy and of improve (``two_sided_means``;
    None before eval kept its ``book``)."""
    one_sided = one_sided_seeds(study, policy)
    two_sided, improve_two_sided = two_sided_means(study, policy), two_sided_means(study, "improve")
    rows = []
    for s in study["summary"]:
        p, join = s["policies"].get(policy), s["policies"].get("join")
        if p is None or join is None:
            continue
        vs_join, vs_hold = p["vs"]["join"], p["vs"]["hold"]
        improve, vs_improve = s["policies"].get("improve"), p["vs"].get("improve")
        rows.append({"dataset": s["dataset"], "variant": s["variant"], "n": p["n"], "policy": p["mean"],
                     "policy_ci": p["ci"], "join": join["mean"], "diff": vs_join["mean_diff"],
                     "diff_ci": vs_join["diff_ci"], "above_join": vs_join["wins"] + vs_join["ties"],
                     "below_hold": vs_hold["losses"], "improve": None if improve is None else improve["mean"],
                     "above_improve": None if vs_improve is None else vs_improve["wins"] + vs_improve["ties"],
                     "one_sided": one_sided.get((s["dataset"], s["variant"])),
                     "two_sided": two_sided.get((s["dataset"], s["variant"])),
                     "improve_two_sided": improve_two_sided.get((s["dataset"], s["variant"]))})
    return rows


def merge_studies(studies: list[dict]) -> list[dict]:
    """The studies with every (dataset, variant) that several of them ran taken out of each and put into
    one more study of its trials from all of them, its summary recomputed (``summarize``). A seed of such
    a pair in two studies raises ValueError (the same trial twice, or two runs the tables cannot tell
    apart)."""
    owners: dict[tuple[str, str], list[int]] = {}
    for i, st in enumerate(studies):
        for key in dict.fromkeys((t["dataset"], t["variant"]) for t in st["trials"]):
            owners.setdefault(key, []).append(i)
    split = {key for key, idx in owners.items() if len(idx) > 1}
    if not split:
        return studies
    out, pooled = [], []
    for st in studies:
        mine = [t for t in st["trials"] if (t["dataset"], t["variant"]) in split]
        pooled += mine
        out.append(dict(st, trials=[t for t in st["trials"] if (t["dataset"], t["variant"]) not in split],
                        summary=[r for r in st["summary"] if (r["dataset"], r["variant"]) not in split]))
    seen: set[tuple[str, str, int]] = set()
    for t in pooled:
        key = (t["dataset"], t["variant"], int(t["seed"]))
        if key in seen:
            raise ValueError(f"{key[0]} / {key[1]} seed {key[2]} is in two studies")
        seen.add(key)
    return out + [{"trials": pooled, "summary": summarize(pooled)}]


def trial_policies(study: dict, policy: str):
    """(trial, its held-out record of ``policy``) for each succeeded trial that evaluated ``policy``."""
    for t in study["trials"]:
        p = (t.get("policies") or {}).get(policy) if t["status"] == OK else None
        if p is not None:
            yield t, p


def trial_values(study: dict, policy: str) -> dict[tuple[str, str], dict[int, float]]:
    """Held-out PnL of ``policy`` per (dataset, variant) and seed, from the succeeded trials."""
    values: dict[tuple[str, str], dict[int, float]] = {}
    for t, p in trial_policies(study, policy):
        if p.get("pnl") is not None:
            values.setdefault((t["dataset"], t["variant"]), {})[int(t["seed"])] = float(p["pnl"])
    return values


def one_side_share(action_share: dict[str, float] | None) -> float | None:
    """The larger of the two sides' shares of the steps spent quoting (join + improve) on that side;
    None for an evaluation from before eval recorded action shares."""
    if not action_share:
        return None
    return max(sum(action_share.get(a.name.lower(), 0.0) for a in side) for side in QUOTE_SIDES)


def one_sided_seeds(study: dict, policy: str) -> dict[tuple[str, str], tuple[int, int]]:
    """Per (dataset, variant): the seeds whose ``policy`` quoted one-sidedly held out (one side's quotes at
    least ONE_SIDED_SHARE of the steps), out of the seeds whose evaluation kept action shares."""
    out: dict[tuple[str, str], tuple[int, int]] = {}
    for t, p in trial_policies(study, policy):
        share = one_side_share(p.get("action_share"))
        if share is not None:
            n, k = out.get((t["dataset"], t["variant"]), (0, 0))
            out[(t["dataset"], t["variant"])] = (n + (share >= ONE_SIDED_SHARE), k + 1)
    return out


def two_sided_means(study: dict, policy: str) -> dict[tuple[str, str], float]:
    """Per (dataset, variant): the mean over seeds of the share of held-out steps in which ``policy`` had a
    buy and a sell order working (eval's ``book``), over the seeds whose evaluation kept it. What the book
    held, not what was sent: a pegged side stays quoted without being sent again, and a side refused at the
    position limit is sent without being quoted, so under pegs and refills action shares mislead."""
    shares: dict[tuple[str, str], list[float]] = {}
    for t, p in trial_policies(study, policy):
        book = p.get("book")
        if book and book.get("two_sided") is not None:
            shares.setdefault((t["dataset"], t["variant"]), []).append(float(book["two_sided"]))
    return {k: float(np.mean(v)) for k, v in shares.items()}


def against_rows(values: dict[tuple[str, str], dict[int, float]], reference: str) -> list[dict]:
    """Per dataset, each variant other than ``reference`` minus ``reference`` over the seeds both ran
    (``alpharl.study.paired_comparison``); a dataset ``reference`` did not run has no rows."""
    rows = []
    for (dataset, variant), by_seed in sorted(values.items()):
        ref = values.get((dataset, reference))
        if variant == reference or ref is None:
            continue
        seeds = sorted(by_seed.keys() & ref.keys())
        if not seeds:
            continue
        c = paired_comparison([by_seed[k] for k in seeds], [ref[k] for k in seeds])
        rows.append({"dataset": dataset, "variant": variant, "reference": reference, "seeds": seeds,
                     "diff": c["mean_diff"], "diff_ci": c["diff_ci"], "wins": c["wins"], "ties": c["ties"]})
    return rows


def _at(values: np.ndarray, bound: float) -> np.ndarray:
    return np.isclose(values, bound, rtol=1e-4, atol=0.0)


def run_columns(run_dir: Path, result_file: Path | None = None) -> dict | None:
    """A training run's ISV columns over its diagnostic rows: from its diagnostics, or where the run folder
    is gone (a study run on another machine brings back each trial's result.json, not its diagnostics)
    from the trace its result.json keeps (alpharl.study.TRACE_SLOTS); None when neither has them all."""
    try:
        run = load_run(run_dir)
        return {"step": run.steps, **run.columns}
    except ReportError:
        pass
    result = read_json(result_file) if result_file is not None else None
    trace = (result or {}).get("trace") or {}
    return trace if all(k in trace for k in TARGET_COLUMNS) else None


def block_trend(values: np.ndarray, weights: np.ndarray) -> tuple[float, float, float] | None:
    """Least-squares slope of per-block values against the block index, times the number of blocks (the
    change over the stretch the blocks cover), and its 95 % t interval; None unless there are TREND_BLOCKS
    values (the t quantile is for their degrees of freedom) or with a block of zero weight."""
    n = values.size
    if n != TREND_BLOCKS or not np.all(weights > 0):
        return None
    t = np.arange(n, dtype=np.float64) - (n - 1) / 2.0
    slope = float(np.sum(t * (values - values.mean())) / np.sum(t * t))
    resid = values - values.mean() - slope * t
    se = float(np.sqrt(np.sum(resid * resid) / (n - 2) / np.sum(t * t)))
    half = T_975_DOF8 * se
    return slope * n, (slope - half) * n, (slope + half) * n


def realised_trends(steps: np.ndarray, pnl_total: np.ndarray, trades_total: np.ndarray) -> dict | None:
    """Over rows given as cumulative run totals: the closed trades' realised PnL a trade and a step in
    each of TREND_BLOCKS consecutive stretches, with each one's trend over the stretches (``block_trend``).
    A trade's PnL may fall while the PnL a step rises (more trades, each earning less): the return the
    agent maximises is the PnL a step. None where a block closed no trade or covers no step."""
    edges = np.linspace(0, steps.size - 1, TREND_BLOCKS + 1).round().astype(int)
    d_pnl, d_trades, d_steps = (np.diff(x[edges].astype(np.float64)) for x in (pnl_total, trades_total, steps))
    if not (np.all(d_trades > 0) and np.all(d_steps > 0)):
        return None
    per_trade, per_step = d_pnl / d_trades, d_pnl / d_steps
    trade_trend, step_trend = block_trend(per_trade, d_trades), block_trend(per_step, d_steps)
    return {"pnl_per_trade": float(d_pnl.sum() / d_trades.sum()), "pnl_per_trade_trend": trade_trend[0],
            "pnl_per_trade_trend_ci": list(trade_trend[1:]), "pnl_per_step": float(d_pnl.sum() / d_steps.sum()),
            "pnl_per_step_trend": step_trend[0], "pnl_per_step_trend_ci": list(step_trend[1:])}


def run_targets(run_dir: Path, result_file: Path | None = None) -> dict | None:
    """The learning targets of one training run (second half of its diagnostic rows; ``run_columns``)."""
    cols = run_columns(run_dir, result_file)
    if cols is None:
        return None
    n = len(cols["lr_q"])
    if n < 4:
        return None
    half = slice(n // 2, n)
    out = {}
    for name in LR_SLOTS:
        x = np.asarray(cols[name])[half]
        s = S.BY_NAME[name]
        out[f"{name}_off"] = float(np.mean(~(_at(x, s.lo) | _at(x, s.hi))))
    k_all = np.asarray(cols["k_loop_mult"])
    k = k_all[half]
    out["k_at_max"] = float(np.mean(_at(k, S.BY_NAME["k_loop_mult"].hi)))
    # the whole run's rows with a second learning iteration, K read as the device reads it
    out["k_above_1_run"] = float(np.mean([S.k_of_mult(m) >= 2 for m in k_all]))
    eps = np.asarray(cols["ppo_clip_eps"])[half]
    s = S.BY_NAME["ppo_clip_eps"]
    out["clip_at_bound"] = float(np.mean(_at(eps, s.lo) | _at(eps, s.hi)))
    out["alpha_left_1"] = bool(np.any(np.asarray(cols["v_blend_alpha"])[half] < 1.0))
    rpt = np.asarray(cols["reward_per_trade_ema"])[half]
    out["rpt_end"] = float(rpt[-1])
    # trend over the second half: least-squares slope x the half's length (the EMA's change it implies)
    t = np.arange(rpt.size, dtype=np.float64)
    out["rpt_trend"] = float(np.polyfit(t, rpt, 1)[0] * rpt.size) if rpt.size > 1 else 0.0
    out["realised"] = None
    if all(k in cols for k in TRADE_TOTALS):
        steps = np.asarray(cols["step"]) if "step" in cols else np.arange(n)
        out["realised"] = realised_trends(steps[half], *(np.asarray(cols[k])[half] for k in TRADE_TOTALS))
    return out


def per_run_targets(folder: Path, study: dict) -> list[dict]:
    """``run_targets`` of each succeeded trial of ``study`` (its study.json, in ``folder``) whose run
    folder or result.json kept its diagnostics, with its dataset, variant and seed."""
    runs = []
    for trial in study["trials"]:
        record = trial_folder(folder, trial["dataset"], trial["variant"], trial["seed"]) / RESULT_FILE
        t = run_targets(folder / trial["run_dir"], record) if trial["status"] == OK else None
        if t is not None:
            runs.append({"dataset": trial["dataset"], "variant": trial["variant"], "seed": trial["seed"], **t})
    return runs


def target_rows(folder: Path, study: dict) -> list[dict]:
    """Per (dataset, variant): medians / counts of ``run_targets`` over the trials of ``study`` (its
    study.json, in ``folder``) whose run folders kept their diagnostics (``group_targets`` of their
    ``per_run_targets``)."""
    return group_targets(per_run_targets(folder, study))


def group_targets(runs: list[dict]) -> list[dict]:
    """Per (dataset, variant) of ``runs`` (``per_run_targets`` rows, of one study or several): medians /
    counts of their targets."""
    groups: dict[tuple[str, str], list[dict]] = {}
    for t in runs:
        groups.setdefault((t["dataset"], t["variant"]), []).append(t)
    rows = []
    for (dataset, variant), ts in groups.items():
        row = {"dataset": dataset, "variant": variant, "runs": len(ts)}
        for key in [f"{n}_off" for n in LR_SLOTS] + ["k_at_max", "clip_at_bound", "rpt_end", "rpt_trend"]:
            row[key] = float(np.median([t[key] for t in ts]))
        row["alpha_left_1"] = sum(t["alpha_left_1"] for t in ts)
        row["k_pinned"] = sum(t["k_at_max"] >= K_PINNED_SHARE for t in ts)
        row["rpt_end_min"] = min(t["rpt_end"] for t in ts)
        real = [t["realised"] for t in ts if t["realised"] is not None]
        row["realised_runs"] = len(real)
        for key in ("pnl_per_trade", "pnl_per_step"):
            row[f"{key}_trend"] = float(np.median([r[f"{key}_trend"] for r in real])) if real else None
            # runs whose trend's 95 % interval lies below zero: falling beyond what the blocks' scatter explains
            row[f"{key}_falling"] = sum(r[f"{key}_trend_ci"][1] < 0 for r in real)
        rows.append(row)
    return rows


def _trend(row: dict, key: str) -> str:
    if not row["realised_runs"]:
        return "-"
    return f"{row[f'{key}_trend']:+.2f} ({row[f'{key}_falling']}/{row['realised_runs']})"


def markdown(held: list[dict], targets: list[dict], policy: str,
             against: tuple[str, list[dict]] | None = None) -> str:
    """The tables; ``against``: (the reference variant, its ``against_rows``)."""
    lines = [f"## Held-out net PnL in $ of the {policy} policy against join (paired by seed)", "",
             "| dataset | variant | n | policy mean [95 % CI] | join mean | policy − join [95 % CI] | seeds ≥ join | seeds < hold "
             "| improve mean | seeds ≥ improve | seeds one-sided | two-sided (improve) |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in sorted(held, key=lambda r: (r["dataset"], r["variant"])):
        above_improve = "-" if r["above_improve"] is None else f"{r['above_improve']}/{r['n']}"
        one_sided = "-" if r.get("one_sided") is None else f"{r['one_sided'][0]}/{r['one_sided'][1]}"
        two_sided = "-" if r.get("two_sided") is None else f"{r['two_sided']:.2f}"
        if r.get("improve_two_sided") is not None:
            two_sided += f" ({r['improve_two_sided']:.2f})"
        lines.append(f"| {r['dataset'].replace('LOBSTER_SampleFile_', '')} | {r['variant']} | {r['n']} | "
                     f"{_money(r['policy'])} {_ci(r['policy_ci'])} | {_money(r['join'])} | {_money(r['diff'])} "
                     f"{_ci(r['diff_ci'])} | {r['above_join']}/{r['n']} | {r['below_hold']} | {_money(r['improve'])} "
                     f"| {above_improve} | {one_sided} | {two_sided} |")
    by_variant: dict[str, list[dict]] = {}
    for r in held:
        by_variant.setdefault(r["variant"], []).append(r)
    lines += ["", "| variant | days with policy mean ≥ join | days whose CI of the mean excludes a loss | seeds < hold "
                  "(days with more than one) | days with policy mean ≥ improve |",
              "|---|---|---|---|---|"]
    for v, rs in sorted(by_variant.items()):
        ge = sum(r["diff"] >= 0 for r in rs)
        safe = sum((_ci_low(r["policy_ci"]) or 0.0) > 0 for r in rs)   # no interval: no loss excluded
        below = sum(r["below_hold"] for r in rs)
        known = [r for r in rs if r["improve"] is not None]
        ge_improve = f"{sum(r['policy'] >= r['improve'] for r in known)}/{len(known)}" if known else "-"
        lines.append(f"| {v} | {ge}/{len(rs)} | {safe}/{len(rs)} | {below} ({sum(r['below_hold'] > 1 for r in rs)}) "
                     f"| {ge_improve} |")
    if targets:
        lines += ["", "## In-sample learning targets (second half of each run; medians over the runs with diagnostics)", "",
                  "| dataset | variant | runs | lr_q off clamps | lr_pi off | lr_v off | K at K_MAX (runs pinned) | clip at a bound | runs where α left 1 | reward/trade EMA at end (min) | its trend over the half | realised $ a trade: trend (runs falling) | $ a step: trend (runs falling) |",
                  "|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
        for r in sorted(targets, key=lambda r: (r["dataset"], r["variant"])):
            lines.append(f"| {r['dataset'].replace('LOBSTER_SampleFile_', '')} | {r['variant']} | {r['runs']} | "
                         f"{r['lr_q_off']:.0%} | {r['lr_pi_off']:.0%} | {r['lr_v_off']:.0%} | {r['k_at_max']:.0%} ({r['k_pinned']}) | "
                         f"{r['clip_at_bound']:.0%} | {r['alpha_left_1']}/{r['runs']} | {r['rpt_end']:.1f} "
                         f"({r['rpt_end_min']:.1f}) | {r['rpt_trend']:+.1f} | {_trend(r, 'pnl_per_trade')} | "
                         f"{_trend(r, 'pnl_per_step')} |")
        lines += ["", "Realised trends: the second half cut into ten blocks, each block's closed-trade PnL a trade "
                      "(a step), its least-squares change over the half (median over runs) and the runs whose 95 % "
                      "t interval of that change lies below zero, out of the runs whose diagnostics hold the trade "
                      "totals. Runs pinned: K at K_MAX in at least half of the second half's rows."]
    if against is not None:
        ref, rows = against
        lines += ["", f"## Held-out net PnL in $ of the {policy} policy, each variant against `{ref}` (paired by dataset "
                      "and seed)", "",
                  f"| dataset | variant | seeds | variant − {ref} [95 % CI] | seeds above | seeds equal |",
                  "|---|---|---|---|---|---|"]
        if not rows:
            lines.append(f"| - | no other variant ran a day and seed that `{ref}` ran | | | | |")
        for r in rows:
            lines.append(f"| {r['dataset'].replace('LOBSTER_SampleFile_', '')} | {r['variant']} | {len(r['seeds'])} | "
                         f"{_money(r['diff'])} {_ci(r['diff_ci'])} | {r['wins']}/{len(r['seeds'])} | {r['ties']} |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("studies", nargs="+", type=Path, help="alpharl study output folders")
    ap.add_argument("--policy", default="sampled", choices=("sampled", "greedy"))
    ap.add_argument("--against", default=None, metavar="VARIANT",
                    help="also each other variant minus VARIANT, paired by dataset and seed")
    ap.add_argument("--out", type=Path, default=None, help="write the markdown here (default: print it)")
    ap.add_argument("--runs", type=Path, default=None, metavar="FILE.json",
                    help="also write each run's in-sample targets (dataset, variant, seed) as JSON")
    args = ap.parse_args(argv)
    held, values, runs, studies = [], {}, [], []
    for folder in args.studies:
        path = folder / STUDY_FILE
        if not path.is_file():
            print(f"ablation: {path}: no study.json (run alpharl study first)", file=sys.stderr)
            return 2
        study = json.loads(path.read_text())
        studies.append(study)
        runs += per_run_targets(folder, study)
    try:
        merged = merge_studies(studies)
    except ValueError as e:
        print(f"ablation: {e}", file=sys.stderr)
        return 2
    for study in merged:
        held += held_out_rows(study, args.policy)
        for key, by_seed in trial_values(study, args.policy).items():
            values.setdefault(key, {}).update(by_seed)
    targets = group_targets(runs)
    against = None
    if args.against is not None:
        if not any(v == args.against for _, v in values):
            print(f"ablation: --against {args.against}: no such variant in these studies", file=sys.stderr)
            return 2
        against = (args.against, against_rows(values, args.against))
    text = markdown(held, targets, args.policy, against)
    if args.runs:
        args.runs.write_text(json.dumps(runs, indent=1) + "\n")
    if args.out:
        args.out.write_text(text)
    else:
        print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
