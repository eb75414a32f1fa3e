"""Micro-benchmark of the learning kernels (not a test).

For each env batch B (replay minibatch M = B unless --m is given) it times,
with CUDA events on one stream:

- ``update``: one whole learning update (Learner.update: all heads' forward,
  losses, backward, encoder backward, guard + Adam), replayed from a CUDA graph
  (the trainer's way; --eager times plain launches instead);
- each main matrix product alone (encoder layer 2 forward / dX / [dW; db],
  Q advantage stream forward / [dW; db]) and guard + Adam, each as a CUDA
  graph of KERNEL_REPEATS back-to-back launches (so the figure is device time,
  not the ~30 µs of host time an eager launch costs);

- ``learn``: the learning step as the trainer runs it, plus the target's soft
  update: draw + gather the minibatch from a filled prioritized replay, the
  update, the priorities written back, the soft update (graph-replayed);
- the PyTorch peer (benchmarks/torch_peer.py) on the same work, eager and as a
  CUDA graph, in this process, where torch is installed; "× PyTorch" is its
  graph µs over alpharl's learn µs (above 1: alpharl is faster). Without torch
  (or on the simulator) those cells say why, never a number;

each with the large layers' products on the numba kernels (--tensor-cores off)
and, where cuBLASLt can run (a GPU with nvmath-python), on TF32 tensor cores
(on; auto: alpharl.tensor_gemm.TC_MIN_ROWS), one row per mode; "× off" is the
update's µs with tensor cores off over this row's (the peer runs once per B);

and prints µs and achieved TFLOP/s (GEMM FLOPs only, 2 m n k each) against the
fp32 peak, then writes ``benchmarks/results/learn_<date>.md`` and ``.json``.

    python benchmarks/bench_learn.py --b 16 256 4096 65536
    python benchmarks/bench_learn.py --b 4096 65536 --tensor-cores off on
    ALPHARL_TARGET=sim python benchmarks/bench_learn.py --quick   # smoke run, no GPU
"""
from __future__ import annotations

import argparse
import datetime as dt
import json
import platform
import time
from pathlib import Path

import numpy as np

import alpharl  # noqa: F401  (chooses the target before numba is imported)
from alpharl import isv as S
from alpharl import target
from alpharl import tensor_gemm as TG
from alpharl.bench import PEER_KEYS, TABLE_COLUMNS, cell, peer_cells, torch_peer
from alpharl.sim.layout import obs_dim
from alpharl.sim.params import SimParams
from alpharl.sizes import HIDDEN, N_ACTIONS, N_ATOMS

#: fp32 (non-tensor) peak of an H200 SXM, TFLOP/s.
H200_FP32_PEAK_TFLOPS = 67.0
#: Default observation width: the simulator's with the default [sim] obs_levels.
DEFAULT_OBS_DIM = obs_dim(SimParams().obs_levels)
RESULTS = Path(__file__).resolve().parent / "results"
#: Launches per captured graph when timing one kernel alone.
KERNEL_REPEATS = 10
#: Filled slots of the replay the learning step draws from: at least this many, and 4 minibatches.
MIN_REPLAY = 65536


def update_flops(b: int, m: int, d: int, h: int) -> dict:
    """GEMM FLOPs of one learning update, by phase (2 m n k per product)."""
    rows, grows = 2 * b + 2 * m, b + m
    nq = N_ACTIONS * N_ATOMS
    small = N_ACTIONS + 3  # pi + V + BCE + AUX outputs
    fwd = (rows * (d * h + h * h) + m * (d * h + h * h)          # online + target encoder
           + 2 * m * h * nq + rows * h * N_ATOMS + m * h * (nq + N_ATOMS)  # Q online + target
           + b * h * (N_ACTIONS + 2) + rows * h)                 # pi, BCE, AUX on s_t; V on all rows
    bwd = (2 * m * h * (nq + N_ATOMS) + 2 * b * h * small        # heads: dW and dX
           + 2 * grows * h * h + grows * d * h)                  # encoder: l2 dW + dX, l1 dW
    return {"forward": 2.0 * fwd, "backward": 2.0 * bwd, "total": 2.0 * (fwd + bwd)}


class Timer:
    """CUDA-event timing on a stream; wall clock under the simulator (its events report -1)."""

    def __init__(self, stream):
        from numba import cuda

        self.stream = stream
        self.sim = target.on_simulator()
        self.e0, self.e1 = cuda.event(), cuda.event()

    def time_us(self, fn, iters: int, warmup: int) -> float:
        for _ in range(warmup):
            fn()
        self.stream.synchronize()
        t0 = time.perf_counter()
        self.e0.record(self.stream)
        for _ in range(iters):
            fn()
        self.e1.record(self.stream)
        self.e1.synchronize()
        if self.sim:
            return (time.perf_counter() - t0) * 1e6 / iters
        return self.e0.elapsed_time(self.e1) * 1e3 / iters


