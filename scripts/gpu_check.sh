#!/usr/bin/env bash
# Proves the GPU path on this node: two real MR-Search training steps with your rollout engine on the embedded world,
# a resume from the saved state and one more step, then the checks of a run as a table (mr_search/ops/run_checks.py):
#
#   bash scripts/gpu_check.sh                       # SGLang on one GPU (make gpu-check)
#   ROLLOUT_ENGINE=vllm bash scripts/gpu_check.sh   # vLLM
#   ROLLOUT_ENGINE=sglang N_GPUS_PER_NODE=2 TOTAL_STEPS=4 bash scripts/gpu_check.sh
#   RESUME=restart bash scripts/gpu_check.sh        # the resume as a second launch (a new process) instead
#
# The resume runs inside the one launch (RESUME=launch, the default): after the last step the trainer rewinds to the
# checkpoint before it, then resumes from the last one through verl's own resume path and trains one more step
# (mr_search.trainer.resume_steps=1, mr_search/ops/resume_check.py); the checks compare the step counter, the
# weights, the optimizer and the dataloader position with the checkpoints. A second launch would pay Ray, the
# workers and the engine's start again (minutes) for the same load. Its wall time and phases: docs/gpu.md (SGLang on
# one H200; vLLM not measured in one launch). SGLang is the default: the paper's engine, the paper preset's default
# and the engine of the project's offline set.
#
# The embedded world's BM25 service is started on a free port unless RETRIEVER_URL names one: two checks side by side
# on one host (CUDA_VISIBLE_DEVICES=0 and =1) do not collide (ports and run folders of their own, cache builds under a
# lock). Extra arguments are Hydra overrides for both launches. Exit status 1 when a check fails; the cause and its
# fix are printed below the table. DRY_RUN=1 prints the two launches' trainer commands and runs nothing.
#
# The actor trains without torch.compile (ACTOR_TORCH_COMPILE=0, the default here; 1 keeps verl's default): in verl
# 0.9.1 it compiles only the entropy from the logits (actor_rollout_ref.actor.fsdp_config.use_torch_compile), which
# no check reads (the log-probs the checks compare are computed without it), and on a fresh machine the compile cost
# seconds of step 1.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
PYTHON="${PYTHON:-python}"
ROLLOUT_ENGINE="${ROLLOUT_ENGINE:-sglang}"    # sglang | vllm (hf: the transformers rollout, one GPU); docs/gpu.md
                                              # says which ran where (both on H100s: vLLM on 1, 2, 4 GPUs, SGLang on 1, 2)
N_GPUS_PER_NODE="${N_GPUS_PER_NODE:-1}"
if [[ -n "${STEPS:-}" ]]; then  # the training script's name for this knob is TOTAL_STEPS: one name across the scripts
  echo "gpu_check.sh: STEPS is not a knob; use TOTAL_STEPS=$STEPS (the steps of the first launch; the restart adds one)" >&2
  exit 2
fi
TOTAL_STEPS="${TOTAL_STEPS:-2}"               # steps before the resume; the resume adds one
RESUME="${RESUME:-launch}"                    # launch: the resume inside the one launch; restart: a second launch
case "$RESUME" in
  launch) [[ "$TOTAL_STEPS" =~ ^[0-9]+$ ]] && ((TOTAL_STEPS >= 2)) || { echo "gpu_check.sh: TOTAL_STEPS=$TOTAL_STEPS:" \
    "the resume inside one launch rewinds to the checkpoint before the last one; use TOTAL_STEPS >= 2" >&2; exit 2; } ;;
  restart) ;;
  *) echo "gpu_check.sh: RESUME=$RESUME is not valid; use launch (one launch) or restart (a second launch)" >&2; exit 2 ;;
esac
TRAIN_BATCH_SIZE="${TRAIN_BATCH_SIZE:-8}"     # 8 questions x 4: a step without any unequal group is ~0.02% likely
LR="${LR:-1e-4}"                              # the compare's rate: large enough that an update the engine never
                                              # received would show in the log-prob agreement (the embedded 1e-5 barely)
