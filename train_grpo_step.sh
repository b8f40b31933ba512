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
# Every knob is an environment variable. An empty knob keeps the value of the config (configs/recipe/paper.yaml
# holds the paper's values, configs/mr_search_embedded.yaml the embedded sizes). Arguments are Hydra overrides
# for verl's main_ppo and win over everything set here.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
PYTHON="${PYTHON:-python}"
export MR_SEARCH_CACHE="${MR_SEARCH_CACHE:-$HOME/.cache/mr_search}"

# --- preset -------------------------------------------------------------------------------------------------------
# auto: `paper` when a GPU is usable (nvidia-smi and torch.cuda), else `embedded` (CPU backend, tiny sizes).
PRESET="${PRESET:-auto}"                      # auto | embedded | paper
DRY_RUN="${DRY_RUN:-0}"                       # 1: print the trainer command and exit (no setup, no training)
DUMP_ROLLOUTS="${DUMP_ROLLOUTS:-}"            # 1: every step's trajectories as JSON lines in the run folder
                                              # (empty: on for embedded, off for paper)

# --- data -----------------------------------------------------------------------------------------------------------
TRAIN_FILE="${TRAIN_FILE:-}"                  # verl parquet; embedded: written under $MR_SEARCH_CACHE/data
VAL_FILE="${VAL_FILE:-}"                      # verl parquet; embedded: the world's dev questions

# --- model ----------------------------------------------------------------------------------------------------------
MODEL_PATH="${MODEL_PATH:-}"                  # HF model dir or id; embedded: the warm-started tiny policy
MODEL_PATH="${MODEL_PATH%/}"                  # verl refuses a local path ending in "/"

# --- retrieval ------------------------------------------------------------------------------------------------------
RETRIEVER_URL="${RETRIEVER_URL:-}"            # service base URL (POST /retrieve, GET /health), used as given; empty:
                                              # a service this script starts gets a free port (runs side by side
                                              # never share one), else http://127.0.0.1:8000
START_RETRIEVER="${START_RETRIEVER:-auto}"    # auto: embedded preset starts retrieval_launch.sh if /health is silent
RETRIEVER_READY_TIMEOUT="${RETRIEVER_READY_TIMEOUT:-900}"  # seconds to wait for /health (first run builds the index)

# --- algorithm ------------------------------------------------------------------------------------------------------
ATTEMPTS="${ATTEMPTS:-}"                      # K attempts per meta-episode (paper: 3); 1 = Search-R1 baseline
VAL_ATTEMPTS="${VAL_ATTEMPTS:-}"              # K in the validation passes (empty: ATTEMPTS), e.g. a K = 1 run at 3
GAMMA="${GAMMA:-}"                            # attempt discount, mr_search.advantage.gamma (paper: 1.0; ablation: 0)
GROUP_SIZE="${GROUP_SIZE:-}"                  # n trajectories per question (paper: 5; embedded: 4)
ADV_ESTIMATOR="${ADV_ESTIMATOR:-mr_search}"   # mr_search at any K (grpo: Search-R1's own estimator at K = 1)
LR="${LR:-}"                                  # actor learning rate (paper: 1e-6)
ENTROPY_COEFF="${ENTROPY_COEFF:-}"            # entropy bonus, actor_rollout_ref.actor.entropy_coeff (paper: 0). A
                                              # random-weight policy earns no reward, so its gradient is 0: a small
                                              # bonus (e.g. 0.001) makes every update move the weights (weight-sync checks)

# --- batch and length -----------------------------------------------------------------------------------------------
TRAIN_BATCH_SIZE="${TRAIN_BATCH_SIZE:-}"      # questions per step (paper: 64; embedded: 4)
PPO_MINI_BATCH_SIZE="${PPO_MINI_BATCH_SIZE:-}"  # questions per PPO update (paper: 32; embedded: 4)
TOTAL_STEPS="${TOTAL_STEPS:-}"                # training steps (paper: 300; embedded: 4)
MAX_TURNS="${MAX_TURNS:-}"                    # model turns per attempt (paper: 3)

