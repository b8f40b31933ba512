#!/usr/bin/env bash
# `make compare`: MR-Search (K = 3) against the K = 1 baseline (the mr_search estimator at K = 1: RLOO without std) on
# the embedded world (MR_SEARCH_WORLD=namesake: its opt-in variant), both from the warm-started policy and with the
# same budget of sampled tokens; held-out evaluation with K_eval = 1..6 greedy attempts; report folder with report.md,
# comparison.json, PNG plots and the history of results.
#
#   bash examples/embedded_world/scripts/compare.sh                 # 3 seeds, report in reports/compare_embedded
#   SEEDS=1 STEPS=4 bash examples/embedded_world/scripts/compare.sh # a quicker look
#   WORK_DIR=runs/compare/<name> bash examples/embedded_world/scripts/compare.sh   # continue: finished pieces are skipped
#   DRY_RUN=1 bash examples/embedded_world/scripts/compare.sh       # print the plan and exit
#   MR_SEARCH_WORLD=namesake POLICY=small bash examples/embedded_world/scripts/compare.sh   # the namesake world (its own
#                                                    # cache, service and report folder, reports/compare_namesake) with
#                                                    # the 4-layer policy
#
# Per seed: MR-Search trains STEPS steps; the baseline trains at the same batch for BASELINE_STEPS steps (default
# 4 x STEPS: a K = 1 episode is about a third as long, and a step costs seconds where a relaunch costs minutes), the
# sampled tokens of both are measured from their logged response lengths and the baseline resumes for more steps if
# it is more than TOKEN_TOLERANCE short of the MR-Search budget; every checkpoint is kept, and the baseline checkpoint
# evaluated is the step whose cumulative sampled tokens are closest to the budget.
# Every knob is an environment variable.
set -euo pipefail
# The whole script is one brace group, read before it runs: editing this file while a comparison runs (an hour on a
# small machine) cannot change or break the running one (bash reads a plain script as it goes).
{

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../../.." && pwd)"
PYTHON="${PYTHON:-python}"
export MR_SEARCH_CACHE="${MR_SEARCH_CACHE:-$HOME/.cache/mr_search}"

SEEDS="${SEEDS:-3}"                     # number of seeds; seeds SEED_BASE .. SEED_BASE + SEEDS - 1
SEED_BASE="${SEED_BASE:-1}"
STEPS="${STEPS:-16}"                    # MR-Search training steps (the budget)
ATTEMPTS="${ATTEMPTS:-3}"               # K of MR-Search in training (paper: 3)
BASELINE_STEPS="${BASELINE_STEPS:-}"    # first try of the baseline's steps; empty: 4 x STEPS
TRAIN_BATCH_SIZE="${TRAIN_BATCH_SIZE:-4}"   # questions per step, both runs
GROUP_SIZE="${GROUP_SIZE:-4}"           # trajectories per question, both runs
LR="${LR:-1e-4}"                        # actor learning rate, both runs (every reported comparison's; the embedded
                                       # config's own is 1e-5)
K_EVAL="${K_EVAL:-6}"                   # evaluation attempts (greedy)
MAX_NEW_TOKENS="${MAX_NEW_TOKENS:-48}"  # evaluation: new tokens per model turn (the embedded training's)
MAX_INFO_TOKENS="${MAX_INFO_TOKENS:-256}"  # evaluation: tokens of one <information> block (the training's)
EVAL_RESPONSE_LENGTH="${EVAL_RESPONSE_LENGTH:-}"  # evaluation: meta-episode budget; empty: 1024 per 3 attempts
TOKEN_TOLERANCE="${TOKEN_TOLERANCE:-0.05}"  # baseline tokens within this fraction of the budget: no more steps
MAX_QUESTIONS="${MAX_QUESTIONS:-40}"    # first N held-out questions per data source (fixed before training)
WORK_DIR="${WORK_DIR:-}"                # empty: runs/compare/<date>
MR_SEARCH_WORLD="${MR_SEARCH_WORLD:-default}"  # default | namesake: the embedded world, as every Python step reads
                                       # it (the namesake one is cached under $MR_SEARCH_CACHE/worlds/namesake-v4)
POLICY="${POLICY:-tiny}"                # tiny | small: the tiny policy's shape the warm start trains
# Knobs that are gone: one name per setting, and the namesake world has one version and one warm start.
[[ -z "${WORLD+x}" ]] || { echo "compare.sh: WORLD is now MR_SEARCH_WORLD (WORLD=$WORLD given)" >&2; exit 1; }
for gone in NAMESAKE_VERSION MR_SEARCH_NAMESAKE_VERSION NAMESAKE_RECIPE; do
  [[ -z "${!gone+x}" ]] || { echo "compare.sh: $gone is gone: the namesake world has one version and one warm start" \
    "(MR_SEARCH_WORLD=namesake POLICY=small)" >&2; exit 1; }
done
[[ "$MR_SEARCH_WORLD" =~ ^(default|namesake)$ ]] \
  || { echo "compare.sh: MR_SEARCH_WORLD=$MR_SEARCH_WORLD is not valid; use default or namesake" >&2; exit 1; }
export MR_SEARCH_WORLD
if [[ "$MR_SEARCH_WORLD" == default ]]; then
  REPORT_DIR="${REPORT_DIR:-$ROOT/reports/compare_embedded}"
  RETRIEVER_URL="${RETRIEVER_URL:-http://127.0.0.1:8000}"
else
  # Another world, another report and another port: a default-world service on 8000 must not answer for it.
  REPORT_DIR="${REPORT_DIR:-$ROOT/reports/compare_$MR_SEARCH_WORLD}"
  RETRIEVER_URL="${RETRIEVER_URL:-http://127.0.0.1:8019}"
fi
RETRIEVER_READY_TIMEOUT="${RETRIEVER_READY_TIMEOUT:-900}"
NOTE="${NOTE:-}"                        # one line for the report's history table
WAIT_FOR_IDLE="${WAIT_FOR_IDLE:-0}"      # 1: before each training run, wait until no other verl run is going
OVERLAP_EVAL="${OVERLAP_EVAL:-1}"        # 1: a seed's evaluation (one thread) runs beside the next seed's training
                                       # (which leaves a core of 2 idle); 0: one thing at a time
OUTCOME_FEEDBACK="${OUTCOME_FEEDBACK:-0}"  # 1: the reflection turns say whether the previous answer was right
                                       # (MAGE-style; paper: 0) in the warm start, both trainings and evaluation
WARM_START="${WARM_START:-}"             # an HF model dir to start both from (e.g. a warm start built on a GPU:
                                       # python -m mr_search_embedded.warmstart --device cuda); empty: built here, cached
REFLECTION_QUESTION="${REFLECTION_QUESTION:-}"  # 1: the reflection turns end with the question's line (paper: 0), in
                                       # both trainings and evaluation; empty: as the warm start was trained
ROLLOUT_ENGINE="${ROLLOUT_ENGINE:-}"    # cpu | hf (the same transformers rollout; trainer and rollout on one GPU);
                                       # empty: hf when a GPU is usable, else cpu
DRY_RUN="${DRY_RUN:-0}"

die() { echo "compare.sh: $*" >&2; exit 1; }
whole() { [[ "$2" =~ ^[1-9][0-9]*$ ]] || die "$1=$2 is not valid; use a whole number >= 1"; }
whole SEEDS "$SEEDS"
whole STEPS "$STEPS"
whole ATTEMPTS "$ATTEMPTS"
whole TRAIN_BATCH_SIZE "$TRAIN_BATCH_SIZE"
whole GROUP_SIZE "$GROUP_SIZE"
whole K_EVAL "$K_EVAL"
whole MAX_NEW_TOKENS "$MAX_NEW_TOKENS"
whole MAX_INFO_TOKENS "$MAX_INFO_TOKENS"
EVAL_RESPONSE_LENGTH="${EVAL_RESPONSE_LENGTH:-$(((1024 * K_EVAL + 2) / 3))}"  # the training's 1024 for K = 3
whole EVAL_RESPONSE_LENGTH "$EVAL_RESPONSE_LENGTH"
whole MAX_QUESTIONS "$MAX_QUESTIONS"
[[ "$TOKEN_TOLERANCE" =~ ^0?\.[0-9]+$ ]] || die "TOKEN_TOLERANCE=$TOKEN_TOLERANCE is not valid; use a fraction like 0.05"
[[ "$LR" =~ ^[0-9]*\.?[0-9]+([eE][-+]?[0-9]+)?$ ]] || die "LR=$LR is not valid; use a number like 1e-4"
[[ "$OVERLAP_EVAL" =~ ^[01]$ ]] || die "OVERLAP_EVAL=$OVERLAP_EVAL is not valid; use 1 (default) or 0"
[[ "$OUTCOME_FEEDBACK" =~ ^[01]$ ]] || die "OUTCOME_FEEDBACK=$OUTCOME_FEEDBACK is not valid; use 0 (paper) or 1"
[[ -z "$WARM_START" || -f "$WARM_START/config.json" ]] \
  || die "WARM_START=$WARM_START holds no HF model (config.json); give a warm start's folder or leave it empty"
[[ "$REFLECTION_QUESTION" =~ ^[01]?$ ]] \
  || die "REFLECTION_QUESTION=$REFLECTION_QUESTION is not valid; use 0 (paper), 1, or leave it empty (the warm start's)"
[[ "$ROLLOUT_ENGINE" =~ ^(|cpu|hf)$ ]] || die "ROLLOUT_ENGINE=$ROLLOUT_ENGINE is not valid; use cpu or hf (or leave it empty)"
[[ "$POLICY" =~ ^(tiny|small)$ ]] || die "POLICY=$POLICY is not valid; use tiny or small"
[[ "$SEED_BASE" =~ ^[0-9]+$ ]] || die "SEED_BASE=$SEED_BASE is not valid; use a whole number >= 0"
((ATTEMPTS > 1)) || die "ATTEMPTS=$ATTEMPTS is not valid; MR-Search needs >= 2 attempts (the baseline is K = 1)"
BASELINE_STEPS="${BASELINE_STEPS:-$((4 * STEPS))}"
whole BASELINE_STEPS "$BASELINE_STEPS"
[[ "$RETRIEVER_URL" =~ ^http://(127\.0\.0\.1|localhost):([0-9]+)/?$ ]] \
  || die "RETRIEVER_URL=$RETRIEVER_URL is not valid; use http://127.0.0.1:<port> (a local service, started if silent)"
RETRIEVER_URL="${RETRIEVER_URL%/}"
ROWS=$((TRAIN_BATCH_SIZE * GROUP_SIZE))
WORK_DIR="$(realpath -m "${WORK_DIR:-$ROOT/runs/compare/$(date +%Y%m%d-%H%M%S)}")"
REPORT_DIR="$(realpath -m "$REPORT_DIR")"
feedback_flag=()      # python -m mr_search_embedded.warmstart / mr_search.eval / mr_search_embedded.compare fresh
feedback_override=()  # train_grpo_step.sh (Hydra)
feedback_said="off (paper)"
if [[ "$OUTCOME_FEEDBACK" == 1 ]]; then
  feedback_flag=(--outcome-feedback)
  feedback_override=(mr_search.episode.outcome_feedback=true)
  feedback_said="on (MAGE-style)"
fi
seeds=()
for ((i = 0; i < SEEDS; i++)); do seeds+=($((SEED_BASE + i))); done

echo "compare.sh: seeds ${seeds[*]}; MR-Search K=$ATTEMPTS $STEPS steps, baseline K=1 from $BASELINE_STEPS steps;" \
  "batch $TRAIN_BATCH_SIZE x n=$GROUP_SIZE, lr $LR; eval K_eval=$K_EVAL on $MAX_QUESTIONS questions per source" \
  "($MAX_NEW_TOKENS tokens a turn, $MAX_INFO_TOKENS a passages block, $EVAL_RESPONSE_LENGTH a meta-episode);" \
  "outcome feedback $feedback_said; world $MR_SEARCH_WORLD, policy $POLICY"
echo "  work folder $WORK_DIR, report $REPORT_DIR, retrieval $RETRIEVER_URL"
[[ "$DRY_RUN" == 1 ]] && exit 0

mkdir -p "$WORK_DIR"
# shellcheck source=lib/retrieval.sh
source "$ROOT/scripts/lib/retrieval.sh"
# shellcheck source=lib/background.sh
source "$ROOT/scripts/lib/background.sh"  # the evaluation beside the next training (OVERLAP_EVAL=1)
trap 'background_stop; retrieval_stop_started' EXIT
trap 'exit 143' TERM
trap 'exit 130' INT

# --- shared setup: data, warm start, retrieval (cached after the first run) ---
mapfile -t files < <("$PYTHON" -c \
  'from mr_search_embedded.data import ensure_embedded_parquet; print(*ensure_embedded_parquet(), sep="\n")')
TRAIN_FILE="${files[0]}"
TEST_FILE="${files[1]}"
if [[ -n "$WARM_START" ]]; then
  WARM="$(realpath "$WARM_START")"
  echo "compare.sh: starting from the given warm start $WARM"
else
  echo "compare.sh: preparing the warm-started tiny policy (first run: a few minutes, then cached)"
  WARM="$("$PYTHON" -m mr_search_embedded.warmstart --policy "$POLICY" "${feedback_flag[@]}" | tail -n 1)"
fi
# The reflection turns the warm start was trained with (the namesake world's restate the question): training and
# evaluation use the same, and a REFLECTION_QUESTION that contradicts it stops here.
trained_restating="$("$PYTHON" -c 'import sys
from mr_search_embedded.warmstart.probe import trained_restating
print(int(trained_restating(sys.argv[1])))' "$WARM")"
if [[ -n "$REFLECTION_QUESTION" && "$REFLECTION_QUESTION" != "$trained_restating" ]]; then
  die "REFLECTION_QUESTION=$REFLECTION_QUESTION, but the warm start $WARM was trained with reflection turns that" \
    "$([[ $trained_restating == 1 ]] && echo restate || echo do not restate) the question; leave REFLECTION_QUESTION empty"
fi
restate_flag=()      # python -m mr_search.eval / mr_search_embedded.compare fresh
restate_override=()  # train_grpo_step.sh (Hydra)
if [[ "$trained_restating" == 1 ]]; then
  restate_flag=(--reflection-restates-question)
  restate_override=(mr_search.episode.reflection_restates_question=true)
  feedback_said+="; reflection turns restate the question"
fi
if ! retrieval_healthy "$RETRIEVER_URL"; then
  echo -n "compare.sh: "
  retrieval_start_local "$RETRIEVER_URL" "$WORK_DIR/retrieval.log" "$RETRIEVER_READY_TIMEOUT"
fi
# A service that was already running must serve this world's corpus (another world's would score every search).
"$PYTHON" -m mr_search_embedded.world.serves --url "$RETRIEVER_URL/retrieve" \
  || die "the retrieval service at $RETRIEVER_URL does not serve the $MR_SEARCH_WORLD world; stop it or set RETRIEVER_URL"

# The engine train_grpo_step.sh picks for the embedded preset: stated in the report with the card it ran on.
# shellcheck source=lib/gpu.sh
source "$ROOT/scripts/lib/gpu.sh"
if [[ -z "$ROLLOUT_ENGINE" ]]; then
  if has_gpu; then ROLLOUT_ENGINE=hf; else ROLLOUT_ENGINE=cpu; fi
fi
machine="$(nproc) CPU cores ($(lscpu 2>/dev/null | sed -n 's/^Model name: *//p' | head -n 1)), \
$(awk '/MemTotal/ {printf "%.0f GB RAM", $2 / 1048576}' /proc/meminfo)"
if [[ "$ROLLOUT_ENGINE" == hf ]]; then
  machine+=", training and rollouts on one GPU ($(gpu_name)), evaluation on CPU"
else
  machine+=", no GPU used, shared with other jobs"
fi
knobs=""  # the world and policy knobs, when not the defaults, lead the command in the report
[[ "$MR_SEARCH_WORLD" == default ]] || knobs+="MR_SEARCH_WORLD=$MR_SEARCH_WORLD "
[[ -z "$WARM_START" ]] || knobs+="WARM_START=$WARM "
[[ "$POLICY" == tiny ]] || knobs+="POLICY=$POLICY "
"$PYTHON" - "$WORK_DIR/meta.json" <<PY
import json, sys
meta = {
    "command": "${knobs}LR=$LR ${feedback_override:+OUTCOME_FEEDBACK=1 }SEEDS=$SEEDS STEPS=$STEPS BASELINE_STEPS=$BASELINE_STEPS K_EVAL=$K_EVAL MAX_QUESTIONS=$MAX_QUESTIONS make compare",
    "machine": "$machine",
    "steps": $STEPS,
    "MR-Search": "K=$ATTEMPTS, mr_search loop + estimator (gamma 1, leave-one-out), batch $TRAIN_BATCH_SIZE x n=$GROUP_SIZE",
    "baseline": "K=1, mr_search estimator (leave-one-out, as MR-Search), batch $TRAIN_BATCH_SIZE x n=$GROUP_SIZE, more steps to match tokens",
    "learning rate": "$LR",
    "evaluation": "greedy, K_eval=$K_EVAL, first $MAX_QUESTIONS held-out questions per data source of $TEST_FILE; $MAX_NEW_TOKENS tokens a turn, $MAX_INFO_TOKENS a passages block, $EVAL_RESPONSE_LENGTH a meta-episode; outcome feedback $feedback_said",
    "warm start": "$WARM",
    "world": "$MR_SEARCH_WORLD",
    "policy": "$POLICY",
    "work": "$WORK_DIR",
}
open(sys.argv[1], "w").write(json.dumps(meta, indent=1) + "\n")
PY

# --- training: one verl run at a time ---
train() {  # train <run dir> <attempts> <steps> <seed>
  local run="$1" attempts="$2" steps="$3" seed="$4"
  if compgen -G "$run/checkpoints/global_step_$steps" >/dev/null; then
    echo "compare.sh: $run already has step $steps; skipped"
    return 0
  fi
  if [[ "$WAIT_FOR_IDLE" == 1 ]]; then
    # A shared small machine holds one verl run at a time: wait for any other to finish.
    while pgrep -f "verl.trainer.main_ppo" >/dev/null; do sleep 10; done
  fi
  LR="$LR" PRESET=embedded ROLLOUT_ENGINE="$ROLLOUT_ENGINE" RUN_DIR="$run" ATTEMPTS="$attempts" TOTAL_STEPS="$steps" \
    MODEL_PATH="$WARM" TRAIN_FILE="$TRAIN_FILE" \
    VAL_FILE="$TEST_FILE" TRAIN_BATCH_SIZE="$TRAIN_BATCH_SIZE" GROUP_SIZE="$GROUP_SIZE" SAVE_FREQ=1 TEST_FREQ=-1 \
    RETRIEVER_URL="$RETRIEVER_URL" START_RETRIEVER=0 PYTHON="$PYTHON" \
    bash "$ROOT/train_grpo_step.sh" "data.seed=$seed" "actor_rollout_ref.rollout.seed=$seed" \
    "actor_rollout_ref.actor.data_loader_seed=$seed" "trainer.max_actor_ckpt_to_keep=null" "${feedback_override[@]}" \
    "${restate_override[@]}" \
    >"$run.log" 2>&1 || die "training failed; log: $run.log"
}

match_budget() {  # match_budget <seed dir>: prints "<baseline steps needed> <baseline step to evaluate>"
  "$PYTHON" -m mr_search_embedded.compare budget --mr "$1/mr_search" --mr-rows "$ROWS" --baseline "$1/baseline" \
    --baseline-rows "$ROWS" --out "$1/budget.json" --tolerance "$TOKEN_TOLERANCE"
}

evaluate() {  # evaluate <out dir> LABEL=PATH...
  local out="$1"
  shift
  local models=()
  for m in "$@"; do models+=(--model "$m"); done
  OMP_NUM_THREADS=1 "$PYTHON" -m mr_search.eval "${models[@]}" --data "$TEST_FILE" --out "$out.tmp" \
    --retriever-url "$RETRIEVER_URL/retrieve" --attempts "$K_EVAL" --max-questions "$MAX_QUESTIONS" --no-progress \
    --max-new-tokens "$MAX_NEW_TOKENS" --max-information-tokens "$MAX_INFO_TOKENS" \
    --response-length "$EVAL_RESPONSE_LENGTH" "${feedback_flag[@]}" "${restate_flag[@]}" \
    >"$out.log" 2>&1 || die "evaluation failed; log: $out.log"
  rm -rf "$out"
  mv "$out.tmp" "$out"
}

# An evaluation is kept only if it evaluated these models with these K_EVAL, MAX_QUESTIONS, token limits and
# OUTCOME_FEEDBACK (a continued run may change them).
evaluated() {  # evaluated <out dir> LABEL=PATH...: true if <out dir> holds that evaluation
  local out="$1"
  shift
  "$PYTHON" -m mr_search_embedded.compare fresh --results "$out/results.json" --models "$@" \
    --k-eval "$K_EVAL" --max-questions "$MAX_QUESTIONS" --max-new-tokens "$MAX_NEW_TOKENS" \
    --max-information-tokens "$MAX_INFO_TOKENS" --response-length "$EVAL_RESPONSE_LENGTH" "${feedback_flag[@]}" \
    "${restate_flag[@]}"
}

finish_evaluation() {  # waits for the evaluation in the background, if any; stops on its failure
  [[ -n "$BACKGROUND_PID" ]] || return 0
  background_finish || die "$BACKGROUND_WHAT failed (its log is named above)"
  echo "compare.sh: $BACKGROUND_WHAT done ($(date -u +%H:%M:%S) UTC)"
}

start_evaluation() {  # start_evaluation <what> <out dir> LABEL=PATH...: after the one in flight, in the
  local what="$1"       # background with OVERLAP_EVAL=1
  shift
  finish_evaluation
  echo "compare.sh: $what ($(date -u +%H:%M:%S) UTC)"
  if [[ "$OVERLAP_EVAL" == 1 ]]; then
    background_start "$what" evaluate "$@"
  else
    evaluate "$@"
  fi
}

if ! evaluated "$WORK_DIR/warm_eval" "warm_start=$WARM"; then
  start_evaluation "evaluating the warm start" "$WORK_DIR/warm_eval" "warm_start=$WARM"
fi

for seed in "${seeds[@]}"; do
  dir="$WORK_DIR/seed_$seed"
  mkdir -p "$dir"
  echo "compare.sh: seed $seed: MR-Search K=$ATTEMPTS, $STEPS steps ($(date -u +%H:%M:%S) UTC)"
  train "$dir/mr_search" "$ATTEMPTS" "$STEPS" "$seed"
  echo "compare.sh: seed $seed: baseline K=1, $BASELINE_STEPS steps ($(date -u +%H:%M:%S) UTC)"
  train "$dir/baseline" 1 "$BASELINE_STEPS" "$seed"
  read -r needed step < <(match_budget "$dir")
  if ((needed > BASELINE_STEPS)); then
    echo "compare.sh: seed $seed: baseline short of the token budget; resuming to $needed steps"
    train "$dir/baseline" 1 "$needed" "$seed"
    read -r needed step < <(match_budget "$dir")
  fi
  pair=("mr_search=$dir/mr_search/checkpoints/global_step_$STEPS" "baseline=$dir/baseline/checkpoints/global_step_$step")
  if evaluated "$dir/eval" "${pair[@]}"; then
    echo "compare.sh: seed $seed: $dir/eval already evaluated MR-Search step $STEPS and baseline step $step; skipped"
  else
    start_evaluation "seed $seed: evaluating MR-Search step $STEPS and baseline step $step" "$dir/eval" "${pair[@]}"
  fi
  echo "compare.sh: seed $seed trained ($(date -u +%H:%M:%S) UTC)"
done
finish_evaluation

report=(--work "$WORK_DIR" --out "$REPORT_DIR" --mr-rows "$ROWS" --baseline-rows "$ROWS" --gain-attempt "$ATTEMPTS")
[[ -z "$NOTE" ]] || report+=(--note "$NOTE")
"$PYTHON" -m mr_search_embedded.compare report "${report[@]}"
echo "compare.sh: done in ${SECONDS}s. Report: $REPORT_DIR/report.md"
exit
}