RUN_DIR="${RUN_DIR:-$ROOT/runs/gpu-check-$ROLLOUT_ENGINE-${N_GPUS_PER_NODE}gpu-$(date +%Y%m%d-%H%M%S)-$$}"
export PYTHON
# What the check needs and no more (docs/gpu.md, `make gpu-check`): a KV cache sized for the tiny policy (a few GB,
# not the paper's 0.6 of the card), the engine without compile or CUDA graphs (ENFORCE_EAGER=1: their start-up costs
# more than two steps gain; with SGLang no piecewise graphs either), BM25 retrieval (no encoder; its index builds in
# seconds) and, for the tiny policy, SGLang without its memory saver (the saver's `auto` estimate imports transformers
# to say "off" for a 0.5M-parameter policy). Each can be overridden.
export GPU_MEMORY_UTILIZATION="${GPU_MEMORY_UTILIZATION:-0.15}" ENFORCE_EAGER="${ENFORCE_EAGER:-1}"
[[ -n "${MODEL_PATH:-}" ]] || export SGLANG_MEMORY_SAVER="${SGLANG_MEMORY_SAVER:-0}"
export RETRIEVER_TYPE="${RETRIEVER_TYPE:-bm25}"
case "${ACTOR_TORCH_COMPILE:-0}" in
  0) actor_overrides=("actor_rollout_ref.actor.fsdp_config.use_torch_compile=False") ;;
  1) actor_overrides=() ;;
  *) echo "gpu_check.sh: ACTOR_TORCH_COMPILE=$ACTOR_TORCH_COMPILE is not valid; use 0 (the actor's entropy" \
    "without torch.compile, the check's default) or 1 (verl's default)" >&2; exit 2 ;;
esac
DRY_RUN="${DRY_RUN:-0}"
DRY_LAUNCHES=0

# shellcheck source=scripts/lib/gpu.sh
source "$ROOT/scripts/lib/gpu.sh"

fail() {  # cause, fix
  printf '| check | result | seen |\n|---|---|---|\n| preflight | FAIL | %s |\ncause: %s\nfix:   %s\n' "$1" "$1" "$2"
  exit 1
}
[[ "$DRY_RUN" == 1 ]] || has_gpu \
  || fail "no usable GPU (nvidia-smi lists none, or torch.cuda.is_available() is False in $PYTHON)" \
  "run on a GPU node with the NVIDIA driver, in the environment that has torch with CUDA"
case "$ROLLOUT_ENGINE" in
  sglang|vllm) [[ "$DRY_RUN" == 1 ]] || has_module "$ROLLOUT_ENGINE" \
    || fail "the $ROLLOUT_ENGINE package is not installed in $PYTHON" \
    "install requirements/gpu-$ROLLOUT_ENGINE.txt (docs/gpu.md: online and offline installs), or check the engine you have: ROLLOUT_ENGINE=$([[ $ROLLOUT_ENGINE == sglang ]] && echo vllm || echo sglang) make gpu-check" ;;
  hf) ;;
  *) fail "ROLLOUT_ENGINE=$ROLLOUT_ENGINE is not an engine" "use sglang, vllm or hf" ;;
esac
for module in mr_search_retrieval mr_search_embedded; do  # the retrieval service, the embedded world
  [[ "$DRY_RUN" == 1 ]] || has_module "$module" || fail "$module is not installed in $PYTHON" \
    "install the project's wheels (docs/gpu.md, offline installs) or pip install -e ./retrieval -e ./examples/embedded_world"
done

[[ "$DRY_RUN" == 1 ]] || mkdir -p "$RUN_DIR"
export MR_SEARCH_TRACE_DIR="$RUN_DIR/trace"
# Both launches share one retrieval service and one preparation: the service starts (on a free port unless
# RETRIEVER_URL is given) while the plugin is checked and the embedded data and the tiny policy are prepared (built
# once, cached in $MR_SEARCH_CACHE; a first build says what it costs before it starts).
die() { fail "$*" "see the log named above"; }
# shellcheck source=scripts/lib/retrieval.sh
source "$ROOT/scripts/lib/retrieval.sh"
cleanup() {  # the services and processes this script started, by their ids
  engine_warm_stop
  retrieval_stop_started
}
trap cleanup EXIT
trap 'exit 143' TERM
trap 'exit 130' INT
retrieval_timeout="${RETRIEVER_READY_TIMEOUT:-900}"
if [[ -z "${RETRIEVER_URL:-}" ]]; then
  RETRIEVER_URL="http://127.0.0.1:$(retrieval_free_port)"
  if [[ "$DRY_RUN" != 1 ]]; then
    echo -n "gpu_check.sh: $RETRIEVER_TYPE: "
    RETRIEVER_DEVICE="${RETRIEVER_DEVICE:-cpu}" retrieval_launch "$RETRIEVER_URL" "$RUN_DIR/retrieval.log" "$retrieval_timeout"
  fi