# --- resources ------------------------------------------------------------------------------------------------------
ROLLOUT_ENGINE="${ROLLOUT_ENGINE:-}"          # sglang | vllm | cpu | hf; empty: embedded -> hf on a usable GPU,
                                              # else cpu; paper -> sglang. hf: the CPU backend's transformers
                                              # rollout on one GPU (no SGLang/vLLM/flash-attn; small models)
N_GPUS_PER_NODE="${N_GPUS_PER_NODE:-}"        # GPUs per node (paper: 8); empty with the paper preset on one node:
                                              # the GPUs this node shows (CUDA_VISIBLE_DEVICES or nvidia-smi)
NNODES="${NNODES:-1}"                         # >1: join the Ray cluster already running (ray start) on every node
ROLLOUT_TP="${ROLLOUT_TP:-}"                  # rollout tensor parallel size (paper: 1)
GPU_MEMORY_UTILIZATION="${GPU_MEMORY_UTILIZATION:-}"  # share of GPU memory the engine may take (paper config: 0.6)
ENFORCE_EAGER="${ENFORCE_EAGER:-}"            # 1: the engine runs eagerly (vLLM: no compile, no CUDA graphs; SGLang:
                                              # no CUDA graphs, piecewise ones included): a faster start, slower
                                              # decoding (gpu_check.sh: 1)
USE_REMOVE_PADDING="${USE_REMOVE_PADDING:-auto}"  # sglang/vllm: auto = 1 when flash_attn imports, else 0 (sdpa)
SGLANG_ATTENTION_BACKEND="${SGLANG_ATTENTION_BACKEND:-triton}"  # verl's default (flashinfer) needs nvcc at first use
SGLANG_SAMPLING_BACKEND="${SGLANG_SAMPLING_BACKEND:-pytorch}"
SGLANG_GRAMMAR_BACKEND="${SGLANG_GRAMMAR_BACKEND:-none}"  # the agent loop asks for no structured output: no xgrammar
SGLANG_MEMORY_SAVER="${SGLANG_MEMORY_SAVER:-auto}"  # 1: verl's default, the engine frees its weights and KV cache
                                              # while FSDP trains (ran 4 steps + resume with the tiny policy and 3
                                              # steps at the 7B shape on H200s); 0: it keeps them (no release and
                                              # resume a step); auto: on when the engine's share and the update do not
                                              # fit one card together (mr_search/ops/gpu_fit.py), said at start-up
CPU_DTYPE="${CPU_DTYPE:-auto}"                # cpu engine: bfloat16 | float32 | auto (bfloat16 where the CPU has it
                                              # natively, AVX512-BF16 or AMX; elsewhere torch emulates it and float32
                                              # steps ran ~2.8x faster: docs/cpu-backend.md)

# --- output ---------------------------------------------------------------------------------------------------------
RUN_DIR="${RUN_DIR:-}"                        # run folder (checkpoints, metrics, logs); reuse one to resume
SAVE_FREQ="${SAVE_FREQ:-}"                    # checkpoint every N steps (embedded: 1; paper: 50)
TEST_FREQ="${TEST_FREQ:-}"                    # validation every N steps, -1 never (embedded: -1; paper: 50)

die() { echo "train_grpo_step.sh: $*" >&2; exit 1; }
preset_value() {  # KEY: its value in the preset's entry config, else in the recipe both presets include
  "$PYTHON" - "$ROOT/configs/$CONFIG_NAME.yaml" "$ROOT/configs/recipe/paper.yaml" "$1" <<'PY'
import sys

import yaml

*files, key = sys.argv[1:]
for path in files:
    with open(path) as f:
        node = yaml.safe_load(f)
    for part in key.split("."):
        node = node.get(part) if isinstance(node, dict) else None
    if node is not None:
        print(node)
        break
PY
}

# shellcheck source=scripts/lib/gpu.sh
source "$ROOT/scripts/lib/gpu.sh"
# shellcheck source=scripts/lib/overrides.sh
source "$ROOT/scripts/lib/overrides.sh"
cli_overrides=("$@")  # the Hydra overrides given on the command line, passed to verl after the script's own

if [[ "$PRESET" == auto ]]; then
  # Without a GPU only the embedded sizes can run; MODEL_PATH / TRAIN_FILE / VAL_FILE then replace its defaults.
  if has_gpu; then PRESET=paper; else PRESET=embedded; fi
