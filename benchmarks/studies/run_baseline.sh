#!/usr/bin/env bash
# The baseline study of held-out learning on one GPU: every LOBSTER file of DATA as a dataset,
# 5 seeds, 50,000 steps at B = 16, trained on 0:0.8 of each file and evaluated on 0.8:1 beside
# the baselines, with both fee settings. Training runs on the GPU, evaluation on the CPU cores
# (numpy backend) while the next trials train. Resumable: run it again to finish a cut-off study.
# Usage: benchmarks/studies/run_baseline.sh DATA OUT [JOBS] [extra study options...]
set -uo pipefail
data=${1:?DATA folder}; out=${2:?OUT folder}; jobs=${3:-8}; shift 3 || shift $#
here=$(cd "$(dirname "$0")" && pwd)
python3 -m alpharl.cli study --data "$data" --each-file --seeds 5 --steps 50000 --b 16 \
  --backend cuda --eval-backend numpy --train-window 0:0.8 \
  --variant "default=$here/default.toml" --variant "per_value=$here/per_value.toml" \
  --jobs "$jobs" --out "$out" "$@"
