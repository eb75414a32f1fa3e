"""Benchmark of the host work done once per diagnostic interval (not a test).

What a training run pays every ``--diag-every`` steps, outside the captured
step: the ISV read back from the device (one ``copy_to_host`` of
RL_SLOTS_END float32 after a stream sync), one Arrow diagnostics row
(serialise + ``write``), the dashboard update (live body layout, or one plain
log line); and what it pays per second of run time: the diagnostics fsync
(at most once a second) and the live dashboard's render (on Rich's refresh
thread, once a second). Each is timed over ``--iters`` repetitions (median
and p95, µs) and set against a step time (``--step-us``) to give the
overhead at each diag interval in ``--diag-every``. Results go to
``benchmarks/results/observability_<date>.md`` and ``.json``.

    python benchmarks/bench_observability.py                 # on a GPU
    ALPHARL_TARGET=sim python benchmarks/bench_observability.py --quick   # smoke run, no GPU

Target: the host work below 1% of the run time at the default
``--diag-every 50`` for steps of 1 ms and more; for a 100 µs step (small B in a
CUDA graph) take ``--diag-every 500`` or more.
"""
from __future__ import annotations

import argparse
import datetime as dt
import io
import json
import os
import platform
import tempfile
import time
from pathlib import Path

import numpy as np

import alpharl  # noqa: F401  (chooses the target before numba is imported)
from alpharl import isv as S
from alpharl import target

RESULTS = Path(__file__).resolve().parent / "results"
TARGET_OVERHEAD = 0.01
METRICS = ["losses/q", "losses/pi", "pnl/total_reward", "pnl/total_trade_pnl", "pnl/equity_mean",
           "trades/closed", "trades/win_rate", "trades/pnl_mean"]


def _time_us(fn, iters: int, warmup: int) -> dict:
    for _ in range(warmup):
        fn()
    t = np.empty(iters)
    for i in range(iters):
        t0 = time.perf_counter()
        fn()
        t[i] = (time.perf_counter() - t0) * 1e6
    return {"median_us": float(np.median(t)), "p95_us": float(np.percentile(t, 95))}


def bench(iters: int, warmup: int, b: int) -> dict:
    from numba import cuda
    from rich.console import Console

    from alpharl.config import TrainConfig
    from alpharl.dashboard import Dashboard
    from alpharl.diag import DiagnosticsWriter

    rng = np.random.default_rng(0)
    isv_host = S.bootstrap_vector() + rng.uniform(0, 1, S.RL_SLOTS_END).astype(np.float32)
    metrics = {m: float(rng.normal()) for m in METRICS}
    out = {}

    isv_d = cuda.to_device(isv_host)
    stream = cuda.stream()
    buf = cuda.pinned_array(S.RL_SLOTS_END, np.float32)

    def read_isv():
        isv_d.copy_to_host(buf, stream=stream)
        stream.synchronize()

    out["isv_readback"] = _time_us(read_isv, iters, warmup)

    with tempfile.TemporaryDirectory() as tmp:
        writer = DiagnosticsWriter(Path(tmp), METRICS, fsync_interval_s=float("inf"))   # rows only
        step = [0]

        def write_row():
            step[0] += 1
            writer.write(step[0], 1.0, time.time(), 100.0, 100.0 * b, isv_host, metrics)

        out["diag_row"] = _time_us(write_row, iters, warmup)
        out["diag_fsync"] = _time_us(lambda: os.fsync(writer._fd), iters, warmup)
        writer.close()
        out["diag_file_bytes_per_row"] = os.path.getsize(Path(tmp) / "diagnostics.arrows") / max(step[0], 1)

    cfg = TrainConfig(steps=10**9, b=b)
    for mode in ("live", "plain"):
        console = Console(file=io.StringIO(), force_terminal=mode == "live", width=200, height=60)
        with Dashboard(cfg.steps, b, console=console, min_interval_s=0.0) as dash:
            dash.start(cfg, "runs/bench")
            n = [0]

            def update():
                n[0] += 1
                dash.update(n[0], isv_host, metrics, 100.0, 100.0 * b)
                console.file.seek(0)
                console.file.truncate()

            out[f"dashboard_update_{mode}"] = _time_us(update, iters, warmup)
            if dash._live is not None:
                # what the Live thread does once a second (LIVE_REFRESH_PER_S), off the update path
                out["dashboard_render_live"] = _time_us(dash._live.refresh, iters, warmup)
    return out
    return out


