#!/usr/bin/env bash
# Launches the MR-Search retrieval service and waits until /health says ready.
#
#   bash retrieval_launch.sh                      # embedded default: the embedded world's corpus, indexed once
#                                                 # (cached), served on 127.0.0.1:8000
#   RETRIEVER_TYPE=bm25 bash retrieval_launch.sh  # BM25 over the embedded default
#   RETRIEVER_INDEX=/data/e5_Flat.index RETRIEVER_CORPUS=/data/wiki-18.jsonl \
#     RETRIEVER_ENCODER=/models/e5-base-v2 RETRIEVER_GPUS=0,1 bash retrieval_launch.sh   # Search-R1's index as it is
#
# Every knob is an environment variable; extra arguments go to `mr-search-retrieval` unchanged
# (see `python -m mr_search_retrieval.server --help`).
set -euo pipefail

# --- network ---
RETRIEVER_HOST="${RETRIEVER_HOST:-127.0.0.1}"  # 0.0.0.0 exposes the service beyond this machine
RETRIEVER_PORT="${RETRIEVER_PORT:-8000}"

# --- data: an index; or a corpus, indexed once under $MR_SEARCH_CACHE; neither: the embedded world's corpus ---
export MR_SEARCH_CACHE="${MR_SEARCH_CACHE:-$HOME/.cache/mr_search}"
RETRIEVER_TYPE="${RETRIEVER_TYPE:-dense}"             # dense | bm25
RETRIEVER_INDEX="${RETRIEVER_INDEX:-}"                # mr-search-build-index's directory, a bare FAISS file, a Lucene dir
RETRIEVER_CORPUS="${RETRIEVER_CORPUS:-}"              # JSON lines {"id","contents"}; empty: from the index metadata
RETRIEVER_BACKEND="${RETRIEVER_BACKEND:-auto}"        # index built from a corpus: auto (faiss if installed) | faiss | torch
RETRIEVER_INDEX_TYPE="${RETRIEVER_INDEX_TYPE:-Flat}"  # index built from a corpus: FAISS index_factory string

# --- model ---
RETRIEVER_ENCODER="${RETRIEVER_ENCODER:-}"            # HF encoder directory; empty: bundled all-MiniLM-L6-v2
RETRIEVER_GPUS="${RETRIEVER_GPUS:-}"                  # e.g. 0,1 (sets CUDA_VISIBLE_DEVICES); empty: unchanged
RETRIEVER_DEVICE="${RETRIEVER_DEVICE:-auto}"          # encoder and index device: auto | cpu | cuda

# --- serving ---
RETRIEVER_TOPK="${RETRIEVER_TOPK:-3}"                 # default topk when a request sends null
RETRIEVER_MAX_BATCH="${RETRIEVER_MAX_BATCH:-0}"  # 0: auto (CPU lanes: 64 each; else 128, ~half the clients)
RETRIEVER_MAX_WAIT_MS="${RETRIEVER_MAX_WAIT_MS:-2}"
RETRIEVER_QUEUE_SIZE="${RETRIEVER_QUEUE_SIZE:-4096}"
RETRIEVER_HTTP_WORKERS="${RETRIEVER_HTTP_WORKERS:-0}"  # 0: one process; N: N HTTP fronts + one search worker (GPU: 4)
RETRIEVER_LANES="${RETRIEVER_LANES:-0}"  # batches computed at once; 0: auto (dense on CPU: one per core, else 1)
RETRIEVER_READY_TIMEOUT="${RETRIEVER_READY_TIMEOUT:-1800}"  # seconds to wait for /health (first run builds)
PYTHON="${PYTHON:-}"  # the env that has mr_search_retrieval; empty: python on PATH if it has it, else ./.venv's

# --- python: the one asked for; else the one on PATH when it has the service; else the project's .venv ---
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
has_service() { [[ -n "$1" ]] && "$1" -c 'import mr_search_retrieval' 2>/dev/null; }
if [[ -z "$PYTHON" ]]; then
  PYTHON="$(command -v python || command -v python3 || true)"
  if ! has_service "$PYTHON" && [[ -x "$ROOT/.venv/bin/python" ]]; then
    PYTHON="$ROOT/.venv/bin/python"
  fi
fi
if ! has_service "$PYTHON"; then
  echo "retrieval_launch.sh: ${PYTHON:-no python} has no mr_search_retrieval; make one with \`make setup\` (the project's .venv, used by itself) or \`pip install \"$ROOT/retrieval[faiss]\"\`, or set PYTHON=<a python that has it>" >&2
  exit 1
fi

