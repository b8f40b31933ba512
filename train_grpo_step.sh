#!/usr/bin/env bash
# MR-Search training through verl's own trainer (python -m verl.trainer.main_ppo).
#
#   bash train_grpo_step.sh                         # no GPU: the embedded default on CPU (`make quickstart`)
#   MODEL_PATH=Qwen/Qwen2.5-7B TRAIN_FILE=... VAL_FILE=... bash train_grpo_step.sh   # on GPUs: the paper recipe
#   ATTEMPTS=1 bash train_grpo_step.sh              # the K = 1 baseline (the same estimator at K = 1), same script
#   PRESET=embedded bash train_grpo_step.sh         # the embedded run on a GPU machine: one GPU, no SGLang (hf)
#   RUN_DIR=runs/<name> bash train_grpo_step.sh     # continue that run from its last checkpoint
#   bash train_grpo_step.sh trainer.save_freq=10    # any other setting: Hydra overrides, passed through
#
# Every knob is an environment variable; an empty one keeps the config's value (configs/recipe/paper.yaml: the
# paper's values; configs/mr_search_embedded.yaml: the embedded sizes; configs/engine/<engine>.yaml: the engine's).
# Arguments are Hydra overrides for verl's main_ppo and win over everything set here. The start-up decisions (preset,
# engine, checks, workarounds) are mr_search/ops/launch.py's, each said with its reason.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
PYTHON="${PYTHON:-python}"
export MR_SEARCH_CACHE="${MR_SEARCH_CACHE:-$HOME/.cache/mr_search}"

# --- preset -------------------------------------------------------------------------------------------------------
PRESET="${PRESET:-auto}"                      # auto (paper with a usable GPU, else embedded) | embedded | paper
DRY_RUN="${DRY_RUN:-0}"                       # 1: print the trainer command and exit (no setup, no training)
DUMP_ROLLOUTS="${DUMP_ROLLOUTS:-}"            # 1: each step's trajectories as JSON lines (empty: embedded only)

# --- data -----------------------------------------------------------------------------------------------------------
TRAIN_FILE="${TRAIN_FILE:-}"                  # verl parquet; embedded: written under $MR_SEARCH_CACHE/data
VAL_FILE="${VAL_FILE:-}"                      # verl parquet; embedded: the world's dev questions

# --- model ----------------------------------------------------------------------------------------------------------
MODEL_PATH="${MODEL_PATH:-}"                  # HF model dir or id; embedded: the warm-started tiny policy
MODEL_PATH="${MODEL_PATH%/}"                  # verl refuses a local path ending in "/"

# --- retrieval ------------------------------------------------------------------------------------------------------
RETRIEVER_URL="${RETRIEVER_URL:-}"            # base URL, used as given; empty: a free port if it starts one, else :8000
START_RETRIEVER="${START_RETRIEVER:-auto}"    # auto: embedded starts retrieval_launch.sh if /health is silent
RETRIEVER_READY_TIMEOUT="${RETRIEVER_READY_TIMEOUT:-900}"  # seconds to wait for /health (first run builds the index)

# --- algorithm ------------------------------------------------------------------------------------------------------
ATTEMPTS="${ATTEMPTS:-}"                      # K attempts per meta-episode (paper: 3); 1 = Search-R1 baseline
VAL_ATTEMPTS="${VAL_ATTEMPTS:-}"              # K in the validation passes (empty: ATTEMPTS)
GAMMA="${GAMMA:-}"                            # attempt discount, mr_search.advantage.gamma (paper: 1.0)
GROUP_SIZE="${GROUP_SIZE:-}"                  # n trajectories per question (paper: 5; embedded: 4)
ADV_ESTIMATOR="${ADV_ESTIMATOR:-mr_search}"   # mr_search at any K (grpo: Search-R1's own estimator at K = 1)
LR="${LR:-}"                                  # actor learning rate (paper: 1e-6)
ENTROPY_COEFF="${ENTROPY_COEFF:-}"            # entropy bonus (paper: 0); a random-weight policy moves only with one

# --- batch and length -----------------------------------------------------------------------------------------------
TRAIN_BATCH_SIZE="${TRAIN_BATCH_SIZE:-}"      # questions per step (paper: 64; embedded: 4)
PPO_MINI_BATCH_SIZE="${PPO_MINI_BATCH_SIZE:-}"  # questions per PPO update (paper: 32; embedded: 4)
TOTAL_STEPS="${TOTAL_STEPS:-}"                # training steps (paper: 300; embedded: 4)
MAX_TURNS="${MAX_TURNS:-}"                    # model turns per attempt (paper: 3)