def device_us(timer: Timer, fn, iters: int, warmup: int) -> float:
    """µs per call of fn (launches on timer.stream): replayed from a graph of KERNEL_REPEATS calls on the
    GPU, eager on the simulator."""
    return _timed(fn, timer.stream, timer, iters, warmup, False, KERNEL_REPEATS)[0]


def _batches(b: int, m: int, d: int, rng):
    from numba import cuda

    from alpharl.batches import EnvBatch, ReplayBatch

    f = lambda *s: cuda.to_device(rng.standard_normal(s).astype(np.float32))  # noqa: E731
    ints = lambda n: cuda.to_device(rng.integers(0, N_ACTIONS, n).astype(np.int32))  # noqa: E731
    u01 = lambda n: cuda.to_device((rng.uniform(size=n) < 0.5).astype(np.float32))  # noqa: E731
    env = EnvBatch(f(b, d), ints(b), cuda.to_device(np.full(b, -np.log(N_ACTIONS), np.float32)), f(b), u01(b),
                   f(b, d), u01(b), f(b))
    rep = ReplayBatch(f(m, d), ints(m), f(m), u01(m), f(m, d), cuda.to_device(np.ones(m, np.float32)))
    return env, rep


def replay_rows(n: int, d: int, rng) -> tuple:
    """Host transitions (obs_s, action, reward, done, obs_s2) of a filled replay, every field random."""
    obs = rng.standard_normal((2, n, d)).astype(np.float32)
    return (obs[0], rng.integers(0, N_ACTIONS, n).astype(np.int32), rng.standard_normal(n).astype(np.float32),
            (rng.uniform(size=n) < 0.1).astype(np.float32), obs[1])


def _timed(fn, stream, timer, iters: int, warmup: int, eager: bool, repeats: int = 1) -> tuple[float, str]:
    """µs per call of ``fn`` after one call that compiles every kernel it launches (and, for a product the
    update ran on another stream, makes its plan for this one), replayed from a CUDA graph of ``repeats``
    calls unless ``eager`` or on the simulator; and how it ran."""
    fn()
    stream.synchronize()
    if eager or target.on_simulator():
        return timer.time_us(fn, iters, warmup), "eager"
    from alpharl.graph import CapturedGraph

    graph = CapturedGraph(stream, fn if repeats == 1 else lambda: [fn() for _ in range(repeats)])
    try:
        return timer.time_us(graph.replay, iters, warmup) / repeats, f"graph ({graph.n_nodes} nodes)"
    finally:
        graph.close()


