# shellcheck shell=bash
# Shared by train_grpo_step.sh, examples/embedded_world/scripts/eval.sh and examples/embedded_world/scripts/compare.sh (sourced, not run):
# find the retrieval service, start the embedded one when nothing answers, and stop only what was started here.
#
# Needs from the caller: $ROOT (the repository), $PYTHON, and a `die MESSAGE` function that exits.
# Usage:
#   source "$ROOT/scripts/lib/retrieval.sh"
#   trap retrieval_stop_started EXIT
#   retrieval_healthy "$URL" || retrieval_start_local "$URL" "$LOG_FILE" "$TIMEOUT_SECONDS"

RETRIEVAL_STARTED_PID=""

# Exit status 0 when GET <url>/health answers 200 within 2 s.
retrieval_healthy() {
  "$PYTHON" - "${1%/}/health" 2>/dev/null <<'PY'
import sys, urllib.request
sys.exit(0 if urllib.request.urlopen(sys.argv[1], timeout=2).status == 200 else 1)
PY
}

# Starts retrieval_launch.sh (the embedded default unless RETRIEVER_* variables say otherwise) on the port of a
# local URL, logs to a file, and waits until /health answers; dies with the reason otherwise.
retrieval_start_local() {
  local url="${1%/}" log="$2" timeout="$3" port deadline
  [[ "$url" =~ ^http://(127\.0\.0\.1|localhost):([0-9]+)$ ]] \
    || die "RETRIEVER_URL=$url does not answer and is not a local http://127.0.0.1:<port> to start a service on"
  port="${BASH_REMATCH[2]}"
  mkdir -p "$(dirname "$log")"
  echo "starting the embedded retrieval service on 127.0.0.1:$port (log: $log)"
  RETRIEVER_HOST=127.0.0.1 RETRIEVER_PORT="$port" PYTHON="$PYTHON" RETRIEVER_READY_TIMEOUT="$timeout" \
    bash "$ROOT/retrieval_launch.sh" >"$log" 2>&1 &
  RETRIEVAL_STARTED_PID=$!
  deadline=$((SECONDS + timeout))
  until retrieval_healthy "$url"; do
    kill -0 "$RETRIEVAL_STARTED_PID" 2>/dev/null || die "the retrieval service exited; see $log"
    ((SECONDS < deadline)) || die "$url/health not ready after ${timeout}s; see $log"
    sleep 1
  done
}

# EXIT trap: stops the service only if this script started it (retrieval_launch.sh stops its server on TERM).
retrieval_stop_started() {
  if [[ -n "$RETRIEVAL_STARTED_PID" ]] && kill -0 "$RETRIEVAL_STARTED_PID" 2>/dev/null; then
    kill -TERM "$RETRIEVAL_STARTED_PID" 2>/dev/null || true
    wait "$RETRIEVAL_STARTED_PID" 2>/dev/null || true
  fi
}