# The embedded default: the embedded-world example (examples/embedded_world) builds its corpus and says where it is;
# the service itself knows nothing of that world. Its python may be another than the service's (e.g. the .venv).
if [[ -z "$RETRIEVER_INDEX" && -z "$RETRIEVER_CORPUS" ]]; then
  WORLD_PYTHON="$PYTHON"
  if ! "$WORLD_PYTHON" -c 'import mr_search_embedded' 2>/dev/null; then
    WORLD_PYTHON="$ROOT/.venv/bin/python"
    [[ -x "$WORLD_PYTHON" ]] && "$WORLD_PYTHON" -c 'import mr_search_embedded' 2>/dev/null || {
      echo "retrieval_launch.sh: no RETRIEVER_INDEX or RETRIEVER_CORPUS given, and no python here has the embedded" \
        "world for the default; set RETRIEVER_CORPUS=<JSON lines {\"id\",\"contents\"}> (indexed once, cached) or" \
        "RETRIEVER_INDEX=<index>, or pip install -e \"$ROOT/examples/embedded_world\" (make setup does)" >&2
      exit 1
    }
  fi
  echo "retrieval_launch.sh: preparing the embedded world's corpus (once; cached)"
  RETRIEVER_CORPUS="$("$WORLD_PYTHON" -m mr_search_embedded.prepare corpus | tail -n 1)"
fi

if [[ -n "$RETRIEVER_GPUS" ]]; then
  export CUDA_VISIBLE_DEVICES="$RETRIEVER_GPUS"
elif [[ "$RETRIEVER_DEVICE" == cpu || "$RETRIEVER_TYPE" == bm25 ]]; then
  # A CPU service sees no GPU: a library it imports could take GPU memory by itself (bm25s imports JAX when it is
  # installed, and JAX preallocates 75% of every visible GPU: 60 GB of an H100 before a colocated vLLM started,
  # 107,920 MiB of an H200 under a BM25 service started with the default device). BM25 has no GPU path at all.
  export CUDA_VISIBLE_DEVICES="" JAX_PLATFORMS=cpu
fi

args=(
  --host "$RETRIEVER_HOST" --port "$RETRIEVER_PORT"
  --retriever "$RETRIEVER_TYPE" --topk "$RETRIEVER_TOPK"
  --backend "$RETRIEVER_BACKEND" --index-type "$RETRIEVER_INDEX_TYPE"
  --device "$RETRIEVER_DEVICE" --index-device "$RETRIEVER_DEVICE"
  --max-batch-size "$RETRIEVER_MAX_BATCH" --max-wait-ms "$RETRIEVER_MAX_WAIT_MS" --queue-size "$RETRIEVER_QUEUE_SIZE"
  --http-workers "$RETRIEVER_HTTP_WORKERS" --lanes "$RETRIEVER_LANES"
)
[[ -n "$RETRIEVER_INDEX" ]] && args+=(--index-dir "$RETRIEVER_INDEX")
[[ -n "$RETRIEVER_CORPUS" ]] && args+=(--corpus "$RETRIEVER_CORPUS")
[[ -n "$RETRIEVER_ENCODER" ]] && args+=(--encoder "$RETRIEVER_ENCODER")

server_pid=""
cleanup() {
  # Stops only the server this script started; SIGTERM lets it finish in-flight requests.
  if [[ -n "$server_pid" ]] && kill -0 "$server_pid" 2>/dev/null; then
    kill -TERM "$server_pid" 2>/dev/null || true
    wait "$server_pid" 2>/dev/null || true
  fi
}
trap cleanup EXIT
trap 'exit 143' TERM
trap 'exit 130' INT

"$PYTHON" -m mr_search_retrieval.server "${args[@]}" "$@" &
server_pid=$!

url="http://${RETRIEVER_HOST/0.0.0.0/127.0.0.1}:${RETRIEVER_PORT}"
deadline=$((SECONDS + RETRIEVER_READY_TIMEOUT))
until "$PYTHON" - "$url/health" 2>/dev/null <<'EOF'
import sys, urllib.request
sys.exit(0 if urllib.request.urlopen(sys.argv[1], timeout=2).status == 200 else 1)
EOF
do
  if ! kill -0 "$server_pid" 2>/dev/null; then
    wait "$server_pid" && status=0 || status=$?
    echo "retrieval_launch.sh: the server exited (status $status) before becoming ready; see the log above" >&2
    server_pid=""
    exit 1
  fi
  if ((SECONDS >= deadline)); then
    echo "retrieval_launch.sh: $url/health not ready after ${RETRIEVER_READY_TIMEOUT}s" >&2
    exit 1
  fi
  sleep 1
done
echo "retrieval_launch.sh: ready at $url (POST $url/retrieve, docs at $url/docs, metrics at $url/metrics)"
wait "$server_pid"
