#!/usr/bin/env bash
# `make eval`: evaluates a policy on the embedded world's dev questions (SPLIT=test: the test split, for the one final
# evaluation) through the meta-episode loop (greedy, K_EVAL attempts) and writes results.md, results.json,
# em_by_attempt.png and trajectories.html.
#
#   bash examples/embedded_world/scripts/eval.sh                       # latest quickstart run under runs/, else the untrained tiny model
#   MODEL_PATH=runs/<run> bash examples/embedded_world/scripts/eval.sh # a run folder, a global_step_N checkpoint or an HF folder
#   K_EVAL=6 MAX_QUESTIONS=20 bash examples/embedded_world/scripts/eval.sh
#   MR_SEARCH_WORLD=namesake MODEL_PATH=... bash examples/embedded_world/scripts/eval.sh   # the namesake world's questions
#   MR_SEARCH_WORLD=threehop MODEL_PATH=... bash examples/embedded_world/scripts/eval.sh   # the threehop world's
#
# Every knob is an environment variable; extra arguments go to `python -m mr_search.eval` unchanged.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../../.." && pwd)"
PYTHON="${PYTHON:-python}"
export MR_SEARCH_CACHE="${MR_SEARCH_CACHE:-$HOME/.cache/mr_search}"

# --- world ---
MR_SEARCH_WORLD="${MR_SEARCH_WORLD:-default}"  # default | namesake | threehop: the embedded world, as every Python
                                               # step reads it
[[ -z "${WORLD+x}" ]] || { echo "eval.sh: WORLD is now MR_SEARCH_WORLD (WORLD=$WORLD given)" >&2; exit 1; }
[[ "$MR_SEARCH_WORLD" =~ ^(default|namesake|threehop)$ ]] \
  || { echo "eval.sh: MR_SEARCH_WORLD=$MR_SEARCH_WORLD is not valid; use default, namesake or threehop" >&2; exit 1; }
export MR_SEARCH_WORLD
SPLIT="${SPLIT:-dev}"                 # dev (to choose on) | test (once, when everything is chosen) | train
[[ "$SPLIT" =~ ^(train|dev|test)$ ]] \
  || { echo "eval.sh: SPLIT=$SPLIT is not valid; use dev (default), test or train" >&2; exit 1; }

# --- model ---
MODEL_PATH="${MODEL_PATH:-}"          # empty: the newest runs/embedded-* run with a checkpoint, else the tiny model
RUNS_DIR="${RUNS_DIR:-$ROOT/runs}"
LABEL="${LABEL:-}"                    # row label in the table; empty: derived from the model

# --- evaluation (defaults: the embedded training sizes, configs/mr_search_embedded.yaml) ---
K_EVAL="${K_EVAL:-3}"                 # attempts per meta-episode (may differ from K at training)
MAX_QUESTIONS="${MAX_QUESTIONS:-}"    # first N questions per data source; empty: all of the split's
MAX_TURNS="${MAX_TURNS:-3}"           # model turns per attempt
TOPK="${TOPK:-3}"                     # passages per search
MAX_NEW_TOKENS="${MAX_NEW_TOKENS:-48}"      # new tokens per model turn
MAX_INFO_TOKENS="${MAX_INFO_TOKENS:-256}"   # tokens of one <information> block
PROMPT_LENGTH="${PROMPT_LENGTH:-256}"
RESPONSE_LENGTH="${RESPONSE_LENGTH:-1024}"  # whole meta-episode budget
CONCURRENCY="${CONCURRENCY:-32}"
# torch threads of the evaluation process. A tiny model gains nothing from more, and on a busy machine
# two spinning intra-op threads per process make each step tens of times slower.
TORCH_THREADS="${TORCH_THREADS:-1}"

