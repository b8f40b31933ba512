#!/usr/bin/env bash
# Asks pip's resolver whether each documented GPU install line resolves (pip install --dry-run, nothing installed),
# in a throwaway virtual environment, and prints one row per line: resolves / does not resolve, with what pip chose.
#
#   bash scripts/gpu/check_install.sh          # needs network access to the package index; a few minutes
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
PYTHON="${PYTHON:-python3}"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
"$PYTHON" -m venv "$work/venv"
"$work/venv/bin/pip" install -q --upgrade pip
pip_dry() { "$work/venv/bin/pip" install --dry-run --ignore-installed --report "$work/report.json" "$@" >"$work/log" 2>&1; }
chose() {  # the versions pip picked for the packages that matter
  "$work/venv/bin/python" - "$work/report.json" <<'PY'
import json, sys
picked = {i["metadata"]["name"].lower(): i["metadata"]["version"] for i in json.load(open(sys.argv[1]))["install"]}
print(", ".join(f"{n} {picked[n]}" for n in ("verl", "torch", "transformers", "vllm", "sglang") if n in picked))
PY
}
row() {  # label, then pip arguments
  local label=$1
  shift
  if pip_dry "$@"; then
    printf '| `%s` | resolves | %s |\n' "$label" "$(chose)"
  else
    printf '| `%s` | does not resolve | %s |\n' "$label" "$(grep -m1 -E 'ERROR|conflict' "$work/log" | cut -c1-160)"
  fi
}
echo "pip $("$work/venv/bin/pip" --version | cut -d' ' -f2), Python $("$work/venv/bin/python" -V | cut -d' ' -f2), $(date -u +%F)"
echo "| install line | result | pip's choice |"
echo "|---|---|---|"
row 'pip install "verl[sglang,verl-core]==0.9.1"' "verl[sglang,verl-core]==0.9.1"
row "pip install -r requirements/gpu-vllm.txt" -r "$ROOT/requirements/gpu-vllm.txt"
row "pip install -r requirements/gpu-sglang.txt" -r "$ROOT/requirements/gpu-sglang.txt"
row "pip install --no-deps -r requirements/gpu-sglang-nodeps.txt" --no-deps -r "$ROOT/requirements/gpu-sglang-nodeps.txt"
row 'pip install "./retrieval[faiss]" ".[retrieval]"' "$ROOT/retrieval[faiss]" "$ROOT[retrieval]"
