# Jobs side by side, at most POOL_SIZE at once, each run again after a failure (sourced by compare.sh: its training
# runs on one card).
#
#   trap pool_stop EXIT
#   pool_init 8 1 10                          # size, retries a job, seconds before a retry
#   pool_add "seed_1/k1" train_run arg...     # waits for a free slot, then starts the job in the background
#   pool_wait || echo "failed: ${POOL_FAILED[*]}"
#
# A job that fails runs again, the same command, up to the retries (a training run resumes from its last checkpoint:
# a port raced at start-up or an engine lost mid-run costs one launch, not the runs beside it). The command sees
# POOL_TRY (0 on the first launch). Once a job has failed for good pool_add starts nothing more (a broken setting fails
# every run alike) while the jobs in flight go on to their end, so their steps are kept; pool_wait then returns 1.

POOL_SIZE=1 POOL_RETRIES=0 POOL_GAP=0
POOL_PIDS=() POOL_NAMES=() POOL_FAILED=()

pool_init() {  # pool_init <size> <retries> <gap s>
  POOL_SIZE="$1" POOL_RETRIES="$2" POOL_GAP="$3"
  POOL_PIDS=() POOL_NAMES=() POOL_FAILED=()
}

_pool_job() {  # _pool_job <command...>: the command, again after each failure up to POOL_RETRIES times
  local try=0 status
  while true; do
    status=0
    POOL_TRY="$try" "$@" || status=$?
    ((status != 0 && try < POOL_RETRIES)) || return "$status"
    try=$((try + 1))
    echo "pool: '$*' failed (exit $status); launch $((try + 1)) of $((POOL_RETRIES + 1)) in $POOL_GAP s" >&2
    sleep "$POOL_GAP"
  done
}

_pool_reap() {  # waits until a job in flight has ended; a failure goes to POOL_FAILED
  # Polled: `wait -n PID...` skips a job that ended before the call ("no such job") and would lose its status.
  local i status
  while true; do
    for i in "${!POOL_PIDS[@]}"; do
      ! kill -0 "${POOL_PIDS[$i]}" 2>/dev/null || continue
      status=0
      wait "${POOL_PIDS[$i]}" || status=$?  # bash keeps an ended child's status for `wait PID`
      ((status == 0)) || POOL_FAILED+=("${POOL_NAMES[$i]}")
      unset 'POOL_PIDS[i]' 'POOL_NAMES[i]'
      POOL_PIDS=("${POOL_PIDS[@]}") POOL_NAMES=("${POOL_NAMES[@]}")
      return 0
    done
    sleep 0.5
  done
}

pool_add() {  # pool_add <name> <command...>: false, starting nothing, once a job has failed for good
  local name="$1"
  shift
  while ((${#POOL_PIDS[@]} >= POOL_SIZE && ${#POOL_FAILED[@]} == 0)); do _pool_reap; done
  ((${#POOL_FAILED[@]} == 0)) || return 1
  _pool_job "$@" &
  POOL_PIDS+=($!) POOL_NAMES+=("$name")
}

pool_running() {  # pool_running <name>: true while that job is in flight
  local i
  for i in "${!POOL_NAMES[@]}"; do
    [[ "${POOL_NAMES[$i]}" != "$1" ]] || { kill -0 "${POOL_PIDS[$i]}" 2>/dev/null; return; }
  done
  return 1
}

pool_wait() {  # waits for every job; 1 if any failed for good (POOL_FAILED names them)
  while ((${#POOL_PIDS[@]})); do _pool_reap; done
  ((${#POOL_FAILED[@]} == 0))
}

pool_stop() {  # ends the jobs in flight and their children (for an EXIT trap); never fails
  local pid
  for pid in "${POOL_PIDS[@]}"; do
    pkill -TERM -P "$pid" 2>/dev/null || true
    kill -TERM "$pid" 2>/dev/null || true
  done
  POOL_PIDS=() POOL_NAMES=()
}
