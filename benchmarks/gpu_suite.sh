#!/usr/bin/env bash
# The GPU checks in one go: the whole test suite on the GPU, a short training
# run, and the benchmarks. Usage: benchmarks/gpu_suite.sh OUTDIR [quick]
set -uo pipefail
out=${1:-gpu-results}; mode=${2:-full}
mkdir -p "$out"
export ALPHARL_TARGET=gpu PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv > "$out/gpu.txt" 2>&1
echo "== pytest on the GPU"
python3 -m pytest -q -x -p no:cacheprovider tests 2>&1 | tee "$out/pytest_gpu.txt" | tail -25
echo "== train 200 steps b=16"
python3 -m alpharl.cli train --steps 200 --b 16 --run-dir "$out/run_b16" --diag-every 50 --quiet 2>&1 | tail -5
if [ "$mode" = full ]; then
  echo "== bench"
  python3 -m alpharl.cli bench --steps 100 --out "$out/bench.json" 2>&1 | tail -30
fi
