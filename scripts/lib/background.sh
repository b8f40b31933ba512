# One job at a time in the background, beside the caller's foreground work (sourced by the shell entry points).
#
#   trap background_stop EXIT
#   background_start "seed 2's evaluation" some_function arg...   # after the job in flight has finished
#   background_finish || echo "$BACKGROUND_WHAT failed"            # waits; the job's exit status
#
# A job is a function or command run in a subshell; background_stop ends it and its direct children (a
# subshell does not pass SIGTERM on to the program it is waiting for).

BACKGROUND_PID=""
BACKGROUND_WHAT=""

# Waits for the job in flight, if any; returns its exit status (0 when none). BACKGROUND_WHAT keeps its name.
background_finish() {
  [[ -n "$BACKGROUND_PID" ]] || return 0
  local pid="$BACKGROUND_PID" status=0
  BACKGROUND_PID=""
  wait "$pid" || status=$?
  return "$status"
}

# background_start WHAT COMMAND [ARG...]: waits for the job in flight (its failure is returned and nothing starts),
# then starts COMMAND in the background.
background_start() {
  local what="$1"
  shift
  background_finish || return
  "$@" &
  BACKGROUND_PID=$!
  BACKGROUND_WHAT="$what"
}

# Ends the job in flight (for an EXIT trap); never fails.
background_stop() {
  [[ -n "$BACKGROUND_PID" ]] || return 0
  pkill -TERM -P "$BACKGROUND_PID" 2>/dev/null || true
  kill -TERM "$BACKGROUND_PID" 2>/dev/null || true
  BACKGROUND_PID=""
}
