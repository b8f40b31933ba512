# shellcheck shell=bash
# Shared by train_grpo_step.sh and examples/embedded_world/scripts/compare.sh (sourced, not run): is a GPU usable here?
#
# Needs from the caller: $PYTHON (the env with torch).
# Usage:
#   source "$ROOT/scripts/lib/gpu.sh"
#   if has_gpu; then echo "on $(gpu_name)"; fi

# Exit status 0 when nvidia-smi lists a GPU and torch in $PYTHON can use CUDA (nvidia-smi first: fast without one).
# Asked once per shell (importing torch takes seconds; a script asks several times).
has_gpu() {
  if [[ -z "${_MR_SEARCH_HAS_GPU:-}" ]]; then
    _MR_SEARCH_HAS_GPU=0
    command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1 \
      && "$PYTHON" -c 'import sys, torch; sys.exit(0 if torch.cuda.is_available() else 1)' 2>/dev/null \
      && _MR_SEARCH_HAS_GPU=1
  fi
  [[ "$_MR_SEARCH_HAS_GPU" == 1 ]]
}

# The first GPU's model name as nvidia-smi reports it (e.g. "NVIDIA H100 80GB HBM3"); empty without one.
gpu_name() {
  nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -n 1
}

# How many GPUs this process may use: the entries of CUDA_VISIBLE_DEVICES when set, else nvidia-smi's list.
gpu_count() {
  if [[ -n "${CUDA_VISIBLE_DEVICES+x}" ]]; then
    local ids
    IFS=, read -r -a ids <<<"$CUDA_VISIBLE_DEVICES"
    echo "${#ids[@]}"
  else
    nvidia-smi -L 2>/dev/null | grep -c '^GPU ' || true
  fi
}

# Exit status 0 when $PYTHON can import the top-level module $1 (found, not imported: fast, no CUDA start-up).
has_module() {
  "$PYTHON" -c 'import importlib.util, sys; sys.exit(0 if importlib.util.find_spec(sys.argv[1]) else 1)' "$1" 2>/dev/null
}

# SGLang builds five CUDA kernels with nvcc at their first use, in step 1's first generation: on a fresh machine
# most of a minute, one after the other, and engines that start side by side (the lab's runs) may each build
# their own before the disk cache holds them. engine_warm_start MODEL LOG builds them once, side by side, in the background, into the cache
# every engine of the host reads (mr_search/ops/engine_warm.py); engine_warm_stop ends it if it still runs. Best
# effort: what it misses an engine builds as before.
ENGINE_WARM_PID=""
engine_warm_start() {
  "$PYTHON" -m mr_search.ops.engine_warm --model "$1" >"$2" 2>&1 &
  ENGINE_WARM_PID=$!
}
engine_warm_stop() {
  [[ -z "$ENGINE_WARM_PID" ]] || kill "$ENGINE_WARM_PID" 2>/dev/null || true
}