def _table(r: dict, step_us: list[float], diag_every: list[int]) -> str:
    from alpharl.dashboard import LIVE_REFRESH_PER_S
    from alpharl.diag import FSYNC_INTERVAL_S

    lines = ["| operation | median µs | p95 µs | when |", "|---|---:|---:|---|"]
    when = {"isv_readback": "every diag interval", "diag_row": "every diag interval",
            "diag_fsync": f"at most every {FSYNC_INTERVAL_S:g} s",
            "dashboard_update_live": "every diag interval (terminal)",
            "dashboard_update_plain": "every diag interval (log lines)",
            "dashboard_render_live": f"{LIVE_REFRESH_PER_S:g} per s, Live thread"}
    for k, w in when.items():
        lines.append(f"| {k} | {r[k]['median_us']:.1f} | {r[k]['p95_us']:.1f} | {w} |")
    per_interval = sum(r[k]["median_us"] for k in ("isv_readback", "diag_row", "dashboard_update_live"))
    per_second = r["diag_fsync"]["median_us"] / FSYNC_INTERVAL_S + r["dashboard_render_live"]["median_us"] * LIVE_REFRESH_PER_S
    lines += ["", f"Per interval (readback + row + dashboard update): {per_interval:.0f} µs; per second of run time "
                  f"(fsync + live render): {per_second:.0f} µs; {r['diag_file_bytes_per_row']:.0f} bytes per row.", "",
              "| diag every | " + " | ".join(f"overhead at {t:g} µs/step" for t in step_us) + " |",
              "|---:|" + "---:|" * len(step_us)]
    for n in diag_every:
        fracs = [per_interval / (per_interval + n * t) + per_second / 1e6 for t in step_us]
        lines.append(f"| {n} | " + " | ".join(f"{f:.2%}{'' if f < TARGET_OVERHEAD else ' (> target)'}" for f in fracs) + " |")
    return "\n".join(lines)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--iters", type=int, default=200, help="timed repetitions")
    ap.add_argument("--warmup", type=int, default=10, help="untimed repetitions first")
    ap.add_argument("--b", type=int, default=16, help="B shown in the dashboard (throughput columns)")
    ap.add_argument("--step-us", type=float, nargs="+", default=[100.0, 1000.0], help="training step times to compare against, µs")
    ap.add_argument("--diag-every", type=int, nargs="+", default=[10, 50, 200, 500, 1000], help="diag intervals to tabulate")
    ap.add_argument("--quick", action="store_true", help="tiny smoke run (3 repetitions)")
    ap.add_argument("--out", type=Path, default=RESULTS, help="results folder")
    args = ap.parse_args(argv)
    if args.quick:
        args.iters, args.warmup = 3, 1
    from numba import cuda

    device = "CUDA simulator" if target.on_simulator() else cuda.get_current_device().name
    device = device.decode() if isinstance(device, bytes) else str(device)
    r = bench(args.iters, args.warmup, args.b)
    table = _table(r, args.step_us, args.diag_every)
    print(table)
    stamp = dt.datetime.now().strftime("%Y-%m-%d")
    tag = "" if not target.on_simulator() else "_sim"
    args.out.mkdir(parents=True, exist_ok=True)
    meta = {"date": stamp, "device": device, "python": platform.python_version(), "iters": args.iters,
            "warmup": args.warmup, "step_us": args.step_us}
    (args.out / f"observability_{stamp}{tag}.json").write_text(json.dumps({"meta": meta, "results": r}, indent=1))
    md = (f"# Per-diagnostic-interval host work, {stamp}\n\nDevice: {device}; {args.iters} timed repetitions "
          f"after {args.warmup} warm-up.\n\n{table}\n")
    (args.out / f"observability_{stamp}{tag}.md").write_text(md)
    print(f"wrote {args.out / f'observability_{stamp}{tag}.md'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
