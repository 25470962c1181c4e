#!/usr/bin/env bash
# A/A check of the gate: N+1 runs of the same commit; the first is the baseline, each
# later run is gated against it. Every "gate FAILED" here is a false alarm.
#   benchmarks/aa_gate.sh [N] [SCENARIO] [BASELINE_RUN]   (default 5, scenarios/quick.toml, a new run)
set -euo pipefail
cd "$(dirname "$0")/.."
n=${1:-5}
scenario=${2:-scenarios/quick.toml}
ob() { .venv/bin/python -m harness.cli "$@"; }
out=results/aa-$(date -u +%Y%m%dT%H%M%SZ)
mkdir -p "$out"
run_dir() { ob run "$scenario" -q > "$out/run.txt"; head -1 "$out/run.txt"; }
base_run=${3:-$(run_dir)}
ob baseline "$base_run" -o "$out/baseline.json" >/dev/null
echo "baseline: $base_run"
alarms=0
for i in $(seq 1 "$n"); do
  run=$(run_dir)
  if ob gate "$run" --baseline "$out/baseline.json" > "$out/gate-$i.txt"; then verdict=pass; else verdict=FAIL; alarms=$((alarms + 1)); fi
  echo "A/A $i: $run: $verdict ($(head -1 "$out/gate-$i.txt"))"
done
echo "false alarms: $alarms of $n"
