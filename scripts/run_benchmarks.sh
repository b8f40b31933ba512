#!/usr/bin/env bash
# Runs every benchmark in turn: the plugin's (scripts/bench/), the retrieval service's (retrieval/benchmarks/) and the
# embedded-world example's (examples/embedded_world/benchmarks/); each prints ratios against a baseline measured in
# the same run. BENCH_FILTER=substring runs a subset. GPU-only benchmarks say so and skip on a CPU machine.
set -euo pipefail
cd "$(dirname "$0")/.."
filter="${BENCH_FILTER:-}"
status=0
for bench in scripts/bench/bench_*.py retrieval/benchmarks/bench_*.py examples/embedded_world/benchmarks/bench_*.py; do
  [[ -n "$filter" && "$bench" != *"$filter"* ]] && continue
  echo "=== $bench ==="
  python "$bench" || status=1
done
exit "$status"