fi
case "$PRESET" in
  embedded)
    CONFIG_NAME=mr_search_embedded
    if [[ -z "$ROLLOUT_ENGINE" ]]; then if has_gpu; then ROLLOUT_ENGINE=hf; else ROLLOUT_ENGINE=cpu; fi; fi ;;
  paper) CONFIG_NAME=mr_search_paper; ROLLOUT_ENGINE="${ROLLOUT_ENGINE:-sglang}" ;;
  *) die "PRESET=$PRESET is not valid; use auto, embedded or paper" ;;
esac
case "$ROLLOUT_ENGINE" in
  sglang|vllm|cpu|hf) ;;
  *) die "ROLLOUT_ENGINE=$ROLLOUT_ENGINE is not valid; use sglang, vllm, cpu or hf" ;;
esac
# The paper preset's data are files a user prepares first: say which and how, before anything else starts.
if [[ "$PRESET" == paper && "$DRY_RUN" != 1 ]]; then
  needed=(TRAIN_FILE VAL_FILE)
  [[ " $* " == *" trainer.val_only=True "* ]] && needed=(VAL_FILE)  # scripts/eval_engine.sh: validation only
  for what in "${needed[@]}"; do
    file="${!what}"
    [[ -n "$file" ]] || die "the paper preset needs $what (verl parquet): make them with \`python scripts/prepare_data.py \
flashrag --root <FlashRAG folder> --out <dir>\`, then TRAIN_FILE=<dir>/train.parquet VAL_FILE=<dir>/val.parquet"
    [[ -f "$file" ]] || die "$what=$file does not exist; make it with \`python scripts/prepare_data.py flashrag --root \
<FlashRAG folder> --out <dir>\` (train.parquet, val.parquet, test.parquet)"
  done
fi

if [[ "$DRY_RUN" != 1 && ( "$ROLLOUT_ENGINE" == sglang || "$ROLLOUT_ENGINE" == vllm ) ]] \
  && ! has_module "$ROLLOUT_ENGINE"; then
  # Before Ray starts: verl would otherwise fail inside a Ray actor, minutes later, with a long trace.
  die "ROLLOUT_ENGINE=$ROLLOUT_ENGINE needs the $ROLLOUT_ENGINE package, which $PYTHON cannot import; install it with \
requirements/gpu-$ROLLOUT_ENGINE.txt (docs/gpu.md), or use ROLLOUT_ENGINE=hf on one GPU"
fi
if [[ -n "$TRAIN_BATCH_SIZE" ]] && ! [[ "$TRAIN_BATCH_SIZE" =~ ^[1-9][0-9]*$ ]]; then
  die "TRAIN_BATCH_SIZE=$TRAIN_BATCH_SIZE is not valid; use a whole number of questions >= 1"
fi
if [[ -n "$TRAIN_BATCH_SIZE" && -z "$PPO_MINI_BATCH_SIZE" ]]; then
  # verl stops at start-up when a PPO mini-batch is larger than the step ("train_batch_size (16) must be >=
  # actor.ppo_mini_batch_size (32)"): a smaller step than the preset's mini-batch (paper: 32) is then one update.
  preset_mini="$(preset_value actor_rollout_ref.actor.ppo_mini_batch_size 2>/dev/null)" || preset_mini=""
  if [[ "$preset_mini" =~ ^[0-9]+$ ]] && ((TRAIN_BATCH_SIZE < preset_mini)); then
    PPO_MINI_BATCH_SIZE="$TRAIN_BATCH_SIZE"
    echo "train_grpo_step.sh: PPO_MINI_BATCH_SIZE=$TRAIN_BATCH_SIZE (the $PRESET preset's $preset_mini is more than" \
      "TRAIN_BATCH_SIZE=$TRAIN_BATCH_SIZE: one update a step; set PPO_MINI_BATCH_SIZE to choose)" >&2
  fi
fi
case "$ENFORCE_EAGER" in
  1) ENFORCE_EAGER=True ;;
  0) ENFORCE_EAGER=False ;;
  "") ;;
  *) die "ENFORCE_EAGER=$ENFORCE_EAGER is not valid; use 1 (eager: no compile, no CUDA graphs) or 0" ;;
