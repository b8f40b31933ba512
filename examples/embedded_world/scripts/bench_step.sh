#!/usr/bin/env bash
# The lab's training step on one GPU: the settings the lab trains with (the fast profile) against the embedded
# preset's own (baseline) in the same run, then the fast profile with several runs side by side on the one card.
# Prints the step split of each run and the ratios (python -m mr_search_embedded.gpu_step summarize OUT_DIR).
#
#   ROLLOUT_ENGINE=sglang bash examples/embedded_world/scripts/bench_step.sh OUT_DIR
#   PROFILES=fast SHARE="2 4" bash examples/embedded_world/scripts/bench_step.sh OUT_DIR   # the sharing runs only
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../../.." && pwd)"
OUT="$(realpath -m "${1:?usage: bench_step.sh OUT_DIR}")"
PYTHON="${PYTHON:-python}"
# --- the step measured: the lab's shape (64 questions x 5, mini-batch 32, K = 3) ---
ROLLOUT_ENGINE="${ROLLOUT_ENGINE:-sglang}"     # sglang | vllm
TOTAL_STEPS="${TOTAL_STEPS:-4}"                # steps a run; the first (warm-up) is not timed
TRAIN_BATCH_SIZE="${TRAIN_BATCH_SIZE:-64}"
GROUP_SIZE="${GROUP_SIZE:-5}"
PPO_MINI_BATCH_SIZE="${PPO_MINI_BATCH_SIZE:-32}"
ATTEMPTS="${ATTEMPTS:-3}"
# --- what runs ---
PROFILES="${PROFILES:-baseline fast}"          # one run each, one after another
SHARE="${SHARE:-2 4}"                          # then N fast runs side by side, for each N
GPU_MEMORY_UTILIZATION="${GPU_MEMORY_UTILIZATION:-0.1}"  # each engine's share of the card: room for SHARE runs
export ENFORCE_EAGER="${ENFORCE_EAGER:-1}" SGLANG_MEMORY_SAVER="${SGLANG_MEMORY_SAVER:-0}"
export RETRIEVER_TYPE="${RETRIEVER_TYPE:-bm25}" PYTHON GPU_MEMORY_UTILIZATION

die() { echo "bench_step.sh: $*" >&2; exit 1; }
[[ "$ROLLOUT_ENGINE" =~ ^(sglang|vllm)$ ]] || die "ROLLOUT_ENGINE=$ROLLOUT_ENGINE is not valid; use sglang or vllm"
for n in $SHARE; do [[ "$n" =~ ^[2-9]$ ]] || die "SHARE=$SHARE is not valid; use runs per card from 2 to 9"; done
for p in $PROFILES; do "$PYTHON" -m mr_search_embedded.gpu_step overrides "$p" >/dev/null || die "PROFILES=$PROFILES"; done

# shellcheck source=../../../scripts/lib/retrieval.sh
source "$ROOT/scripts/lib/retrieval.sh"
trap retrieval_stop_started EXIT
mkdir -p "$OUT"
RETRIEVER_URL="${RETRIEVER_URL:-http://127.0.0.1:$(retrieval_free_port)}"
retrieval_healthy "$RETRIEVER_URL" || retrieval_start_local "$RETRIEVER_URL" "$OUT/retrieval.log" 900
mapfile -t files < <("$PYTHON" -m mr_search_embedded.splits train)
TRAIN_FILE="${files[0]}"

launch() {  # launch RUN_DIR PROFILE: one training run of the lab's shape, its console in RUN_DIR.log
  local run="$1" extra
  mapfile -t extra < <("$PYTHON" -m mr_search_embedded.gpu_step overrides "$2")
  PRESET=embedded ROLLOUT_ENGINE="$ROLLOUT_ENGINE" RUN_DIR="$run" TOTAL_STEPS="$TOTAL_STEPS" SAVE_FREQ=-1 \
    TEST_FREQ=-1 TRAIN_FILE="$TRAIN_FILE" VAL_FILE="$TRAIN_FILE" TRAIN_BATCH_SIZE="$TRAIN_BATCH_SIZE" \
    GROUP_SIZE="$GROUP_SIZE" PPO_MINI_BATCH_SIZE="$PPO_MINI_BATCH_SIZE" ATTEMPTS="$ATTEMPTS" \
    RETRIEVER_URL="$RETRIEVER_URL" START_RETRIEVER=0 bash "$ROOT/train_grpo_step.sh" "${extra[@]}" \
    >"$run.log" 2>&1
}

for profile in $PROFILES; do
  echo "bench_step.sh: $profile alone ($(date -u +%T) UTC)"
  launch "$OUT/$profile" "$profile" || die "the $profile run failed; log: $OUT/$profile.log"
done
for n in $SHARE; do
  echo "bench_step.sh: $n fast runs side by side ($(date -u +%T) UTC)"
  pids=()
  for ((i = 1; i <= n; i++)); do
    mkdir -p "$OUT/share$n"
    launch "$OUT/share$n/$i" fast &
    pids+=($!)
  done
  for pid in "${pids[@]}"; do wait "$pid" || die "a run of share$n failed; logs: $OUT/share$n/*.log"; done
done
"$PYTHON" -m mr_search_embedded.gpu_step summarize "$OUT" | tee "$OUT/step_bench.md"