# --- resources ------------------------------------------------------------------------------------------------------
ROLLOUT_ENGINE="${ROLLOUT_ENGINE:-}"          # sglang | vllm | hf | cpu; empty: paper: sglang; embedded: hf on a GPU
N_GPUS_PER_NODE="${N_GPUS_PER_NODE:-}"        # GPUs per node (paper: 8); empty, paper, one node: those it shows
NNODES="${NNODES:-1}"                         # >1: join the Ray cluster already running (ray start) on every node
ROLLOUT_TP="${ROLLOUT_TP:-}"                  # rollout tensor parallel size (paper: 1)
GPU_MEMORY_UTILIZATION="${GPU_MEMORY_UTILIZATION:-}"  # share of GPU memory the engine may take (paper: 0.6)
ENFORCE_EAGER="${ENFORCE_EAGER:-}"            # 1: no compile, no CUDA graphs (faster start, slower decoding)
USE_REMOVE_PADDING="${USE_REMOVE_PADDING:-auto}"  # sglang/vllm: auto = 1 when flash_attn imports, else 0 (sdpa)
SGLANG_ATTENTION_BACKEND="${SGLANG_ATTENTION_BACKEND:-}"  # empty: configs/engine/sglang.yaml's (triton)
SGLANG_SAMPLING_BACKEND="${SGLANG_SAMPLING_BACKEND:-}"    # empty: the engine config's (pytorch)
SGLANG_GRAMMAR_BACKEND="${SGLANG_GRAMMAR_BACKEND:-}"      # empty: the engine config's (none)
SGLANG_MEMORY_SAVER="${SGLANG_MEMORY_SAVER:-auto}"  # 1: engine memory freed while FSDP trains; 0: kept; auto: fit
CPU_DTYPE="${CPU_DTYPE:-auto}"                # cpu engine: bfloat16 | float32 | auto (bfloat16 where native)

# --- output ---------------------------------------------------------------------------------------------------------
RUN_DIR="${RUN_DIR:-}"                        # run folder (checkpoints, metrics, logs); reuse one to resume
SAVE_FREQ="${SAVE_FREQ:-}"                    # checkpoint every N steps (embedded: 1; paper: 50)
TEST_FREQ="${TEST_FREQ:-}"                    # validation every N steps, -1 never (embedded: -1; paper: 50)

# --- start-up decisions (mr_search/ops/launch.py) ---------------------------------------------------------------------
die() { echo "train_grpo_step.sh: $*" >&2; exit 1; }
KNOBS=(ROOT PYTHON PRESET DRY_RUN DUMP_ROLLOUTS TRAIN_FILE VAL_FILE MODEL_PATH RETRIEVER_URL ATTEMPTS VAL_ATTEMPTS
  GAMMA GROUP_SIZE ADV_ESTIMATOR LR ENTROPY_COEFF TRAIN_BATCH_SIZE PPO_MINI_BATCH_SIZE TOTAL_STEPS MAX_TURNS
  ROLLOUT_ENGINE N_GPUS_PER_NODE NNODES ROLLOUT_TP GPU_MEMORY_UTILIZATION ENFORCE_EAGER USE_REMOVE_PADDING
  SGLANG_ATTENTION_BACKEND SGLANG_SAMPLING_BACKEND SGLANG_GRAMMAR_BACKEND SGLANG_MEMORY_SAVER CPU_DTYPE RUN_DIR
  SAVE_FREQ TEST_FREQ)
launch() {  # launch.py with the knobs in its environment only; prints shell code (notes and errors on stderr)
  local knob assigned=()
  for knob in "${KNOBS[@]}"; do assigned+=("$knob=${!knob-}"); done
  env "${assigned[@]}" "$PYTHON" -m mr_search.ops.launch "$@"
}
decided="$(launch plan "$@")" || exit 1
eval "$decided"  # PRESET, CONFIG_NAME, ROLLOUT_ENGINE; PPO_MINI_BATCH_SIZE, N_GPUS_PER_NODE, ENFORCE_EAGER as decided

RUN_DIR="$(realpath -m "${RUN_DIR:-$ROOT/runs/${PRESET}-k${ATTEMPTS:-3}-$(date +%Y%m%d-%H%M%S)-$$}")"  # $$: 2 a second
[[ "$DRY_RUN" == 1 ]] || mkdir -p "$RUN_DIR"
LAUNCH="$(date +%Y%m%d-%H%M%S)-$$"

# --- embedded setup: retrieval, data, policy (each cached after the first run) ----------------------------------------
# shellcheck source=scripts/lib/retrieval.sh
source "$ROOT/scripts/lib/retrieval.sh"
trap retrieval_stop_started EXIT  # stops only the retrieval service this script started
trap 'exit 143' TERM; trap 'exit 130' INT
if [[ "$PRESET" == embedded && "$DRY_RUN" != 1 ]]; then
  "$PYTHON" -c 'import mr_search_embedded' 2>/dev/null || die "the embedded default needs the embedded-world \
example: pip install -e $ROOT/examples/embedded_world (make setup does), or pass MODEL_PATH, TRAIN_FILE and VAL_FILE"
fi
starts_retriever() { [[ "$START_RETRIEVER" == 1 || ( "$START_RETRIEVER" == auto && "$PRESET" == embedded ) ]]; }
free_port=0 retriever_started=0
if [[ -z "$RETRIEVER_URL" ]]; then  # a service it starts gets a free port: runs side by side never share one
  if starts_retriever; then RETRIEVER_URL="http://127.0.0.1:$(retrieval_free_port)" free_port=1
  else RETRIEVER_URL="http://127.0.0.1:8000"; fi