esac
if [[ -n "$ATTEMPTS" ]] && ! [[ "$ATTEMPTS" =~ ^[1-9][0-9]*$ ]]; then
  die "ATTEMPTS=$ATTEMPTS is not valid; use a whole number >= 1 (1 = the Search-R1 baseline)"
fi
if [[ -n "$VAL_ATTEMPTS" ]] && ! [[ "$VAL_ATTEMPTS" =~ ^[1-9][0-9]*$ ]]; then
  die "VAL_ATTEMPTS=$VAL_ATTEMPTS is not valid; use a whole number >= 1 (empty: the training K)"
fi
if ! [[ "$NNODES" =~ ^[1-9][0-9]*$ ]]; then
  die "NNODES=$NNODES is not valid; use a whole number >= 1 (> 1 joins the Ray cluster started with ray start)"
fi
if [[ -z "$N_GPUS_PER_NODE" && "$PRESET" == paper && "$NNODES" == 1 && "$DRY_RUN" != 1 ]] && has_gpu; then
  # The paper's 8 GPUs on a node that has fewer would stop in Ray ("Total available GPUs ... less than desired").
  N_GPUS_PER_NODE="$(gpu_count)"
  [[ "$N_GPUS_PER_NODE" == 8 ]] || echo "train_grpo_step.sh: N_GPUS_PER_NODE=$N_GPUS_PER_NODE (the GPUs this node" \
    "shows; the paper used 8)" >&2
fi
# The K = 1 baseline keeps the mr_search estimator: the same method at K = 1 (leave-one-out baseline, no std
# division, verl's rloo), so a comparison differs in K alone. verl's grpo (Search-R1's) divides by the group std.

if [[ -z "$RUN_DIR" ]]; then
  RUN_DIR="$ROOT/runs/${PRESET}-k${ATTEMPTS:-3}-$(date +%Y%m%d-%H%M%S)-$$"  # the pid: two launches in one second differ
fi
RUN_DIR="$(realpath -m "$RUN_DIR")"
[[ "$DRY_RUN" == 1 ]] || mkdir -p "$RUN_DIR"
LAUNCH="$(date +%Y%m%d-%H%M%S)-$$"

# --- embedded setup: retrieval, data, policy (each cached after the first run) ----------------------------------------
# shellcheck source=scripts/lib/retrieval.sh
source "$ROOT/scripts/lib/retrieval.sh"
trap retrieval_stop_started EXIT
trap 'exit 143' TERM
trap 'exit 130' INT

if [[ "$PRESET" == embedded && "$DRY_RUN" != 1 ]]; then
  "$PYTHON" -c 'import mr_search_embedded' 2>/dev/null || die "the embedded default needs the embedded-world \
example: pip install -e $ROOT/examples/embedded_world (make setup does), or pass MODEL_PATH, TRAIN_FILE and VAL_FILE"
fi

starts_retriever() { [[ "$START_RETRIEVER" == 1 || ( "$START_RETRIEVER" == auto && "$PRESET" == embedded ) ]]; }
free_port=0
if [[ -z "$RETRIEVER_URL" ]]; then
  if starts_retriever; then
    # Not always 8000: a second run on this host (another GPU) would find the first one's service there.
    RETRIEVER_URL="http://127.0.0.1:$(retrieval_free_port)" free_port=1
  else
    RETRIEVER_URL="http://127.0.0.1:8000"
  fi
fi
retriever_started=0
if [[ "$DRY_RUN" != 1 ]] && { ((free_port)) || ! retrieval_healthy "$RETRIEVER_URL"; }; then
  starts_retriever \
    || die "no retrieval service answers at $RETRIEVER_URL/health; start one (bash retrieval_launch.sh) or set RETRIEVER_URL"
  echo -n "train_grpo_step.sh: "
  # The service loads its model and index while the data and the policy are prepared below; it is waited for
  # before the trainer starts. On a training node it stays off the GPUs unless RETRIEVER_DEVICE asks for one
  # (retrieval_launch.sh then hides them from it: a library it imports could otherwise take GPU memory by itself).
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
    if [[ "${pieces[0]}" == train ]]; then
      TRAIN_FILE="${TRAIN_FILE:-${files[0]}}" VAL_FILE="${VAL_FILE:-${files[1]}}"
    fi
    [[ -n "$MODEL_PATH" ]] || MODEL_PATH="${files[-1]}"
  fi
