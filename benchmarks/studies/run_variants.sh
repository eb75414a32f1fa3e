#!/usr/bin/env bash
# Held-out study of chosen variants with the baseline study's protocol (run_baseline.sh): every
# LOBSTER file of DATA as a dataset, 5 seeds, 50,000 steps at B = 16, trained on 0:0.8 and
# evaluated on 0.8:1 beside the baselines; training on the GPU, evaluation on the CPU cores.
# Resumable: run it again to finish a cut-off study. Compare studies with ablation.py.
# Usage: benchmarks/studies/run_variants.sh DATA OUT JOBS NAME=FILE.toml [NAME=FILE.toml ...]
#   e.g. benchmarks/studies/run_variants.sh runs/lobster runs/ablation 10 \
#          signals_horizon_default=benchmarks/studies/signals_horizon_default.toml \
#          signals_horizon_risk=benchmarks/studies/signals_horizon_risk.toml
set -uo pipefail
data=${1:?DATA folder}; out=${2:?OUT folder}; jobs=${3:?JOBS}; shift 3
[ $# -ge 1 ] || { echo "run_variants.sh: name at least one NAME=FILE.toml variant" >&2; exit 2; }
variants=()
for v in "$@"; do variants+=(--variant "$v"); done
python3 -m alpharl.cli study --data "$data" --each-file --seeds 5 --steps 50000 --b 16 \
  --backend cuda --eval-backend numpy --train-window 0:0.8 "${variants[@]}" --jobs "$jobs" --out "$out"