fi
plugin_pid=""  # verl's import takes seconds: the plugin is checked while the data and the policy are prepared
[[ "$DRY_RUN" == 1 ]] || {
  "$PYTHON" -c 'import verl; from verl.trainer.ppo.core_algos import ADV_ESTIMATOR_REGISTRY as r; assert "mr_search" in r' \
    2>/dev/null &
  plugin_pid=$!
}
if [[ "$DRY_RUN" != 1 && ( -z "${MODEL_PATH:-}" || -z "${TRAIN_FILE:-}" || -z "${VAL_FILE:-}" ) ]]; then
  mapfile -t prepared < <("$PYTHON" -m mr_search_embedded.prepare train dev policy)
  ((${#prepared[@]} >= 3)) || fail "preparing the embedded data or the tiny policy failed (its error is above)" \
    "run python -m mr_search_embedded.prepare train dev policy to see it alone"
  export TRAIN_FILE="${TRAIN_FILE:-${prepared[0]}}" VAL_FILE="${VAL_FILE:-${prepared[1]}}"
  export MODEL_PATH="${MODEL_PATH:-${prepared[-1]}}"
fi
# SGLang's first-use kernels, built beside the launch (scripts/lib/gpu.sh says why). ENGINE_WARM=0 leaves it out.
if [[ "$ROLLOUT_ENGINE" == sglang && "${ENGINE_WARM:-1}" != 0 ]]; then
  if [[ "$DRY_RUN" == 1 ]]; then
    echo "gpu_check.sh: engine warm: $PYTHON -m mr_search.ops.engine_warm --model ${MODEL_PATH:-<the prepared policy>}"
  else
    echo "gpu_check.sh: building SGLang's first-use kernels in the background (log: $RUN_DIR/engine_warm.log)"
    engine_warm_start "$MODEL_PATH" "$RUN_DIR/engine_warm.log"
  fi
fi
[[ -z "$plugin_pid" ]] || wait "$plugin_pid" \
  || fail "the mr_search plugin is not registered in verl" "pip install -e . (in this environment)"
[[ -z "$RETRIEVAL_STARTED_PID" ]] || retrieval_wait_free "$RUN_DIR/retrieval.log" "$retrieval_timeout"
export RETRIEVER_URL
launch() {  # total steps, then Hydra overrides
  local total=$1
  shift
  PRESET=embedded ROLLOUT_ENGINE="$ROLLOUT_ENGINE" N_GPUS_PER_NODE="$N_GPUS_PER_NODE" RUN_DIR="$RUN_DIR" \
    TOTAL_STEPS="$total" SAVE_FREQ=1 TRAIN_BATCH_SIZE="$TRAIN_BATCH_SIZE" LR="$LR" bash "$ROOT/train_grpo_step.sh" \
    ${actor_overrides[@]+"${actor_overrides[@]}"} "$@"
  local launched=$?
  # A dry run: train_grpo_step.sh (DRY_RUN=1) printed this launch's trainer command; after the last one's, stop.
  [[ "$DRY_RUN" != 1 ]] || (( ++DRY_LAUNCHES < $([[ "$RESUME" == restart ]] && echo 2 || echo 1) )) || exit "$launched"
  return "$launched"
}
status=0
if [[ "$RESUME" == restart ]]; then
  launch "$TOTAL_STEPS" "$@" && launch "$((TOTAL_STEPS + 1))" "$@" || status=$?
else
  launch "$TOTAL_STEPS" "++mr_search.trainer.resume_steps=1" "$@" || status=$?
fi
"$PYTHON" -m mr_search.ops.run_checks "$RUN_DIR" || status=1
echo "gpu_check.sh: run folder $RUN_DIR (train.log, checks.md, trace/); ${SECONDS}s in all"
exit "$status"