fi

if ((retriever_started)); then  # before the trainer command: a port taken meanwhile changes RETRIEVER_URL
  if ((free_port)); then
    retrieval_wait_free "$RUN_DIR/retrieval.log" "$RETRIEVER_READY_TIMEOUT"
  else
    retrieval_wait_started "$RETRIEVER_URL" "$RUN_DIR/retrieval.log" "$RETRIEVER_READY_TIMEOUT" \
      || die "the retrieval service exited; see $RUN_DIR/retrieval.log"
  fi
fi

# --- the trainer command --------------------------------------------------------------------------------------------
overrides=(
  "algorithm.adv_estimator=$ADV_ESTIMATOR"
  "mr_search.retriever.url=${RETRIEVER_URL%/}/retrieve"
  "trainer.project_name=mr_search"
  "trainer.experiment_name=$(basename "$RUN_DIR")"
  "trainer.default_local_dir=$RUN_DIR/checkpoints"
  "trainer.resume_mode=auto"
)
if [[ "$ROLLOUT_ENGINE" == hf ]]; then
  # The CPU backend's transformers rollout (mr_hf) on verl's own GPU platform: the trainer and the rollout server
  # share one GPU; sdpa attention and no padding removal, so flash-attention is not needed either. No compile by
  # default: for small models its start-up time outweighs what it saves (TORCH_COMPILE_DISABLE=0 turns it on).
  export TORCH_COMPILE_DISABLE="${TORCH_COMPILE_DISABLE:-1}" TOKENIZERS_PARALLELISM="${TOKENIZERS_PARALLELISM:-false}"
  overrides+=(
    "actor_rollout_ref.rollout.name=mr_hf"
    "actor_rollout_ref.rollout.tensor_model_parallel_size=1"
    "++actor_rollout_ref.model.override_config.attn_implementation=sdpa"
    "actor_rollout_ref.model.use_remove_padding=False"
  )