def bench_one(b: int, m: int, d: int, h: int, iters: int, warmup: int, eager: bool, replay_n: int = MIN_REPLAY,
              tensor_cores: str = "off", peer: bool = True, fused: str = "off") -> dict:
    """One row: B, M, the update and its products with ``tensor_cores`` (``fused``: the learner's path,
    alpharl.learner); the peer's cells when ``peer``."""
    from numba import cuda

    from alpharl.cuda_kernels.nets import adam as KA
    from alpharl.cuda_kernels.nets import gemm as G
    from alpharl.learner import Learner
    from alpharl.nets import Nets
    from alpharl.sizes import cdiv

    rng = np.random.default_rng(0)
    stream = cuda.stream()
    nets = Nets(d, seed=0, hidden=h)
    learner = Learner(nets, b, m, stream=stream, tensor_cores=tensor_cores, fused=fused)
    env, rep = _batches(b, m, d, rng)
    isv = cuda.to_device(S.bootstrap_vector())
    gate = cuda.to_device(np.ones(1, np.int32))
    timer = Timer(stream)
    ln, L, p, gr = learner.launch, nets.layout.layers, nets.params, nets.grads
    rows, grows = 2 * b + 2 * m, b + m
    nq = N_ACTIONS * N_ATOMS

    def update():
        learner.update(env, rep, isv, gate)

    res = {"B": b, "M": m, "obs_dim": d, "hidden": h, "tensor_cores": tensor_cores, "fused": fused, "mode": None,
           "flops": update_flops(b, m, d, h)}
    res["update_us"], res["mode"] = _timed(update, stream, timer, iters, warmup, eager)

    kernels = {
        "enc.l2 forward": (lambda: ln.forward(gate, learner.h1, rows, L["enc.l2"], p, learner.h, G.ACT_TANH),
                           2.0 * rows * h * h),
        "enc.l2 dX": (lambda: ln.backward_dx(gate, learner.dh, grows, L["enc.l2"], p, learner.dh1, False,
                                             y_tanh=learner.h1), 2.0 * grows * h * h),
        "enc.l2 [dW; db]": (lambda: ln.backward_dw(gate, learner.h1, learner.dh, grows, L["enc.l2"], gr,
                                                   learner.partial_e2), 2.0 * grows * h * h),
        "q.adv forward": (lambda: ln.forward(gate, learner.h[b * h:], 2 * m, L["q.adv"], p, learner.q_adv,
                                             G.ACT_NONE), 2.0 * 2 * m * h * nq),
        "q.adv [dW; db]": (lambda: ln.backward_dw(gate, learner.h[b * h:], learner.d_adv, m, L["q.adv"], gr,
                                                  learner.partial_q), 2.0 * m * h * nq),
    }
    n = nets.layout.n_params

    def guard_adam():
        KA.rl_grad_guard[KA.N_MODULES, KA.GUARD_BLOCK, stream](gate, gr, p, nets.adam_m, nets.adam_v, nets.table, isv,
                                                                nets.adam_state, np.int32(KA.MASK_ALL),
                                                                learner.rel_update)
        KA.rl_adam[cdiv(n, G.ELEMWISE_BLOCK), G.ELEMWISE_BLOCK, stream](
            gate, p, gr, nets.adam_m, nets.adam_v, np.int32(n), nets.table, isv, nets.adam_state)

    res["kernels"] = {}
    for name, (fn, flops) in kernels.items():
        us = device_us(timer, fn, iters, warmup)
        res["kernels"][name] = {"us": us, "tflops": flops / us * 1e-6}
    res["kernels"]["guard + adam"] = {"us": device_us(timer, guard_adam, iters, warmup), "tflops": 0.0}
    res["update_tflops"] = res["flops"]["total"] / res["update_us"] * 1e-6

    # the learning step as the trainer runs it, with the soft update; then the peer on the same work
    from alpharl.replay import PrioritizedReplay

    rows = replay_rows(max(replay_n, 4 * m), d, rng)
    replay = PrioritizedReplay(len(rows[1]), d, m, seed=0, stream=stream)
    replay.insert(*(cuda.to_device(a) for a in rows))

    def learn():
        mb = replay.sample(isv, m, gate)
        out = learner.update(env, mb, isv, gate)
        replay.update_priorities(out.q_priority, m, gate)
        learner.soft_update(isv)

    res["learn_us"], _ = _timed(learn, stream, timer, iters, warmup, eager)
    peer = ("n/a (CUDA simulator)" if target.on_simulator() else torch_peer()) if peer else "n/a (not asked)"
    res |= peer_cells(peer, res["learn_us"], lambda: peer.bench_peer(
        nets.layout, nets.layout.init_params(0), S.bootstrap_vector(), env, rows, m, True, iters, warmup))
    return res


#: The learning step's columns (alpharl bench's): alpharl's learn µs, the peer's eager and graph µs, the ratio.
PEER_COLUMNS = tuple(c for c in TABLE_COLUMNS if c[1] in ("learn_us", *PEER_KEYS))


def _x_off(r: dict, results: list[dict]):
    """The update's µs with tensor cores off over row r's, at r's B and M (None without an off row)."""
    off = [o["update_us"] for o in results if (o["B"], o["M"], o.get("tensor_cores", "off"), o.get("fused", "off")) ==
           (r["B"], r["M"], "off", "off")]
    return off[0] / r["update_us"] if off else None