fi
if [[ "$DRY_RUN" != 1 ]] && { ((free_port)) || ! retrieval_healthy "$RETRIEVER_URL"; }; then
  starts_retriever \
    || die "no retrieval service answers at $RETRIEVER_URL/health; start one (bash retrieval_launch.sh) or set RETRIEVER_URL"
  echo -n "train_grpo_step.sh: "
  # It loads its model and index while the data and the policy are prepared; off the GPUs unless RETRIEVER_DEVICE asks.
  RETRIEVER_DEVICE="${RETRIEVER_DEVICE:-cpu}" \
    retrieval_launch "$RETRIEVER_URL" "$RUN_DIR/retrieval.log" "$RETRIEVER_READY_TIMEOUT"
  retriever_started=1
fi
if [[ "$PRESET" == embedded && "$DRY_RUN" != 1 ]]; then
  pieces=()  # one prepare process for all that is missing: one interpreter start, one import of the lab
  [[ -n "$TRAIN_FILE" && -n "$VAL_FILE" ]] || pieces+=(train dev)
  [[ -n "$MODEL_PATH" ]] || pieces+=(policy)
  if ((${#pieces[@]})); then
    echo "train_grpo_step.sh: preparing the embedded ${pieces[*]} (cached in $MR_SEARCH_CACHE after the first build)"
    prepared="$("$PYTHON" -m mr_search_embedded.prepare "${pieces[@]}")" \
      || die "python -m mr_search_embedded.prepare ${pieces[*]} failed (see above)"
    mapfile -t files < <(tail -n "${#pieces[@]}" <<<"$prepared")  # the paths, one a line, in the order asked
    [[ "${pieces[0]}" != train ]] || TRAIN_FILE="${TRAIN_FILE:-${files[0]}}" VAL_FILE="${VAL_FILE:-${files[1]}}"
    [[ -n "$MODEL_PATH" ]] || MODEL_PATH="${files[-1]}"
  fi
fi
if ((retriever_started)); then  # before the trainer command: a port taken meanwhile changes RETRIEVER_URL
  if ((free_port)); then retrieval_wait_free "$RUN_DIR/retrieval.log" "$RETRIEVER_READY_TIMEOUT"
  else retrieval_wait_started "$RETRIEVER_URL" "$RUN_DIR/retrieval.log" "$RETRIEVER_READY_TIMEOUT" \
      || die "the retrieval service exited; see $RUN_DIR/retrieval.log"; fi
fi

# --- the trainer command ------------------------------------------------------------------------------------------
KNOBS+=(CONFIG_NAME LAUNCH RAY_ADDRESS TORCH_COMPILE_DISABLE TOKENIZERS_PARALLELISM VLLM_USE_FLASHINFER_SAMPLER)
composed="$(launch command "$@")" || exit 1
eval "$composed"  # cmd=(...), and `export` lines for the engine's environment
if [[ "$DRY_RUN" == 1 ]]; then printf '%q ' "${cmd[@]}"; echo; exit 0; fi

# --- the run ----------------------------------------------------------------------------------------------------------
mkdir -p "$RUN_DIR/metrics"  # one JSON line a step, one file a launch: a resumed run keeps the earlier ones
export VERL_FILE_LOGGER_PATH="$RUN_DIR/metrics/$LAUNCH.jsonl"
printf '%q ' "${cmd[@]}" >"$RUN_DIR/command.txt"
echo "train_grpo_step.sh: $PRESET preset, $ROLLOUT_ENGINE rollout, run folder $RUN_DIR"
status=0
"${cmd[@]}" 2>&1 | tee -a "$RUN_DIR/train.log" || status=$?
cat "$RUN_DIR"/metrics/*.jsonl >"$RUN_DIR/metrics.jsonl" 2>/dev/null || true
if ((status != 0)); then
  "$PYTHON" -m mr_search.ops.diagnosis "$RUN_DIR/train.log" >&2 || true
  die "training failed (exit $status); log: $RUN_DIR/train.log"
fi
"$PYTHON" -m mr_search.runlog.run_summary "$RUN_DIR" || true  # per-step table over all launches: EM at each attempt, gain
echo "train_grpo_step.sh: done in ${SECONDS}s. Run folder: $RUN_DIR"
echo "  checkpoints: $RUN_DIR/checkpoints   per-step metrics: $RUN_DIR/metrics.jsonl (table: summary.md)"
echo "  continue it: RUN_DIR=$RUN_DIR bash train_grpo_step.sh"