elif [[ "$ROLLOUT_ENGINE" != cpu ]]; then
  overrides+=("actor_rollout_ref.rollout.name=$ROLLOUT_ENGINE")
  if [[ "$USE_REMOVE_PADDING" == auto ]]; then
    if [[ "$DRY_RUN" == 1 ]] || has_module flash_attn; then USE_REMOVE_PADDING=1; else
      echo "train_grpo_step.sh: flash_attn is not installed: training with sdpa attention and padding (slower on long" \
        "meta-episodes); pip install flash-attn --no-build-isolation for padding removal" >&2
      USE_REMOVE_PADDING=0
    fi
  fi
  case "$USE_REMOVE_PADDING" in
    1) ;;
    0) overrides+=("++actor_rollout_ref.model.override_config.attn_implementation=sdpa"
                   "actor_rollout_ref.model.use_remove_padding=False") ;;
    *) die "USE_REMOVE_PADDING=$USE_REMOVE_PADDING is not valid; use auto, 1 or 0" ;;
  esac
  if [[ "$ROLLOUT_ENGINE" == sglang ]]; then
    # The backends seen working with sglang 0.5.12 on H100/H200 (docs/gpu.md); verl 0.9.1 would pick flashinfer.
    overrides+=(
      "++actor_rollout_ref.rollout.engine_kwargs.sglang.attention_backend=$SGLANG_ATTENTION_BACKEND"
      "++actor_rollout_ref.rollout.engine_kwargs.sglang.sampling_backend=$SGLANG_SAMPLING_BACKEND"
      "++actor_rollout_ref.rollout.engine_kwargs.sglang.grammar_backend=$SGLANG_GRAMMAR_BACKEND"
    )
    # Eager means no graphs: verl hands enforce_eager to SGLang as disable_cuda_graph (decode), and SGLang 0.5.12
    # would still trace and capture its piecewise CUDA graphs for prefill at start-up.
    [[ "$ENFORCE_EAGER" != True ]] \
      || overrides+=("++actor_rollout_ref.rollout.engine_kwargs.sglang.disable_piecewise_cuda_graph=True")
    if [[ "$SGLANG_MEMORY_SAVER" == auto ]]; then
      # The policy's size, the engine's share and one card's memory decide (docs/gpu.md, "SGLang's memory saver"):
      # each input as the run will have it: the last Hydra override of it (this script's own, then the command line's,
      # which verl reads last), else this script's knob, else the preset's value.
      fit() { override_value "$1" "${overrides[@]}" "${cli_overrides[@]}" || { [[ -n "$2" ]] && echo "$2"; } \
        || preset_value "$1"; }
      fit_util="$(fit actor_rollout_ref.rollout.gpu_memory_utilization "${GPU_MEMORY_UTILIZATION:-}")"
      fit_gpus="$(fit trainer.n_gpus_per_node "${N_GPUS_PER_NODE:-}")"
      fit_micro="$(fit actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu "")"
      fit_prompt="$(fit data.max_prompt_length "")" fit_response="$(fit data.max_response_length "")"
      fit_card="$(nvidia-smi --query-gpu=memory.total --format=csv,noheader,nounits 2>/dev/null | head -n 1 || true)"
      fit_model="$(fit actor_rollout_ref.model.path "${MODEL_PATH:-}")"
      [[ "$DRY_RUN" == 1 ]] && fit_model=""  # a dry run reads no model
      fit_out="$("$PYTHON" -m mr_search.ops.gpu_fit --model "$fit_model" --gpus "$((NNODES * ${fit_gpus:-1}))" \
        --utilization "${fit_util:-0.6}" --card-mib "$fit_card" --micro-batch "${fit_micro:-0}" \
        --tokens "$((${fit_prompt:-0} + ${fit_response:-0}))" 2>&1)" || die "mr_search.ops.gpu_fit failed: $fit_out"
      SGLANG_MEMORY_SAVER="$(tail -n 1 <<<"$fit_out")"
      echo "train_grpo_step.sh: SGLANG_MEMORY_SAVER=auto -> $SGLANG_MEMORY_SAVER, $(tail -n 2 <<<"$fit_out" | head -n 1)" >&2
    fi
    case "$SGLANG_MEMORY_SAVER" in
      0) # The engine keeps its weights and KV cache while FSDP trains: GPU_MEMORY_UTILIZATION must leave the
         # trainer room. Without the saver there is nothing to release, so verl must not ask for it.
        overrides+=("++actor_rollout_ref.rollout.engine_kwargs.sglang.enable_memory_saver=False"
                    "actor_rollout_ref.rollout.free_cache_engine=False") ;;
      1) ;;
      *) die "SGLANG_MEMORY_SAVER=$SGLANG_MEMORY_SAVER is not valid; use auto, 0 or 1" ;;
    esac
  elif [[ "$DRY_RUN" != 1 ]] && ! has_module flashinfer; then
    # vLLM's FlashInfer top-k/top-p sampler needs the flashinfer package; its own sampler needs nothing.
    export VLLM_USE_FLASHINFER_SAMPLER="${VLLM_USE_FLASHINFER_SAMPLER:-0}"
  fi
