#!/usr/bin/env bash
# Evaluates a policy through the rollout engine: verl's own validation pass (greedy, n = 1, every attempt scored) at
# K_EVAL attempts, on GPUs with SGLang or vLLM (or the CPU backend), through train_grpo_step.sh's knobs:
#
#   MODEL_PATH=runs/<run>/checkpoints/global_step_300/actor/huggingface VAL_FILE=/data/mr_search/test.parquet \
#     ROLLOUT_ENGINE=vllm K_EVAL=6 bash scripts/eval_engine.sh
#   bash scripts/eval_engine.sh                   # no GPU: the embedded policy on the embedded held-out questions
#
# EM per attempt per data source lands in the run folder's metrics (val-aux/<source>/em_at_<k>/mean@1) and
# on the console. Extra arguments are Hydra overrides. K_EVAL may differ from the K the policy was trained with.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
K_EVAL="${K_EVAL:-3}"                          # attempts per meta-episode at evaluation (paper: 3; 6+ shows more)
TOKENS_PER_ATTEMPT="${TOKENS_PER_ATTEMPT:-}"   # response budget per attempt (paper: 2731 = 8192 / 3); empty: the
                                               # preset's data.max_response_length for all K_EVAL attempts
MAX_SAMPLES="${MAX_SAMPLES:--1}"               # questions evaluated (data.val_max_samples); -1: all of VAL_FILE
[[ "$K_EVAL" =~ ^[1-9][0-9]*$ ]] || { echo "eval_engine.sh: K_EVAL=$K_EVAL is not a whole number >= 1" >&2; exit 2; }
[[ "$MAX_SAMPLES" =~ ^(-1|[1-9][0-9]*)$ ]] \
  || { echo "eval_engine.sh: MAX_SAMPLES=$MAX_SAMPLES is not -1 (all) or a whole number >= 1" >&2; exit 2; }
export RUN_DIR="${RUN_DIR:-$ROOT/runs/eval-k$K_EVAL-$(date +%Y%m%d-%H%M%S)}"
overrides=(trainer.val_only=True trainer.val_before_train=True "data.val_max_samples=$MAX_SAMPLES")
if [[ -n "$TOKENS_PER_ATTEMPT" ]]; then
  [[ "$TOKENS_PER_ATTEMPT" =~ ^[1-9][0-9]*$ ]] \
    || { echo "eval_engine.sh: TOKENS_PER_ATTEMPT=$TOKENS_PER_ATTEMPT is not a whole number >= 1" >&2; exit 2; }
  overrides+=("data.max_response_length=$((K_EVAL * TOKENS_PER_ATTEMPT))")
fi
ATTEMPTS="$K_EVAL" ADV_ESTIMATOR="${ADV_ESTIMATOR:-mr_search}" bash "$ROOT/train_grpo_step.sh" "${overrides[@]}" "$@"
