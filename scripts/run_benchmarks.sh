#!/usr/bin/env bash
# Runs every benchmark under scripts/bench/ in turn; each prints ratios against a baseline
# measured in the same run. BENCH_FILTER=substring runs a subset.
set -euo pipefail
cd "$(dirname "$0")/.."
filter="${BENCH_FILTER:-}"
status=0
for bench in scripts/bench/bench_*.py; do
  [[ -n "$filter" && "$bench" != *"$filter"* ]] && continue
  echo "=== $bench ==="
  python "$bench" || status=1
done
exit "$status"