else
  # The CPU backend's settings (mr_search/cpu): environment variables, then Hydra overrides (its rollout name
  # included), one per line.
  [[ -f "$ROOT/configs/cpu_backend.env" && -f "$ROOT/configs/cpu_backend_overrides.txt" ]] \
    || die "ROLLOUT_ENGINE=cpu needs configs/cpu_backend.env and configs/cpu_backend_overrides.txt (the CPU backend)"
  while IFS= read -r line; do
    [[ -z "${line// }" || "$line" == \#* ]] && continue
    export "${line?}"
  done <"$ROOT/configs/cpu_backend.env"
  while IFS= read -r line; do
    [[ -z "${line// }" || "$line" == \#* ]] && continue
    overrides+=("$line")
  done <"$ROOT/configs/cpu_backend_overrides.txt"
  [[ "$CPU_DTYPE" != auto ]] || CPU_DTYPE="$("$PYTHON" -m mr_search.cpu.precision)"
  case "$CPU_DTYPE" in
    bfloat16) ;;  # verl's own: bf16 rollout, bf16 autocast over fp32 parameters
    float32) overrides+=("actor_rollout_ref.rollout.dtype=float32"
                         "++actor_rollout_ref.actor.fsdp_config.mixed_precision={param_dtype:fp32,reduce_dtype:fp32,buffer_dtype:fp32}") ;;
    *) die "CPU_DTYPE=$CPU_DTYPE is not valid; use auto, bfloat16 or float32" ;;
  esac
fi
add() { [[ -n "$2" ]] && overrides+=("$1=$2"); return 0; }
if [[ "${DUMP_ROLLOUTS:-$([[ "$PRESET" == embedded ]] && echo 1)}" == 1 ]]; then
  overrides+=("trainer.rollout_data_dir=$RUN_DIR/rollouts")
fi
add data.train_files "$TRAIN_FILE"
add data.val_files "$VAL_FILE"
add actor_rollout_ref.model.path "$MODEL_PATH"
add mr_search.episode.attempts "$ATTEMPTS"
add mr_search.episode.val_attempts "$VAL_ATTEMPTS"
add mr_search.episode.max_turns_per_attempt "$MAX_TURNS"
add mr_search.advantage.gamma "$GAMMA"
add actor_rollout_ref.rollout.n "$GROUP_SIZE"
add actor_rollout_ref.actor.optim.lr "$LR"
add actor_rollout_ref.actor.entropy_coeff "$ENTROPY_COEFF"
add data.train_batch_size "$TRAIN_BATCH_SIZE"
add actor_rollout_ref.actor.ppo_mini_batch_size "$PPO_MINI_BATCH_SIZE"
add trainer.total_training_steps "$TOTAL_STEPS"
add trainer.n_gpus_per_node "$N_GPUS_PER_NODE"
add actor_rollout_ref.rollout.tensor_model_parallel_size "$ROLLOUT_TP"
add actor_rollout_ref.rollout.gpu_memory_utilization "$GPU_MEMORY_UTILIZATION"
add actor_rollout_ref.rollout.enforce_eager "$ENFORCE_EAGER"  # verl hands it to vLLM and, as disable_cuda_graph, to SGLang
add trainer.save_freq "$SAVE_FREQ"
add trainer.test_freq "$TEST_FREQ"
if ((NNODES > 1)); then
  # Multi-node: every node has joined one Ray cluster (`ray start --head` / `ray start --address=...`).
  overrides+=("trainer.nnodes=$NNODES" "++ray_kwargs.ray_init.address=${RAY_ADDRESS:-auto}")
fi

cmd=("$PYTHON" -m verl.trainer.main_ppo "--config-path=$ROOT/configs" "--config-name=$CONFIG_NAME" "${overrides[@]}" "$@")
if [[ "$DRY_RUN" == 1 ]]; then
  printf '%q ' "${cmd[@]}"
  echo
  exit 0
fi

# verl's file logger writes one JSON line per step; one file per launch so that a resumed run keeps the earlier ones.
mkdir -p "$RUN_DIR/metrics"
export VERL_FILE_LOGGER_PATH="$RUN_DIR/metrics/$LAUNCH.jsonl"
printf '%q ' "${cmd[@]}" >"$RUN_DIR/command.txt"
echo "train_grpo_step.sh: $PRESET preset, $ROLLOUT_ENGINE rollout, run folder $RUN_DIR"
summarize() {
  # Per-step table over all launches of the run: EM at each attempt, reflection gain, reward, grad norm, time.
  "$PYTHON" -m mr_search.runlog.run_summary "$RUN_DIR" || true
}

status=0
"${cmd[@]}" 2>&1 | tee -a "$RUN_DIR/train.log" || status=$?
cat "$RUN_DIR"/metrics/*.jsonl >"$RUN_DIR/metrics.jsonl" 2>/dev/null || true
if ((status != 0)); then
  "$PYTHON" -m mr_search.ops.diagnosis "$RUN_DIR/train.log" >&2 || true
  die "training failed (exit $status); log: $RUN_DIR/train.log"
fi
summarize
echo "train_grpo_step.sh: done in ${SECONDS}s. Run folder: $RUN_DIR"
echo "  checkpoints: $RUN_DIR/checkpoints   per-step metrics: $RUN_DIR/metrics.jsonl (table: summary.md)"
echo "  continue it: RUN_DIR=$RUN_DIR bash train_grpo_step.sh"
