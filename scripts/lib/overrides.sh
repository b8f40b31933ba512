# shellcheck shell=bash
# Shared by train_grpo_step.sh (sourced, not run): the value a Hydra override on the command line gives a key.
#
# Usage:
#   source "$ROOT/scripts/lib/overrides.sh"
#   micro="$(override_value actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu "$@")" || micro=<the preset's>

# KEY ARG...: prints the value the last of ARG... gives KEY (KEY=V, +KEY=V or ++KEY=V, as Hydra reads them; quotes
# around V removed); exit status 1, printing nothing, when none does. ~KEY (a deletion) counts as no value.
override_value() {
  local key="$1" arg found=1 value=""
  shift
  for arg in "$@"; do
    arg="${arg#+}"
    arg="${arg#+}"
    if [[ "$arg" == "$key="* ]]; then
      value="${arg#"$key="}" found=0
    elif [[ "$arg" == "~$key" || "$arg" == "~$key="* ]]; then
      value="" found=1
    fi
  done
  ((found == 0)) || return 1
  value="${value#[\"\']}"
  value="${value%[\"\']}"
  printf '%s\n' "$value"
}
