#!/usr/bin/env bash
# `make compare`: MR-Search (K = 3) against K = 1 on the embedded world (MR_SEARCH_WORLD=namesake: its opt-in
# variant), the test written before the run. Arms (ARMS): mr_search; k1 (K = 1, the same turns per attempt); k1_all_turns
# (K = 1 with the meta-episode's K x turns); mr_search_no_credit (gamma = 0). Every arm starts from the warm-started
# policy and is matched to MR-Search's model-written tokens; the final evaluation reads the test split once.
#
#   bash examples/embedded_world/scripts/compare.sh                 # 4 arms x 5 seeds, report in reports/comparison/<world>
#   DRY_RUN=1 bash examples/embedded_world/scripts/compare.sh       # print the plan (the test) and exit
#   ARMS="mr_search k1" SEEDS=3 bash examples/embedded_world/scripts/compare.sh   # the two arms the test needs
#   WORK_DIR=runs/compare/<name> bash examples/embedded_world/scripts/compare.sh  # continue: finished pieces are skipped
#   MR_SEARCH_WORLD=namesake POLICY=small bash examples/embedded_world/scripts/compare.sh   # the namesake world
#
# Before any training the plan (metric, comparison, pass rule, arms, seeds, budget, splits, planned wall time) is
# written to WORK_DIR/plan.{json,md} and REPORT_DIR/plan.md; the report opens with it. Per seed: MR-Search trains
# STEPS steps (its model-written tokens are the budget); every other arm trains its first launch (K = 3 arms: STEPS;
# K = 1 arms: BASELINE_STEPS), resumes while it is more than TOKEN_TOLERANCE short of the budget, and its checkpoint
# evaluated is the step whose cumulative model-written tokens are closest to it (every checkpoint is kept). Training
# reads the train split only; the test split is read by the final evaluation of each checkpoint (greedy, K_eval = K,
# the arm's own turns) and of the warm start. Every knob is an environment variable.
set -euo pipefail
# The whole script is one brace group, read before it runs: editing this file while a comparison runs (an hour on a
# small machine) cannot change or break the running one (bash reads a plain script as it goes).
{

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../../.." && pwd)"
PYTHON="${PYTHON:-python}"
export MR_SEARCH_CACHE="${MR_SEARCH_CACHE:-$HOME/.cache/mr_search}"

# --- arms and budget ---
ARMS="${ARMS:-mr_search k1 k1_all_turns mr_search_no_credit}"  # any of these four; mr_search and k1 are required
SEEDS="${SEEDS:-5}"                     # number of seeds; seeds SEED_BASE .. SEED_BASE + SEEDS - 1
SEED_BASE="${SEED_BASE:-1}"
STEPS="${STEPS:-16}"                    # MR-Search training steps: its model-written tokens are every arm's budget
ATTEMPTS="${ATTEMPTS:-3}"               # K of MR-Search in training and of the final evaluation (paper: 3)
TURNS="${TURNS:-3}"                     # model turns per attempt, every arm's unit (paper and the embedded config: 3)
BASELINE_STEPS="${BASELINE_STEPS:-}"    # first launch of the K = 1 arms; empty: 4 x STEPS (in a one-step smoke a K = 1
                                       # step wrote ~3.5x fewer model tokens than a K = 3 one: a spare step costs
                                       # seconds, a relaunch minutes; the checkpoint closest to the budget is evaluated)
TOKEN_TOLERANCE="${TOKEN_TOLERANCE:-0.05}"  # an arm within this fraction below the budget trains no further
BUDGET="${BUDGET:-tokens}"              # tokens: every arm matched to MR-Search's model-written tokens (compute-fair);
                                       # updates: every arm trains STEPS steps (the paper's protocol), side by side
                                       # with PARALLEL_RUNS > 1
PARALLEL_RUNS="${PARALLEL_RUNS:-1}"     # training runs at once on the one card (BUDGET=updates; an engine's KV cache
                                       # of GPU_MEMORY_UTILIZATION each): across a seed's arms and the seeds
SOLO_STEPS="${SOLO_STEPS:-0}"           # the first run trains this many steps alone before the others start: its
                                       # step times alone and shared give the cost of sharing the card
LAUNCH_GAP="${LAUNCH_GAP:-15}"          # seconds between the starts of runs side by side
RUN_RETRIES="${RUN_RETRIES:-1}"         # a run side by side that fails starts again from its last checkpoint this many
                                       # times (its log keeps every launch); after that no new run starts, the runs in
                                       # flight train on to their end, and the script stops naming the failed ones
UNTIL_STEP="${UNTIL_STEP:-}"            # a piece of a longer run: train every arm to this step, then stop (no
                                       # evaluation); the same WORK_DIR without it continues to STEPS and evaluates
EVALUATE="${EVALUATE:-1}"               # 0: train only, even the last piece (BUDGET=updates): a GPU node's time goes to
                                       # training, and its pieces, brought back, are evaluated by a start of the same
                                       # WORK_DIR on any machine (every run at STEPS: nothing trains, no GPU needed)
DEV_QUESTIONS="${DEV_QUESTIONS:-0}"     # dev curves: the first N dev questions per source, greedy at K = ATTEMPTS,
DEV_FREQ="${DEV_FREQ:-10}"              # through the training's engine before the first step and every DEV_FREQ steps
TRAIN_BATCH_SIZE="${TRAIN_BATCH_SIZE:-4}"   # questions per step, every arm
GROUP_SIZE="${GROUP_SIZE:-4}"           # trajectories per question, every arm
MINI_BATCH="${MINI_BATCH:-}"            # questions per optimizer update, every arm; empty: TRAIN_BATCH_SIZE (one
                                       # update a step, as in every earlier comparison)
LR="${LR:-1e-4}"                        # actor learning rate, every arm (every reported comparison's; the embedded
                                       # config's own is 1e-5)
# --- evaluation (the test split, once) ---
MAX_NEW_TOKENS="${MAX_NEW_TOKENS:-48}"  # new tokens per model turn (the embedded training's)
MAX_INFO_TOKENS="${MAX_INFO_TOKENS:-256}"  # tokens of one <information> block (the training's)
EVAL_RESPONSE_LENGTH="${EVAL_RESPONSE_LENGTH:-}"  # meta-episode budget; empty: 1024 per 3 attempts (the training's)
MAX_QUESTIONS="${MAX_QUESTIONS:-40}"    # first N test questions per data source, or a default and counts per source
                                       # (e.g. 100,embedded_3hop=217); fixed by the plan
# --- the plan's wall time ---
TIMINGS="${TIMINGS:-}"                  # a comparison.json with measured step times; empty: the report folder's, else
                                       # the earlier harness's report of the world
TIME_AIM_MIN="${TIME_AIM_MIN:-60}"      # the wall time aimed at (minutes): the plan says whether the arms fit it
# --- world, policy, folders, machine ---
WORK_DIR="${WORK_DIR:-}"                # empty: runs/compare/<date>
MR_SEARCH_WORLD="${MR_SEARCH_WORLD:-default}"  # default | namesake | threehop: the embedded world, as every Python
                                       # step reads it (opt-in ones cached under $MR_SEARCH_CACHE/worlds/<name>-v<N>)
POLICY="${POLICY:-tiny}"                # tiny | small: the tiny policy's shape the warm start trains
# Knobs that are gone: one name per setting, and the namesake world has one version and one warm start.
[[ -z "${WORLD+x}" ]] || { echo "compare.sh: WORLD is now MR_SEARCH_WORLD (WORLD=$WORLD given)" >&2; exit 1; }
for gone in NAMESAKE_VERSION MR_SEARCH_NAMESAKE_VERSION NAMESAKE_RECIPE; do
  [[ -z "${!gone+x}" ]] || { echo "compare.sh: $gone is gone: the namesake world has one version and one warm start" \
    "(MR_SEARCH_WORLD=namesake POLICY=small)" >&2; exit 1; }
done
[[ -z "${K_EVAL+x}" ]] || { echo "compare.sh: K_EVAL is gone: the final evaluation uses K_eval = ATTEMPTS (the test" \
  "written before the run); K_EVAL=$K_EVAL given" >&2; exit 1; }
[[ "$MR_SEARCH_WORLD" =~ ^(default|namesake|threehop)$ ]] \
  || { echo "compare.sh: MR_SEARCH_WORLD=$MR_SEARCH_WORLD is not valid; use default, namesake or threehop" >&2; exit 1; }
export MR_SEARCH_WORLD
REPORT_DIR="${REPORT_DIR:-$ROOT/reports/comparison/$MR_SEARCH_WORLD}"
if [[ "$MR_SEARCH_WORLD" == default ]]; then
  RETRIEVER_URL="${RETRIEVER_URL:-http://127.0.0.1:8000}"
  earlier_report="$ROOT/reports/compare_embedded"
else
  # Another world, another port (as in eval.sh): a default-world service on 8000 must not answer for it.
  if [[ "$MR_SEARCH_WORLD" == namesake ]]; then port=8019; else port=8020; fi
  RETRIEVER_URL="${RETRIEVER_URL:-http://127.0.0.1:$port}"
  earlier_report="$ROOT/reports/compare_$MR_SEARCH_WORLD"
fi
if [[ -z "$TIMINGS" ]]; then
  if [[ -f "$REPORT_DIR/comparison.json" ]]; then TIMINGS="$REPORT_DIR/comparison.json"
  elif [[ ! "${ROLLOUT_ENGINE:-}" =~ ^(sglang|vllm)$ ]]; then TIMINGS="$earlier_report/comparison.json"; fi
fi
RETRIEVER_READY_TIMEOUT="${RETRIEVER_READY_TIMEOUT:-900}"
NOTE="${NOTE:-}"                        # one line for the report's history table
WAIT_FOR_IDLE="${WAIT_FOR_IDLE:-0}"      # 1: before each training run, wait until no other verl run is going
OVERLAP_EVAL="${OVERLAP_EVAL:-1}"        # 1: a seed's evaluation (one thread) runs beside the next seed's training
                                       # (which leaves a core of 2 idle); 0: one thing at a time
EVAL_WORKERS="${EVAL_WORKERS:-1}"        # models of one evaluation at once, a process and a core each (a GPU node's
                                       # cores: its arms' number); greedy: the same records as one after the other
OUTCOME_FEEDBACK="${OUTCOME_FEEDBACK:-0}"  # 1: the reflection turns say whether the previous answer was right
                                       # (MAGE-style; paper: 0) in the warm start, every training and evaluation
WARMSTART_RECIPE="${WARMSTART_RECIPE:-world}"  # world: the world's own warm start; control: the default world's
                                       # positive-control recipe (python -m mr_search_embedded.warmstart --recipe)
WARM_START="${WARM_START:-}"             # an HF model dir to start every arm from (e.g. a warm start built on a GPU:
                                       # python -m mr_search_embedded.warmstart --device cuda); empty: built here, cached
REFLECTION_QUESTION="${REFLECTION_QUESTION:-}"  # 1: the reflection turns end with the question's line (paper: 0), in
                                       # every training and evaluation; empty: as the warm start was trained
ROLLOUT_ENGINE="${ROLLOUT_ENGINE:-}"    # cpu | hf (the same transformers rollout; trainer and rollout on one GPU) |
                                       # sglang | vllm (the engine serves rollouts on the one GPU, the lab's fast step:
                                       # python -m mr_search_embedded.gpu_step overrides fast); empty: hf when a GPU
                                       # is usable, else cpu
ENGINE_WARM="${ENGINE_WARM:-1}"          # 1: with SGLang on a GPU, its first-use kernels built once for every run
                                       # (scripts/lib/gpu.sh); 0: each engine builds what it needs
PLAN_GATE="${PLAN_GATE:-1}"              # 1: nothing trains or reads the test split until REPORT_DIR/plan.md is committed
                                       # as it stands (the report states the commit's time and each launch's); 0: a
                                       # run that tests nothing (a smoke run), said so in its report
PLAN_RECORD="${PLAN_RECORD:-}"          # where the checkout has no git history (a GPU node's copy of the tree): the
                                       # file of `python -m mr_search_embedded.compare gate-record` written where the
                                       # plan was committed; the gate passes when plan.md is byte for byte that plan
DRY_RUN="${DRY_RUN:-0}"

die() { echo "compare.sh: $*" >&2; exit 1; }
whole() { [[ "$2" =~ ^[1-9][0-9]*$ ]] || die "$1=$2 is not valid; use a whole number >= 1"; }
whole SEEDS "$SEEDS"
whole STEPS "$STEPS"
whole ATTEMPTS "$ATTEMPTS"
whole TURNS "$TURNS"
whole TRAIN_BATCH_SIZE "$TRAIN_BATCH_SIZE"
whole GROUP_SIZE "$GROUP_SIZE"
whole MAX_NEW_TOKENS "$MAX_NEW_TOKENS"
whole MAX_INFO_TOKENS "$MAX_INFO_TOKENS"
EVAL_RESPONSE_LENGTH="${EVAL_RESPONSE_LENGTH:-$(((1024 * ATTEMPTS + 2) / 3))}"  # the training's 1024 for K = 3
whole EVAL_RESPONSE_LENGTH "$EVAL_RESPONSE_LENGTH"
[[ "$MAX_QUESTIONS" =~ ^([1-9][0-9]*|[A-Za-z0-9_.-]+=[1-9][0-9]*)(,([1-9][0-9]*|[A-Za-z0-9_.-]+=[1-9][0-9]*))*$ ]] \
  || die "MAX_QUESTIONS=$MAX_QUESTIONS is not valid; use a whole number >= 1 or e.g. 100,embedded_3hop=217"
whole TIME_AIM_MIN "$TIME_AIM_MIN"
whole PARALLEL_RUNS "$PARALLEL_RUNS"
whole DEV_FREQ "$DEV_FREQ"
[[ "$BUDGET" =~ ^(tokens|updates)$ ]] || die "BUDGET=$BUDGET is not valid; use tokens (compute-fair) or updates (paper)"
[[ "$SOLO_STEPS" =~ ^[0-9]+$ ]] || die "SOLO_STEPS=$SOLO_STEPS is not valid; use a whole number >= 0"
[[ "$RUN_RETRIES" =~ ^[0-9]+$ ]] || die "RUN_RETRIES=$RUN_RETRIES is not valid; use a whole number >= 0"
[[ "$DEV_QUESTIONS" =~ ^[0-9]+$ ]] || die "DEV_QUESTIONS=$DEV_QUESTIONS is not valid; use a whole number >= 0"
[[ "$EVALUATE" =~ ^[01]$ ]] || die "EVALUATE=$EVALUATE is not valid; use 1 (evaluate at STEPS) or 0 (train only)"
[[ "$EVALUATE" == 1 || "$BUDGET" == updates ]] \
  || die "EVALUATE=0 needs BUDGET=updates (BUDGET=tokens trains each seed's K = 1 arms between the evaluations)"
if [[ -n "$UNTIL_STEP" ]]; then
  whole UNTIL_STEP "$UNTIL_STEP"
  [[ "$BUDGET" == updates ]] || die "UNTIL_STEP needs BUDGET=updates (a token-matched arm's steps are known at the end)"
  ((UNTIL_STEP <= STEPS)) || die "UNTIL_STEP=$UNTIL_STEP is past STEPS=$STEPS; give a step <= STEPS"
fi
until_step="${UNTIL_STEP:-$STEPS}"  # where this start's training stops (BUDGET=updates)
# 1: this start goes on to the evaluations and the report (to STEPS, EVALUATE=1); 0: a piece or training only
evaluating=0
[[ "$EVALUATE" == 0 || "$until_step" != "$STEPS" ]] || evaluating=1
has_step() {  # has_step <run dir> <step>: its checkpoint is there, whole (verl names it in its tracker once saved)
  local tracked
  tracked="$(cat "$1/checkpoints/latest_checkpointed_iteration.txt" 2>/dev/null || echo 0)"
  [[ -d "$1/checkpoints/global_step_$2" && "$tracked" =~ ^[0-9]+$ ]] && ((tracked >= $2))
}
[[ "$TOKEN_TOLERANCE" =~ ^0?\.[0-9]+$ ]] || die "TOKEN_TOLERANCE=$TOKEN_TOLERANCE is not valid; use a fraction like 0.05"
[[ "$LR" =~ ^[0-9]*\.?[0-9]+([eE][-+]?[0-9]+)?$ ]] || die "LR=$LR is not valid; use a number like 1e-4"
[[ "$OVERLAP_EVAL" =~ ^[01]$ ]] || die "OVERLAP_EVAL=$OVERLAP_EVAL is not valid; use 1 (default) or 0"
[[ "$EVAL_WORKERS" =~ ^[1-9][0-9]*$ ]] || die "EVAL_WORKERS=$EVAL_WORKERS is not valid; use a whole number >= 1"
[[ "$ENGINE_WARM" =~ ^[01]$ ]] || die "ENGINE_WARM=$ENGINE_WARM is not valid; use 1 (default) or 0"
[[ "$PLAN_GATE" =~ ^[01]$ ]] || die "PLAN_GATE=$PLAN_GATE is not valid; use 1 (the plan committed first) or 0 (no test)"
[[ "$WARMSTART_RECIPE" =~ ^(world|control)$ ]] \
  || die "WARMSTART_RECIPE=$WARMSTART_RECIPE is not valid; use world (the world's own) or control"
[[ "$WARMSTART_RECIPE" == world || -z "$WARM_START" ]] \
  || die "WARMSTART_RECIPE=$WARMSTART_RECIPE and WARM_START=$WARM_START both name a warm start; give one"
[[ "$OUTCOME_FEEDBACK" =~ ^[01]$ ]] || die "OUTCOME_FEEDBACK=$OUTCOME_FEEDBACK is not valid; use 0 (paper) or 1"
[[ -z "$WARM_START" || -f "$WARM_START/config.json" ]] \
  || die "WARM_START=$WARM_START holds no HF model (config.json); give a warm start's folder or leave it empty"
[[ "$REFLECTION_QUESTION" =~ ^[01]?$ ]] \
  || die "REFLECTION_QUESTION=$REFLECTION_QUESTION is not valid; use 0 (paper), 1, or leave it empty (the warm start's)"
[[ "$ROLLOUT_ENGINE" =~ ^(|cpu|hf|sglang|vllm)$ ]] \
  || die "ROLLOUT_ENGINE=$ROLLOUT_ENGINE is not valid; use cpu, hf, sglang or vllm (or leave it empty)"
[[ "$POLICY" =~ ^(tiny|small)$ ]] || die "POLICY=$POLICY is not valid; use tiny or small"
[[ "$SEED_BASE" =~ ^[0-9]+$ ]] || die "SEED_BASE=$SEED_BASE is not valid; use a whole number >= 0"
((ATTEMPTS > 1)) || die "ATTEMPTS=$ATTEMPTS is not valid; MR-Search needs >= 2 attempts (the baseline is K = 1)"
# The engine train_grpo_step.sh picks for the embedded preset: in the plan, and the report with the card it ran on.
# shellcheck source=lib/gpu.sh
source "$ROOT/scripts/lib/gpu.sh"
if [[ -z "$ROLLOUT_ENGINE" ]]; then
  if has_gpu; then ROLLOUT_ENGINE=hf; else ROLLOUT_ENGINE=cpu; fi
fi
BASELINE_STEPS="${BASELINE_STEPS:-$((4 * STEPS))}"
whole BASELINE_STEPS "$BASELINE_STEPS"
MINI_BATCH="${MINI_BATCH:-$TRAIN_BATCH_SIZE}"
whole MINI_BATCH "$MINI_BATCH"
((TRAIN_BATCH_SIZE % MINI_BATCH == 0)) \
  || die "MINI_BATCH=$MINI_BATCH does not divide TRAIN_BATCH_SIZE=$TRAIN_BATCH_SIZE; give a divisor of it"
[[ "$RETRIEVER_URL" =~ ^http://(127\.0\.0\.1|localhost):([0-9]+)/?$ ]] \
  || die "RETRIEVER_URL=$RETRIEVER_URL is not valid; use http://127.0.0.1:<port> (a local service, started if silent)"
RETRIEVER_URL="${RETRIEVER_URL%/}"
ROWS=$((TRAIN_BATCH_SIZE * GROUP_SIZE))
WORK_DIR="$(realpath -m "${WORK_DIR:-$ROOT/runs/compare/$(date +%Y%m%d-%H%M%S)}")"
REPORT_DIR="$(realpath -m "$REPORT_DIR")"
feedback_flag=()      # python -m mr_search_embedded.warmstart / mr_search.eval / mr_search_embedded.compare fresh
feedback_override=()  # train_grpo_step.sh (Hydra)
if [[ "$OUTCOME_FEEDBACK" == 1 ]]; then
  feedback_flag=(--outcome-feedback)
  feedback_override=(mr_search.episode.outcome_feedback=true)
fi
seeds=()
for ((i = 0; i < SEEDS; i++)); do seeds+=($((SEED_BASE + i))); done

plan_args=(--arms "$ARMS" --attempts "$ATTEMPTS" --turns "$TURNS" --seeds "${seeds[@]}" --steps "$STEPS"
  --baseline-steps "$BASELINE_STEPS" --batch "$TRAIN_BATCH_SIZE" --group "$GROUP_SIZE" --lr "$LR"
  --tolerance "$TOKEN_TOLERANCE" --max-questions "$MAX_QUESTIONS" --response-length "$EVAL_RESPONSE_LENGTH"
  --max-new-tokens "$MAX_NEW_TOKENS" --max-information-tokens "$MAX_INFO_TOKENS" --world "$MR_SEARCH_WORLD"
  --policy "$POLICY" --aim-minutes "$TIME_AIM_MIN" --overlap "$OVERLAP_EVAL" --budget "$BUDGET"
  --dev-questions "$DEV_QUESTIONS" --dev-freq "$DEV_FREQ" --parallel "$PARALLEL_RUNS" --engine "$ROLLOUT_ENGINE"
  --positive-control "$OUTCOME_FEEDBACK" --mini-batch "$MINI_BATCH" --warmstart-recipe "$WARMSTART_RECIPE")
[[ -z "$TIMINGS" ]] || plan_args+=(--timings "$TIMINGS")
echo "compare.sh: arms $ARMS; seeds ${seeds[*]}; world $MR_SEARCH_WORLD, policy $POLICY;" \
  "outcome feedback $([[ $OUTCOME_FEEDBACK == 1 ]] && echo "on (MAGE-style)" || echo "off (paper)")"
echo "  work folder $WORK_DIR, report $REPORT_DIR, retrieval $RETRIEVER_URL"
if [[ "$DRY_RUN" == 1 ]]; then
  "$PYTHON" -m mr_search_embedded.compare plan "${plan_args[@]}" || die "the plan could not be made (above)"
  exit 0
fi

# The arms: name, K, turns per attempt, gamma (- where it plays no part), K_eval, evaluation shape, first launch.
arm_lines="$("$PYTHON" -m mr_search_embedded.compare arms --arms "$ARMS" --attempts "$ATTEMPTS" --turns "$TURNS")" \
  || die "ARMS=$ARMS could not be read (above)"
declare -A ARM_K ARM_TURNS ARM_GAMMA ARM_KEVAL ARM_SHAPE ARM_FIRST
arms=()
shapes=()
while read -r name k turns gamma keval shape first; do
  arms+=("$name")
  ARM_K[$name]=$k ARM_TURNS[$name]=$turns ARM_GAMMA[$name]=$gamma ARM_KEVAL[$name]=$keval ARM_SHAPE[$name]=$shape
  if [[ "$first" == reference ]]; then ARM_FIRST[$name]=$STEPS; else ARM_FIRST[$name]=$BASELINE_STEPS; fi
  [[ " ${shapes[*]} " == *" $shape "* ]] || shapes+=("$shape")
done <<<"$arm_lines"

# An engine trains on a GPU. A start on a machine without one (a CPU box evaluating the pieces a GPU node trained)
# gets past here only when every run already holds its last step, so that nothing would train.
if [[ "$ROLLOUT_ENGINE" =~ ^(hf|sglang|vllm)$ ]] && ! has_gpu; then
  [[ "$BUDGET" == updates ]] || die "ROLLOUT_ENGINE=$ROLLOUT_ENGINE trains on a GPU and this machine has none;" \
    "use ROLLOUT_ENGINE=cpu, or a GPU machine"
  for seed in "${seeds[@]}"; do
    for arm in "${arms[@]}"; do
      has_step "$WORK_DIR/seed_$seed/$arm" "$until_step" \
        || die "ROLLOUT_ENGINE=$ROLLOUT_ENGINE trains on a GPU and this machine has none, but seed_$seed/$arm has" \
          "no checkpoint at step $until_step in $WORK_DIR: train it on a GPU machine (or unpack its" \
          "pieces here: python -m mr_search_embedded.compare piece-unpack), or use ROLLOUT_ENGINE=cpu"
    done
  done
fi

mkdir -p "$WORK_DIR"
# shellcheck source=lib/retrieval.sh
source "$ROOT/scripts/lib/retrieval.sh"
# shellcheck source=lib/background.sh
source "$ROOT/scripts/lib/background.sh"  # the evaluation beside the next training (OVERLAP_EVAL=1)
# shellcheck source=lib/pool.sh
source "$ROOT/scripts/lib/pool.sh"  # the training runs side by side (BUDGET=updates)
trap 'pool_stop; background_stop; engine_warm_stop; retrieval_stop_started' EXIT
trap 'exit 143' TERM
trap 'exit 130' INT

# --- the splits and the plan: the test, written before anything trains ---
mapfile -t files < <("$PYTHON" -m mr_search_embedded.splits train dev test)
((${#files[@]} == 3)) || die "the splits could not be built (python -m mr_search_embedded.splits train dev test)"
TRAIN_FILE="${files[0]}" DEV_FILE="${files[1]}" TEST_FILE="${files[2]}"
"$PYTHON" -m mr_search_embedded.compare plan "${plan_args[@]}" --train "$TRAIN_FILE" --dev "$DEV_FILE" \
  --test "$TEST_FILE" --out "$WORK_DIR" --report-dir "$REPORT_DIR" || die "the plan could not be written (above)"
echo "compare.sh: the plan is in $WORK_DIR/plan.md and $REPORT_DIR/plan.md"
DEV_SLICE="$WORK_DIR/dev_slice.parquet"  # the dev curves' questions (DEV_QUESTIONS)
if ((DEV_QUESTIONS)); then
  "$PYTHON" -m mr_search_embedded.compare dev-slice --dev "$DEV_FILE" --per-source "$DEV_QUESTIONS" \
    --out "$DEV_SLICE" || die "the dev slice could not be written (above)"
fi
SAVE_EVERY=1  # the token match evaluates the step closest to the budget: every step's checkpoint is kept
[[ "$BUDGET" == tokens ]] || SAVE_EVERY="${SAVE_FREQ:-10}"  # equal updates: the last step's (verl always saves it)
gate_flag=()
[[ "$PLAN_GATE" == 1 ]] || gate_flag=(--off)
[[ -z "$PLAN_RECORD" ]] || gate_flag+=(--record "$PLAN_RECORD")
"$PYTHON" -m mr_search_embedded.compare gate --plan "$REPORT_DIR/plan.md" --work "$WORK_DIR" "${gate_flag[@]}" \
  || die "the plan gate stopped the run (above): nothing was trained or evaluated"
launched() {  # launched <what>: the launch and its UTC time in WORK_DIR/launches.jsonl (the report states them)
  "$PYTHON" -m mr_search_embedded.compare launch --work "$WORK_DIR" --what "$1" >/dev/null
}

# --- shared setup: warm start, retrieval (cached after the first run) ---
if [[ -n "$WARM_START" ]]; then
  WARM="$(realpath "$WARM_START")"
  echo "compare.sh: starting from the given warm start $WARM"
else
  echo "compare.sh: preparing the warm-started tiny policy (first run: a few minutes, then cached)"
  WARM="$("$PYTHON" -m mr_search_embedded.warmstart --policy "$POLICY" "${feedback_flag[@]}" \
    --recipe "$WARMSTART_RECIPE" | tail -n 1)"
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
fi
if [[ "$ROLLOUT_ENGINE" == sglang && "$ENGINE_WARM" == 1 ]] && has_gpu; then
  echo "compare.sh: building SGLang's first-use kernels once for every run (background; log: $WORK_DIR/engine_warm.log)"
  engine_warm_start "$WARM" "$WORK_DIR/engine_warm.log"
fi
if ! retrieval_healthy "$RETRIEVER_URL"; then
  echo -n "compare.sh: "
  retrieval_start_local "$RETRIEVER_URL" "$WORK_DIR/retrieval.log" "$RETRIEVER_READY_TIMEOUT"
fi
# A service that was already running must serve this world's corpus (another world's would score every search).
"$PYTHON" -m mr_search_embedded.world.serves --url "$RETRIEVER_URL/retrieve" \
  || die "the retrieval service at $RETRIEVER_URL does not serve the $MR_SEARCH_WORLD world; stop it or set RETRIEVER_URL"

machine="$(nproc) CPU cores ($(lscpu 2>/dev/null | sed -n 's/^Model name: *//p' | head -n 1)), \
$(awk '/MemTotal/ {printf "%.0f GB RAM", $2 / 1048576}' /proc/meminfo)"
step_overrides=()  # the lab's step on an engine (mr_search_embedded/gpu_step.py says why each)
if [[ "$ROLLOUT_ENGINE" =~ ^(sglang|vllm)$ ]]; then
  mapfile -t step_overrides < <("$PYTHON" -m mr_search_embedded.gpu_step overrides fast)
  # A KV cache sized for the tiny policy, so that several runs share the card; eager unless ENFORCE_EAGER=0 (what CUDA
  # graphs change for the lab's batch: scripts/bench/engine_decode_cpu.py); no memory saver (policy and engine fit
  # side by side).
  export GPU_MEMORY_UTILIZATION="${GPU_MEMORY_UTILIZATION:-0.1}" ENFORCE_EAGER="${ENFORCE_EAGER:-1}"
  export SGLANG_MEMORY_SAVER="${SGLANG_MEMORY_SAVER:-0}"
fi
if [[ "$ROLLOUT_ENGINE" =~ ^(hf|sglang|vllm)$ ]] && has_gpu; then
  machine+=", training and rollouts ($ROLLOUT_ENGINE) on one GPU ($(gpu_name)), evaluation on CPU"
elif [[ "$ROLLOUT_ENGINE" =~ ^(hf|sglang|vllm)$ ]]; then
  machine+=", no GPU: evaluation only, of runs trained ($ROLLOUT_ENGINE) on the GPU the earlier starts name"
else
  machine+=", no GPU used, shared with other jobs"
fi
knobs=""  # the knobs that are not the defaults lead the command in the report
[[ "$MR_SEARCH_WORLD" == default ]] || knobs+="MR_SEARCH_WORLD=$MR_SEARCH_WORLD "
[[ -z "$WARM_START" ]] || knobs+="WARM_START=$WARM "
[[ "$WARMSTART_RECIPE" == world ]] || knobs+="WARMSTART_RECIPE=$WARMSTART_RECIPE "
[[ "$POLICY" == tiny ]] || knobs+="POLICY=$POLICY "
[[ "$OUTCOME_FEEDBACK" == 0 ]] || knobs+="OUTCOME_FEEDBACK=1 "
[[ "$ROLLOUT_ENGINE" =~ ^(cpu|hf)$ ]] || knobs+="ROLLOUT_ENGINE=$ROLLOUT_ENGINE "
[[ "$BUDGET" == tokens ]] || knobs+="BUDGET=$BUDGET PARALLEL_RUNS=$PARALLEL_RUNS "
((DEV_QUESTIONS == 0)) || knobs+="DEV_QUESTIONS=$DEV_QUESTIONS DEV_FREQ=$DEV_FREQ "
[[ "$TRAIN_BATCH_SIZE $GROUP_SIZE" == "4 4" ]] || knobs+="TRAIN_BATCH_SIZE=$TRAIN_BATCH_SIZE GROUP_SIZE=$GROUP_SIZE "
"$PYTHON" - "$WORK_DIR/meta.json" <<PY
import json, sys
from datetime import datetime, timezone
meta = {
    "command": "${knobs}ARMS='${arms[*]}' SEEDS=$SEEDS STEPS=$STEPS BASELINE_STEPS=$BASELINE_STEPS ATTEMPTS=$ATTEMPTS TURNS=$TURNS LR=$LR MAX_QUESTIONS=$MAX_QUESTIONS make compare",
    "machine": "$machine",
    "warm start": "$WARM",
    "reflection turns": "$([[ $trained_restating == 1 ]] && echo "restate the question" || echo "fixed (paper)"), outcome feedback $([[ $OUTCOME_FEEDBACK == 1 ]] && echo on || echo off)",
    "work": "$WORK_DIR",
    "engine": "$ROLLOUT_ENGINE",
    "positive_control": $([[ $OUTCOME_FEEDBACK == 1 ]] && echo True || echo False),  # outcome feedback: credit by construction
    "meta written": datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
}
# A work folder started again (a piece, a node's runs evaluated elsewhere) keeps each earlier start's machine.
try:
    old = json.load(open(sys.argv[1]))
except FileNotFoundError:
    old = {}
earlier = list(old.get("earlier starts", []))
if old.get("machine"):
    earlier.append(f"{old.get('meta written', 'at an unrecorded time')}: {old['machine']}")
if earlier:
    meta["earlier starts"] = earlier
open(sys.argv[1], "w").write(json.dumps(meta, indent=1) + "\n")
PY

# --- training: one verl run at a time ---
train() {  # train <run dir> <arm> <steps> <seed>
  local run="$1" arm="$2" steps="$3" seed="$4" gamma="${ARM_GAMMA[$2]}" start
  if has_step "$run" "$steps"; then
    echo "compare.sh: $run already has step $steps; skipped"
    return 0
  fi
  if [[ "$WAIT_FOR_IDLE" == 1 ]]; then
    # A shared small machine holds one verl run at a time: wait for any other to finish.
    while pgrep -f "verl.trainer.main_ppo" >/dev/null; do sleep 10; done
  fi
  [[ "$gamma" != - ]] || gamma=""  # K = 1: no later attempt to discount; the config's value stands
  start="$(date +%s)"
  if ((${POOL_TRY:-0})); then  # started again by the pool after a failure: from the last checkpoint
    launched "train ${run#"$WORK_DIR"/} to step $steps (launch $((POOL_TRY + 1)), after a failure)"
  else
    launched "train ${run#"$WORK_DIR"/} to step $steps"
  fi
  # Without dev curves VAL_FILE is the train parquet: verl builds a validation set at start even with TEST_FREQ=-1,
  # and training must open neither dev nor test. With them: the dev slice at K = ATTEMPTS, before the first step too.
  local val_file="$TRAIN_FILE" test_freq=-1 dev=()
  if ((DEV_QUESTIONS)); then
    val_file="$DEV_SLICE" test_freq="$DEV_FREQ"
    dev=("mr_search.episode.val_attempts=$ATTEMPTS" "trainer.val_before_train=True")
  fi
  LR="$LR" PRESET=embedded ROLLOUT_ENGINE="$ROLLOUT_ENGINE" RUN_DIR="$run" ATTEMPTS="${ARM_K[$arm]}" \
    MAX_TURNS="${ARM_TURNS[$arm]}" GAMMA="$gamma" ADV_ESTIMATOR=mr_search TOTAL_STEPS="$steps" MODEL_PATH="$WARM" \
    TRAIN_FILE="$TRAIN_FILE" VAL_FILE="$val_file" TRAIN_BATCH_SIZE="$TRAIN_BATCH_SIZE" GROUP_SIZE="$GROUP_SIZE" \
    PPO_MINI_BATCH_SIZE="$MINI_BATCH" SAVE_FREQ="$SAVE_EVERY" TEST_FREQ="$test_freq" RETRIEVER_URL="$RETRIEVER_URL" START_RETRIEVER=0 PYTHON="$PYTHON" \
    bash "$ROOT/train_grpo_step.sh" "data.seed=$seed" "actor_rollout_ref.rollout.seed=$seed" \
    "actor_rollout_ref.actor.data_loader_seed=$seed" "trainer.max_actor_ckpt_to_keep=null" "${feedback_override[@]}" \
    "${restate_override[@]}" "${step_overrides[@]}" "${dev[@]}" \
    >>"$run.log" 2>&1 || { echo "compare.sh: training failed; log: $run.log" >&2; return 1; }
  echo "$start $(date +%s) $steps" >>"$run.times"  # the next plan's launch overhead
}

match_budget() {  # match_budget <seed dir> <arm>: prints "<steps the arm must have> <step to evaluate>"
  "$PYTHON" -m mr_search_embedded.compare budget --reference "$1/mr_search" --run "$1/$2" --rows "$ROWS" \
    --out "$1/budget_$2.json" --tolerance "$TOKEN_TOLERANCE"
}

evaluate() {  # evaluate <out dir> <attempts> <turns> LABEL=PATH...
  local out="$1" attempts="$2" turns="$3"
  shift 3
  local models=()
  for m in "$@"; do models+=(--model "$m"); done
  launched "evaluate ${out#"$WORK_DIR"/} on the test split"
  OMP_NUM_THREADS=1 "$PYTHON" -m mr_search.eval "${models[@]}" --data "$TEST_FILE" --out "$out.tmp" \
    --retriever-url "$RETRIEVER_URL/retrieve" --attempts "$attempts" --max-turns "$turns" \
    --max-questions "$MAX_QUESTIONS" --no-progress --max-new-tokens "$MAX_NEW_TOKENS" \
    --max-information-tokens "$MAX_INFO_TOKENS" --response-length "$EVAL_RESPONSE_LENGTH" "${feedback_flag[@]}" \
    "${restate_flag[@]}" --workers "$EVAL_WORKERS" >"$out.log" 2>&1 || die "evaluation failed; log: $out.log"
  rm -rf "$out"
  mv "$out.tmp" "$out"
}

# An evaluation is kept only if it evaluated these models with these settings (a continued run may change them).
evaluated() {  # evaluated <out dir> <attempts> <turns> LABEL=PATH...: true if <out dir> holds that evaluation
  local out="$1" attempts="$2" turns="$3"
  shift 3
  "$PYTHON" -m mr_search_embedded.compare fresh --results "$out/results.json" --models "$@" \
    --k-eval "$attempts" --max-turns "$turns" --max-questions "$MAX_QUESTIONS" --max-new-tokens "$MAX_NEW_TOKENS" \
    --max-information-tokens "$MAX_INFO_TOKENS" --response-length "$EVAL_RESPONSE_LENGTH" "${feedback_flag[@]}" \
    "${restate_flag[@]}"
}

evaluate_if_stale() {  # evaluate_if_stale <what> <out dir> <attempts> <turns> LABEL=PATH...
  local what="$1"
  shift
  if evaluated "$@"; then
    echo "compare.sh: $what: $1 already holds it; skipped"
  else
    echo "compare.sh: $what ($(date -u +%H:%M:%S) UTC)"
    evaluate "$@"
  fi
}

test_read_recorded=0
record_test_read() {  # the ledger next to the test parquet: this comparison's final evaluation reads it
  ((test_read_recorded)) && return 0
  "$PYTHON" -m mr_search_embedded.reads record --parquet "$TEST_FILE" --split test --reader comparison \
    --work "$WORK_DIR" || die "could not record the test read in the ledger next to $TEST_FILE"
  test_read_recorded=1
}

finish_evaluation() {  # waits for the evaluation in the background, if any; stops on its failure
  [[ -n "$BACKGROUND_PID" ]] || return 0
  background_finish || die "$BACKGROUND_WHAT failed (its log is named above)"
  echo "compare.sh: $BACKGROUND_WHAT done ($(date -u +%H:%M:%S) UTC)"
}

in_background() {  # in_background <what> COMMAND...: after the one in flight; beside training with OVERLAP_EVAL=1
  local what="$1"
  shift
  finish_evaluation
  record_test_read
  if [[ "$OVERLAP_EVAL" == 1 ]]; then
    background_start "$what" "$@"
  else
    "$@"
  fi
}

reference_shape="${ARM_SHAPE[mr_search]}"
# A piece of a longer run (UNTIL_STEP) or a start that trains only (EVALUATE=0): the warm start is evaluated with the
# start that evaluates.
((evaluating == 0)) || in_background "the warm start's test evaluation" evaluate_if_stale "evaluating the warm start" \
  "$WORK_DIR/warm_eval_$reference_shape" "${ARM_KEVAL[mr_search]}" "${ARM_TURNS[mr_search]}" "warm_start=$WARM"

evaluate_seed() {  # evaluate_seed <seed dir> <arm=step ...>: every shape's evaluation of the seed's checkpoints
  local dir="$1" shape arm
  shift
  for shape in "${shapes[@]}"; do
    local pair=() attempts="" turns=""
    for entry in "$@"; do
      arm="${entry%%=*}"
      [[ "${ARM_SHAPE[$arm]}" == "$shape" ]] || continue
      pair+=("$arm=$dir/$arm/checkpoints/global_step_${entry#*=}")
      attempts="${ARM_KEVAL[$arm]}" turns="${ARM_TURNS[$arm]}"
    done
    evaluate_if_stale "$(basename "$dir"): evaluating ${pair[*]%%=*} ($shape)" "$dir/eval_$shape" "$attempts" \
      "$turns" "${pair[@]}"
  done
}

if [[ "$BUDGET" == updates ]]; then
  # Equal updates: every (seed, arm) run trains to the same step, PARALLEL_RUNS at once on the card; the first alone
  # for SOLO_STEPS steps (the cost of sharing: its step times alone beside the shared ones).
  pending=()
  for seed in "${seeds[@]}"; do
    for arm in "${arms[@]}"; do pending+=("$seed $arm"); done
  done
  pool_init "$PARALLEL_RUNS" "$RUN_RETRIES" "$LAUNCH_GAP"
  for job in "${pending[@]}"; do
    read -r seed arm <<<"$job"
    mkdir -p "$WORK_DIR/seed_$seed"
    pool_add "seed_$seed/$arm" train "$WORK_DIR/seed_$seed/$arm" "$arm" "$until_step" "$seed" || break
    echo "compare.sh: seed $seed: $arm to step $until_step ($(date -u +%H:%M:%S) UTC)"
    sleep "$LAUNCH_GAP"  # runs that start at one instant race for the engines' and Ray's ports
    if [[ "$job" == "${pending[0]}" ]] && ((SOLO_STEPS && ${#pending[@]} > 1 && PARALLEL_RUNS > 1)); then
      echo "compare.sh: $arm of seed $seed trains $SOLO_STEPS steps alone first"
      until "$PYTHON" -m mr_search_embedded.compare logged --run "$WORK_DIR/seed_$seed/$arm" \
        --steps "$((SOLO_STEPS + 1))"; do
        pool_running "seed_$seed/$arm" || break
        sleep 5
      done
      launched "side by side from here"
    fi
  done
  pool_wait || die "training failed for good in ${POOL_FAILED[*]} (the runs in flight trained on to their end);" \
    "logs: $WORK_DIR/<seed>/<arm>.log"
  ((DEV_QUESTIONS == 0)) || "$PYTHON" -m mr_search_embedded.compare curves --work "$WORK_DIR" --out "$REPORT_DIR"
  if ((until_step < STEPS)); then
    echo "compare.sh: every arm trained to step $until_step of $STEPS: this piece is done; the same WORK_DIR without" \
      "UNTIL_STEP (or with a later one) continues from the checkpoints and evaluates at step $STEPS"
    exit 0
  fi
  if [[ "$EVALUATE" == 0 ]]; then
    echo "compare.sh: every arm trained to step $STEPS (EVALUATE=0: nothing evaluated); the same WORK_DIR with" \
      "EVALUATE=1, here or on any machine that holds its runs, evaluates them and writes the report"
    exit 0
  fi
fi

for seed in "${seeds[@]}"; do
  dir="$WORK_DIR/seed_$seed"
  mkdir -p "$dir"
  chosen=()
  for arm in "${arms[@]}"; do  # mr_search first: its tokens are the budget of the others
    if [[ "$BUDGET" == updates ]]; then  # trained above; its tokens beside MR-Search's at the same step
      "$PYTHON" -m mr_search_embedded.compare budget --reference "$dir/mr_search" --run "$dir/$arm" --rows "$ROWS" \
        --out "$dir/budget_$arm.json" --at-step "$STEPS" >/dev/null || die "the token count of $arm failed (above)"
      chosen+=("$arm=$STEPS")
      continue
    fi
    echo "compare.sh: seed $seed: $arm, ${ARM_FIRST[$arm]} steps ($(date -u +%H:%M:%S) UTC)"
    train "$dir/$arm" "$arm" "${ARM_FIRST[$arm]}" "$seed"
    read -r needed step have < <(match_budget "$dir" "$arm") || die "the token match of $arm failed (above)"
    while ((needed > have)); do
      echo "compare.sh: seed $seed: $arm short of MR-Search's model-written tokens; resuming to $needed steps"
      train "$dir/$arm" "$arm" "$needed" "$seed"
      read -r needed step have < <(match_budget "$dir" "$arm") || die "the token match of $arm failed (above)"
    done
    chosen+=("$arm=$step")
  done
  in_background "seed $seed: the test evaluation" evaluate_seed "$dir" "${chosen[@]}"
  echo "compare.sh: seed $seed trained ($(date -u +%H:%M:%S) UTC)"
done
finish_evaluation

report=(--work "$WORK_DIR" --out "$REPORT_DIR" --rows "$ROWS")
[[ -z "$NOTE" ]] || report+=(--note "$NOTE")
"$PYTHON" -m mr_search_embedded.compare report "${report[@]}"
echo "compare.sh: done in ${SECONDS}s. Report: $REPORT_DIR/report.md"
exit
}
