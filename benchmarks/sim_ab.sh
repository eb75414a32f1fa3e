#!/usr/bin/env bash
# Simulator step throughput of several source trees in one run (A/B across commits), each tree's
# own benchmarks/bench_sim.py on the same market and batch sizes.
#
#   benchmarks/sim_ab.sh OUTDIR TREE... [-- BENCH_SIM_ARGS...]
#
# A TREE is a source root, named in the table by its folder's name, e.g. from the repository root:
#   for c in fa69a3a main; do mkdir -p ab/$c && git archive $c | tar -x -C ab/$c; done
#   benchmarks/sim_ab.sh ab_out ab/fa69a3a ab/main .
# Default bench_sim arguments: --b 4096 65536. DATA=zip replays that LOBSTER file in every tree;
# unset, every tree replays the embedded sample (bench_sim's default file is found relative to
# each tree, so trees in different folders would otherwise time different markets).
# ROUNDS=n (default 2) runs the trees n times, interleaved, so drift shows as a spread.
set -uo pipefail
out=$(realpath -m "${1:?usage: sim_ab.sh OUTDIR TREE... [-- BENCH_SIM_ARGS...]}"); shift
trees=()
while [ $# -gt 0 ] && [ "$1" != "--" ]; do trees+=("$(realpath "$1")"); shift; done
[ "${1:-}" = "--" ] && shift
args=("$@"); [ ${#args[@]} -eq 0 ] && args=(--b 4096 65536)
mkdir -p "$out"
export ALPHARL_TARGET=gpu PYTHONUNBUFFERED=1
py=${PYTHON:-python3}
name() { basename "$1"; }
bench() {  # tree outdir extra-args...: one bench_sim run of that tree (its own code, its own folder)
  local t=$1 o=$2; shift 2
  (cd "$t" && PYTHONPATH="$t" "$py" benchmarks/bench_sim.py --data "${DATA:-embedded-sample}" --out "$o" "$@")
}
# Compile every tree's kernels at once, for the same batches (a tree may build its step per launch;
# numba caches them beside each tree's sources), so the timed runs below follow each other closely.
for t in "${trees[@]}"; do
  bench "$t" "$out/warm_$(name "$t")" "${args[@]}" --iters 1 --warmup 0 --graph-steps 1 > "$out/warm_$(name "$t").log" 2>&1 &
done
wait
for r in $(seq 1 "${ROUNDS:-2}"); do
  for t in "${trees[@]}"; do
    echo "== round $r: $(name "$t")"
    bench "$t" "$out/r${r}_$(name "$t")" "${args[@]}" 2>&1 | grep -E '^B=|Error|error' || echo "failed: see above"
  done
done
"$py" - "$out" "${trees[@]}" <<'EOF'
import glob, json, os, sys
out, trees = sys.argv[1], [os.path.basename(t) for t in sys.argv[2:]]
rows = {}
for t in trees:
    for f in sorted(glob.glob(f"{out}/r*_{t}/sim_*.json")):
        d = json.load(open(f))
        for r in d["results"]:
            rows.setdefault((t, r["B"]), []).append(r["events_per_s"])
print(f"market: {d['meta']['market']}; device: {d['meta']['device']['name']}")
print("| tree | B | backtest-events/s (best) | each round | vs first tree |")
print("|---|---:|---:|---|---:|")
for (t, b), v in rows.items():
    ref = max(rows.get((trees[0], b), [float('nan')]))
    print(f"| {t} | {b} | {max(v):.3e} | {' '.join(f'{x:.3e}' for x in v)} | {max(v) / ref - 1:+.1%} |")
EOF
