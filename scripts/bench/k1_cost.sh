#!/usr/bin/env bash
# MR-Search's training step against the K = 1 step at equal sampled tokens: two train_grpo_step.sh runs back to back
# with the same knobs (engine, GPUs, preset, model, data, group size) but K, then their seconds per 1,000 sampled
# tokens by phase and the verdict against 1.05 (python scripts/bench/k1_cost.py).
#
#   TRAIN_BATCH_SIZE=6 PPO_MINI_BATCH_SIZE=6 [K=3] [TOTAL_STEPS=4] bash scripts/bench/k1_cost.sh [trainer overrides...]
#
# Everything else train_grpo_step.sh reads (PRESET, MODEL_PATH, ROLLOUT_ENGINE, N_GPUS_PER_NODE, TRAIN_FILE, ...)
# passes to both runs unchanged, and so do the overrides given here. The K = 1 run's batch: K1_TRAIN_BATCH_SIZE
# (and K1_PPO_MINI_BATCH_SIZE) when set, else `python scripts/bench/k1_batch.py` on the MR-Search run: its
# questions x (model-written tokens / attempt 1's), rounded to the same number of updates a step and to mini-batches
# of a multiple of N_GPUS_PER_NODE x NNODES questions (give N_GPUS_PER_NODE on a multi-GPU machine). Both runs skip
# checkpoints, validation and rollout dumps (not the method's cost); the first step of each is left out (start-up).
# Output: BENCH_DIR (default runs/k1-cost-<date>) with mr_search/ and k1/ run folders and k1_cost.txt, the report.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
PYTHON="${PYTHON:-python}"
K="${K:-3}"
TOTAL_STEPS="${TOTAL_STEPS:-4}"
TRAIN_BATCH_SIZE="${TRAIN_BATCH_SIZE:-}"
PPO_MINI_BATCH_SIZE="${PPO_MINI_BATCH_SIZE:-$TRAIN_BATCH_SIZE}"
K1_TRAIN_BATCH_SIZE="${K1_TRAIN_BATCH_SIZE:-}"
K1_PPO_MINI_BATCH_SIZE="${K1_PPO_MINI_BATCH_SIZE:-$K1_TRAIN_BATCH_SIZE}"
BENCH_DIR="${BENCH_DIR:-$ROOT/runs/k1-cost-$(date +%Y%m%d-%H%M%S)-$$}"
die() { echo "k1_cost.sh: $*" >&2; exit 2; }

whole() { [[ "$1" =~ ^[1-9][0-9]*$ ]]; }
whole "$TRAIN_BATCH_SIZE" || die "TRAIN_BATCH_SIZE='$TRAIN_BATCH_SIZE': give MR-Search's questions a step (a whole" \
  "number >= 1; the K = 1 run's is derived from it), e.g. TRAIN_BATCH_SIZE=6"
whole "$PPO_MINI_BATCH_SIZE" && ((TRAIN_BATCH_SIZE % PPO_MINI_BATCH_SIZE == 0)) \
  || die "PPO_MINI_BATCH_SIZE=$PPO_MINI_BATCH_SIZE must divide TRAIN_BATCH_SIZE=$TRAIN_BATCH_SIZE"
whole "$K" && ((K > 1)) || die "K=$K is not valid; MR-Search's attempts a meta-episode, > 1 (the paper: 3)"
whole "$TOTAL_STEPS" && ((TOTAL_STEPS >= 2)) \
  || die "TOTAL_STEPS=$TOTAL_STEPS is not valid; >= 2 (the first step is start-up; 4 measures 3)"
if [[ -n "$K1_TRAIN_BATCH_SIZE" ]]; then
  whole "$K1_TRAIN_BATCH_SIZE" && whole "$K1_PPO_MINI_BATCH_SIZE" \
    && ((K1_TRAIN_BATCH_SIZE % K1_PPO_MINI_BATCH_SIZE == 0)) \
    || die "K1_TRAIN_BATCH_SIZE=$K1_TRAIN_BATCH_SIZE / K1_PPO_MINI_BATCH_SIZE=$K1_PPO_MINI_BATCH_SIZE: whole numbers," \
      "the mini-batch dividing the batch"
fi
mkdir -p "$BENCH_DIR"

run() {  # NAME ATTEMPTS BATCH MINI [overrides...]
  local name="$1" attempts="$2" batch="$3" mini="$4"
  shift 4
  echo "k1_cost.sh: $name: K = $attempts, $batch questions a step ($mini a PPO update), $TOTAL_STEPS steps" >&2
  RUN_DIR="$BENCH_DIR/$name" ATTEMPTS="$attempts" TRAIN_BATCH_SIZE="$batch" PPO_MINI_BATCH_SIZE="$mini" \
    TOTAL_STEPS="$TOTAL_STEPS" SAVE_FREQ=-1 TEST_FREQ=-1 DUMP_ROLLOUTS=0 \
    bash "$ROOT/train_grpo_step.sh" trainer.val_before_train=False "$@"
}

run mr_search "$K" "$TRAIN_BATCH_SIZE" "$PPO_MINI_BATCH_SIZE" "$@"
if [[ -z "$K1_TRAIN_BATCH_SIZE" ]]; then
  read -r K1_TRAIN_BATCH_SIZE K1_PPO_MINI_BATCH_SIZE < <("$PYTHON" "$ROOT/scripts/bench/k1_batch.py" \
    "$BENCH_DIR/mr_search" --train-batch-size "$TRAIN_BATCH_SIZE" --ppo-mini-batch-size "$PPO_MINI_BATCH_SIZE" \
    --multiple "$((${N_GPUS_PER_NODE:-1} * ${NNODES:-1}))") \
    || die "no K = 1 batch from $BENCH_DIR/mr_search (above); set K1_TRAIN_BATCH_SIZE"
fi
run k1 1 "$K1_TRAIN_BATCH_SIZE" "$K1_PPO_MINI_BATCH_SIZE" "$@"
"$PYTHON" "$ROOT/scripts/bench/k1_cost.py" "$BENCH_DIR/mr_search" "$BENCH_DIR/k1" | tee "$BENCH_DIR/k1_cost.txt"
