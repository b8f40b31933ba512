#!/usr/bin/env bash
# Proves the GPU path on this node: two real MR-Search training steps with your rollout engine on the embedded world,
# one more after a restart (resume), then the checks of a run as a table (mr_search/run_checks.py):
#
#   bash scripts/gpu_check.sh                       # vLLM on one GPU (make gpu-check)
#   ROLLOUT_ENGINE=sglang N_GPUS_PER_NODE=2 TOTAL_STEPS=4 bash scripts/gpu_check.sh
#
# The embedded retrieval service is started if none answers at RETRIEVER_URL. Extra arguments are Hydra overrides for
# both launches. Exit status 1 when a check fails; the cause and its fix are printed below the table.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
PYTHON="${PYTHON:-python}"
ROLLOUT_ENGINE="${ROLLOUT_ENGINE:-vllm}"      # vllm | sglang (hf: the transformers rollout, one GPU); docs/gpu.md
                                              # says which ran where (both on H100s: vLLM on 1, 2, 4 GPUs, SGLang on 1, 2)
N_GPUS_PER_NODE="${N_GPUS_PER_NODE:-1}"
if [[ -n "${STEPS:-}" ]]; then  # the training script's name for this knob is TOTAL_STEPS: one name across the scripts
  echo "gpu_check.sh: STEPS is not a knob; use TOTAL_STEPS=$STEPS (the steps of the first launch; the restart adds one)" >&2
  exit 2
fi
TOTAL_STEPS="${TOTAL_STEPS:-2}"               # steps of the first launch; the restart adds one
TRAIN_BATCH_SIZE="${TRAIN_BATCH_SIZE:-8}"     # 8 questions x 4: a step without any unequal group is ~0.02% likely
LR="${LR:-1e-4}"                              # the compare's rate: large enough that an update the engine never
                                              # received would show in the log-prob agreement (the embedded 1e-5 barely)
RUN_DIR="${RUN_DIR:-$ROOT/runs/gpu-check-$ROLLOUT_ENGINE-${N_GPUS_PER_NODE}gpu-$(date +%Y%m%d-%H%M%S)}"
export PYTHON

# shellcheck source=scripts/lib/gpu.sh
source "$ROOT/scripts/lib/gpu.sh"

fail() {  # cause, fix
  printf '| check | result | seen |\n|---|---|---|\n| preflight | FAIL | %s |\ncause: %s\nfix:   %s\n' "$1" "$1" "$2"
  exit 1
}
has_gpu || fail "no usable GPU (nvidia-smi lists none, or torch.cuda.is_available() is False in $PYTHON)" \
  "run on a GPU node with the NVIDIA driver, in the environment that has torch with CUDA"
case "$ROLLOUT_ENGINE" in
  sglang|vllm) has_module "$ROLLOUT_ENGINE" || fail "the $ROLLOUT_ENGINE package is not installed in $PYTHON" \
    "install requirements/gpu-$ROLLOUT_ENGINE.txt (docs/gpu.md: online and offline installs)" ;;
  hf) ;;
  *) fail "ROLLOUT_ENGINE=$ROLLOUT_ENGINE is not an engine" "use sglang, vllm or hf" ;;
esac
"$PYTHON" -c 'import verl; from verl.trainer.ppo.core_algos import ADV_ESTIMATOR_REGISTRY as r; assert "mr_search" in r' \
  2>/dev/null || fail "the mr_search plugin is not registered in verl" "pip install -e . (in this environment)"

mkdir -p "$RUN_DIR"
export MR_SEARCH_TRACE_DIR="$RUN_DIR/trace"
launch() {  # total steps, then Hydra overrides
  local total=$1
  shift
  PRESET=embedded ROLLOUT_ENGINE="$ROLLOUT_ENGINE" N_GPUS_PER_NODE="$N_GPUS_PER_NODE" RUN_DIR="$RUN_DIR" \
    TOTAL_STEPS="$total" SAVE_FREQ=1 TRAIN_BATCH_SIZE="$TRAIN_BATCH_SIZE" LR="$LR" bash "$ROOT/train_grpo_step.sh" "$@"
}
status=0
launch "$TOTAL_STEPS" "$@" && launch "$((TOTAL_STEPS + 1))" "$@" || status=$?
"$PYTHON" -m mr_search.run_checks "$RUN_DIR" || status=1
echo "gpu_check.sh: run folder $RUN_DIR (train.log, checks.md, trace/)"
exit "$status"
