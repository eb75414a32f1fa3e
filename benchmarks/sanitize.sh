#!/usr/bin/env bash
# compute-sanitizer on the integrated smoke: `alpharl train --steps 17 --b 128` on
# the embedded data. Every tool checks eager launches (each kernel at its own
# launch); memcheck also checks the CUDA-graph replay. Writes each tool's log
# to OUTDIR and prints the summaries. SANITIZE_ARGS: more train options (e.g. "--fused-update on").
set -uo pipefail
out=${1:-sanitizer-results}
mkdir -p "$out"
export ALPHARL_TARGET=gpu PYTHONUNBUFFERED=1
# 17 steps: the default rollout (T = 16) completes, so its GAE update runs too.
run="python3 -m alpharl.cli train --steps 17 --b 128 --backend cuda --diag-every 1 --quiet ${SANITIZE_ARGS:-}"
$run --run-dir "$(mktemp -d)/warm" > /dev/null 2>&1   # fill the kernel cache outside the sanitizer
for spec in memcheck:--no-graph memcheck:--graph racecheck:--no-graph initcheck:--no-graph synccheck:--no-graph; do
  tool=${spec%%:*}; g=${spec#*:}
  log="$out/${tool}${g}.log"
  echo "== compute-sanitizer --tool $tool  $run $g" | tee "$log"
  compute-sanitizer --tool "$tool" --print-limit 20 $run $g --run-dir "$(mktemp -d)/run" >> "$log" 2>&1
  echo "exit $?" >> "$log"
  grep -E "ERROR SUMMARY|RACECHECK SUMMARY|exit " "$log" | tail -3
done