def _table(results: list[dict], peak: float) -> str:
    lines = ["| B | M | tensor cores | fused | update µs | × off | update TFLOP/s | % fp32 peak | " + " | ".join(c for c, _, _ in PEER_COLUMNS) + " | " +
             " | ".join(f"{k} µs (TFLOP/s, % peak)" for k in results[0]["kernels"]) + " |",
             "|" + "---|" * (8 + len(PEER_COLUMNS) + len(results[0]["kernels"]))]
    for r in results:
        cells = [str(r["B"]), str(r["M"]), r.get("tensor_cores", "off"), r.get("fused", "off"), f"{r['update_us']:.1f}",
                 cell(_x_off(r, results), "{:.2f}"), f"{r['update_tflops']:.2f}",
                 f"{100 * r['update_tflops'] / peak:.1f}%"]
        cells += [cell(r[key], fmt) for _, key, fmt in PEER_COLUMNS]
        cells += [f"{k['us']:.1f} ({k['tflops']:.2f}, {100 * k['tflops'] / peak:.1f}%)" if k["tflops"] else f"{k['us']:.1f}"
                  for k in r["kernels"].values()]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--b", type=int, nargs="+", default=[16, 256, 4096, 16384, 65536], help="env batch sizes B")
    ap.add_argument("--m", type=int, default=0, help="replay minibatch M (default: M = B)")
    ap.add_argument("--obs-dim", type=int, default=DEFAULT_OBS_DIM, help="observation width")
    ap.add_argument("--hidden", type=int, default=HIDDEN, help="encoder width (the package uses HIDDEN)")
    ap.add_argument("--iters", type=int, default=50, help="timed repetitions")
    ap.add_argument("--warmup", type=int, default=5, help="untimed repetitions first")
    ap.add_argument("--eager", action="store_true", help="time plain launches instead of a CUDA graph replay")
    ap.add_argument("--peak", type=float, default=H200_FP32_PEAK_TFLOPS, help="fp32 peak TFLOP/s")
    ap.add_argument("--replay", type=int, default=MIN_REPLAY, help="filled replay slots (at least 4 M)")
    ap.add_argument("--tensor-cores", nargs="+", choices=TG.MODES, default=None,
                    help="modes to measure, a row each (default: off, and on where cuBLASLt can run)")
    ap.add_argument("--fused", nargs="+", choices=("off", "on"), default=["off"],
                    help="the learner's paths to time: the launch sequence (off), the one cooperative launch (on)")
    ap.add_argument("--no-peer", action="store_true", help="skip the PyTorch peer's cells")
    ap.add_argument("--quick", action="store_true",
                    help="tiny smoke run (B=2, M=2, obs 6, hidden 8, replay 64, 1 iteration)")
    ap.add_argument("--out", type=Path, default=RESULTS, help="results folder")
    args = ap.parse_args(argv)
    if args.quick:
        args.b, args.m, args.obs_dim, args.hidden, args.iters, args.warmup, args.replay = [2], 2, 6, 8, 1, 0, 64
    from numba import cuda

    device = "CUDA simulator" if target.on_simulator() else cuda.get_current_device().name
    device = device.decode() if isinstance(device, bytes) else str(device)
    why = TG.unavailable()
    modes = args.tensor_cores or (["off"] if why else ["off", "on"])
    if why and set(modes) - {"off"}:
        print(f"tensor cores: {why}; measuring off only")
        modes = ["off"]
    results = []
    for b, tc, fu in [(b, tc, fu) for b in args.b for tc in modes for fu in args.fused]:
        r = bench_one(b, args.m or b, args.obs_dim, args.hidden, args.iters, args.warmup, args.eager, args.replay,
                      tensor_cores=tc, peer=tc == modes[0] and fu == args.fused[0] and not args.no_peer, fused=fu)
        results.append(r)
        print(f"B={b:6d} M={r['M']:6d} tc {tc:4s} fused {fu:3s} update {r['update_us']:10.1f} µs  {r['update_tflops']:6.2f} TFLOP/s  "
              f"learn {r['learn_us']:.1f} µs  × PyTorch {cell(r['x_pytorch'], '{:.2f}')}  "
              f"[{r['mode']}]  " + "  ".join(f"{k}: {v['us']:.1f} µs {v['tflops']:.2f}" for k, v in r["kernels"].items()),
              flush=True)
    table = _table(results, args.peak)
    print(table)
    stamp = dt.datetime.now().strftime("%Y-%m-%d")
    tag = "" if not target.on_simulator() else "_sim"
    args.out.mkdir(parents=True, exist_ok=True)
    meta = {"date": stamp, "device": device, "peak_tflops": args.peak, "python": platform.python_version(),
            "iters": args.iters, "warmup": args.warmup}
    (args.out / f"learn_{stamp}{tag}.json").write_text(json.dumps({"meta": meta, "results": results}, indent=1))
    md = (f"# Learning-update micro-benchmark, {stamp}\n\nDevice: {device}; fp32 peak {args.peak} TFLOP/s; "
          f"{args.iters} timed repetitions after {args.warmup} warm-up. TFLOP/s count GEMM FLOPs only.\n\n"
          f"{table}\n")
    (args.out / f"learn_{stamp}{tag}.md").write_text(md)
    print(f"wrote {args.out / f'learn_{stamp}{tag}.md'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
