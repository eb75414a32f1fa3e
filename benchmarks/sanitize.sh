#!/usr/bin/env bash
# compute-sanitizer on the integrated smoke: `alpharl train --steps 3 --b 128` on
# the embedded data, eager launches (every kernel checked at its own launch) and
# once more with the CUDA graph. Writes each tool's summary to OUTDIR.
set -uo pipefail
out=${1:-sanitizer-results}
mkdir -p "$out"
export ALPHARL_TARGET=gpu PYTHONUNBUFFERED=1
run="python3 -m alpharl.cli train --steps 3 --b 128 --backend cuda --diag-every 1 --quiet"
for tool in memcheck racecheck initcheck synccheck; do
  for g in --no-graph --graph; do
    d=$(mktemp -d)
    echo "== $tool $g"
    compute-sanitizer --tool "$tool" --print-limit 20 $run $g --run-dir "$d/run" > "$out/$tool${g}.log" 2>&1
    echo "exit $?" >> "$out/$tool${g}.log"
    grep -E "ERROR SUMMARY|RACECHECK SUMMARY|exit " "$out/$tool${g}.log" | tail -3
  done
done