# --- retrieval ---
# base URL (POST /retrieve, GET /health); each opt-in world has its own port (namesake's as in compare.sh), so
# another world's service never answers for it
case "$MR_SEARCH_WORLD" in
  default) RETRIEVER_URL="${RETRIEVER_URL:-http://127.0.0.1:8000}" ;;
  namesake) RETRIEVER_URL="${RETRIEVER_URL:-http://127.0.0.1:8019}" ;;
  threehop) RETRIEVER_URL="${RETRIEVER_URL:-http://127.0.0.1:8020}" ;;
esac
START_RETRIEVER="${START_RETRIEVER:-auto}"    # auto: start retrieval_launch.sh when /health is silent; no: never
RETRIEVER_READY_TIMEOUT="${RETRIEVER_READY_TIMEOUT:-900}"

# --- output ---
OUT_DIR="${OUT_DIR:-}"                # empty: runs/eval/<label>-<date>

die() { echo "eval.sh: $*" >&2; exit 1; }

# shellcheck source=lib/retrieval.sh
source "$ROOT/scripts/lib/retrieval.sh"
trap retrieval_stop_started EXIT
trap 'exit 143' TERM
trap 'exit 130' INT

# --- which model ---
if [[ -z "$MODEL_PATH" ]]; then
  # The newest quickstart run (embedded preset) that saved a checkpoint.
  newest=""
  shopt -s nullglob
  runs=("$RUNS_DIR"/embedded-*/)
  shopt -u nullglob
  if ((${#runs[@]})); then
    while IFS= read -r run; do
      if compgen -G "${run%/}/checkpoints/global_step_*" >/dev/null; then newest="${run%/}"; break; fi
    done < <(ls -1dt "${runs[@]}")
  fi
  if [[ -n "$newest" ]]; then
    MODEL_PATH="$newest"
    LABEL="${LABEL:-$(basename "$newest")}"
  else
    echo "eval.sh: no quickstart run with a checkpoint under $RUNS_DIR; evaluating the untrained tiny model"
    MODEL_PATH="$("$PYTHON" -c 'from mr_search_embedded.tiny_model import ensure_tiny_model; print(ensure_tiny_model())')"
    LABEL="${LABEL:-untrained-tiny}"
  fi
fi
LABEL="${LABEL:-$(basename "$MODEL_PATH")}"
OUT_DIR="${OUT_DIR:-$ROOT/runs/eval/${LABEL}-$(date +%Y%m%d-%H%M%S)}"

# --- data ---
DATA_FILE="$("$PYTHON" -m mr_search_embedded.prepare "$SPLIT" | tail -n 1)"

# --- retrieval service ---
if ! retrieval_healthy "$RETRIEVER_URL"; then
  [[ "$START_RETRIEVER" != no ]] || die "no retrieval service answers at $RETRIEVER_URL/health (START_RETRIEVER=no)"
  echo -n "eval.sh: "
  retrieval_start_local "$RETRIEVER_URL" "$OUT_DIR/retrieval.log" "$RETRIEVER_READY_TIMEOUT"
fi

# --- evaluate ---
args=(
  --model "$LABEL=$MODEL_PATH" --data "$DATA_FILE" --out "$OUT_DIR"
  --retriever-url "$RETRIEVER_URL/retrieve"
  --attempts "$K_EVAL" --max-turns "$MAX_TURNS" --topk "$TOPK" --max-new-tokens "$MAX_NEW_TOKENS"
  --max-information-tokens "$MAX_INFO_TOKENS" --prompt-length "$PROMPT_LENGTH" --response-length "$RESPONSE_LENGTH"
  --concurrency "$CONCURRENCY"
)
[[ -z "$MAX_QUESTIONS" ]] || args+=(--max-questions "$MAX_QUESTIONS")
OMP_NUM_THREADS="$TORCH_THREADS" "$PYTHON" -m mr_search.eval "${args[@]}" "$@" >/dev/null
echo "eval.sh: results in $OUT_DIR"
echo "  $OUT_DIR/results.md  $OUT_DIR/results.json  $OUT_DIR/em_by_attempt.png  $OUT_DIR/trajectories.html"
echo "$OUT_DIR"
