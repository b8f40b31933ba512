# shellcheck shell=bash
# Shared by train_grpo_step.sh, scripts/gpu_check.sh, examples/embedded_world/scripts/eval.sh and
# examples/embedded_world/scripts/compare.sh (sourced, not run): find the retrieval service, start the embedded one
# when nothing answers (on a free port when the caller picked none), and stop only what was started here.
#
# Needs from the caller: $ROOT (the repository), $PYTHON, and a `die MESSAGE` function that exits.
# Usage:
#   source "$ROOT/scripts/lib/retrieval.sh"
#   trap retrieval_stop_started EXIT
#   retrieval_healthy "$URL" || retrieval_start_local "$URL" "$LOG_FILE" "$TIMEOUT_SECONDS"
#   RETRIEVER_URL="http://127.0.0.1:$(retrieval_free_port)"
#   retrieval_launch "$RETRIEVER_URL" "$LOG_FILE" "$TIMEOUT_SECONDS"   # returns at once: prepare other things here
#   retrieval_wait_free "$LOG_FILE" "$TIMEOUT_SECONDS"                 # a port taken meanwhile: another one

RETRIEVAL_STARTED_PID=""

# Exit status 0 when GET <url>/health answers 200 within 2 s.
retrieval_healthy() {
  "$PYTHON" - "${1%/}/health" 2>/dev/null <<'PY'
import sys, urllib.request
sys.exit(0 if urllib.request.urlopen(sys.argv[1], timeout=2).status == 200 else 1)
PY
}

# A TCP port of 127.0.0.1 that nothing listens on now, the kernel's pick (ports of the ephemeral range, drawn at
# random: two launches started at once get two ports).
retrieval_free_port() {
  "$PYTHON" -c 'import socket
with socket.socket() as sock:
    sock.bind(("127.0.0.1", 0))
    print(sock.getsockname()[1])'
}

# Starts retrieval_launch.sh (the embedded default unless RETRIEVER_* variables say otherwise) on the port of a
# local URL, logs to a file, and waits until /health answers; dies with the reason otherwise.
retrieval_start_local() {
  retrieval_launch "$@"
  retrieval_wait_started "$@" || die "the retrieval service exited; see $2"
}

# Starts retrieval_launch.sh on the port of a local URL in the background, logging to a file; returns at once.
retrieval_launch() {
  local url="${1%/}" log="$2" timeout="$3" port
  [[ "$url" =~ ^http://(127\.0\.0\.1|localhost):([0-9]+)$ ]] \
    || die "RETRIEVER_URL=$url does not answer and is not a local http://127.0.0.1:<port> to start a service on"
  port="${BASH_REMATCH[2]}"
  mkdir -p "$(dirname "$log")"
  echo "starting the embedded retrieval service on 127.0.0.1:$port (log: $log)"
  RETRIEVER_HOST=127.0.0.1 RETRIEVER_PORT="$port" PYTHON="$PYTHON" RETRIEVER_READY_TIMEOUT="$timeout" \
    bash "$ROOT/retrieval_launch.sh" >"$log" 2>&1 &
  RETRIEVAL_STARTED_PID=$!
}

# Waits until the service retrieval_launch started answers at URL: status 1 when it exited first; dies after TIMEOUT s.
retrieval_wait_started() {
  local url="${1%/}" log="$2" timeout="$3" deadline=$((SECONDS + $3))
  until retrieval_healthy "$url"; do
    if ! kill -0 "$RETRIEVAL_STARTED_PID" 2>/dev/null; then
      RETRIEVAL_STARTED_PID=""
      return 1
    fi
    ((SECONDS < deadline)) || die "$url/health not ready after ${timeout}s; see $log"
    sleep 1
  done
}

# retrieval_wait_started on RETRIEVER_URL, a port retrieval_free_port picked: when another process took the port
# between the pick and the service's bind, starts the service again on a new port, RETRIEVER_URL (three tries in all).
retrieval_wait_free() {
  local log="$1" timeout="$2" try
  for try in 1 2 3; do
    if ((try > 1)); then
      RETRIEVER_URL="http://127.0.0.1:$(retrieval_free_port)"
      echo "the port was taken before the service bound it; again on ${RETRIEVER_URL#http://}"
      retrieval_launch "$RETRIEVER_URL" "$log" "$timeout"
    fi
    retrieval_wait_started "$RETRIEVER_URL" "$log" "$timeout" && return 0
    grep -qi "address already in use" "$log" 2>/dev/null || die "the retrieval service exited; see $log"
  done
  die "the retrieval service found no free port in three tries; see $log"
}

# EXIT trap: stops the service only if this script started it (retrieval_launch.sh stops its server on TERM).
retrieval_stop_started() {
  if [[ -n "$RETRIEVAL_STARTED_PID" ]] && kill -0 "$RETRIEVAL_STARTED_PID" 2>/dev/null; then
    kill -TERM "$RETRIEVAL_STARTED_PID" 2>/dev/null || true
    wait "$RETRIEVAL_STARTED_PID" 2>/dev/null || true
  fi
}
