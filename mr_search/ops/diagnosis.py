"""The likely cause of a failed run, read from its log, and the knob that fixes it.

Only the tail is read: an earlier warning that merely mentions memory must not name the wrong cause.
"""

from __future__ import annotations

import argparse
import re
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Final

TAIL_CHARS: Final = 200_000


@dataclass(frozen=True)
class Diagnosis:
    cause: str
    fix: str


_OOM: Final = r"(CUDA out of memory|OutOfMemoryError|CUBLAS_STATUS_ALLOC_FAILED|out of memory)"
_MORE_GPUS: Final = "or add GPUs (N_GPUS_PER_NODE)"

# Known failures, first match wins: (pattern, cause, fix). Out-of-memory rows go from the most specific phase (a
# traceback frame ", in update_actor", not the timing lines) to the least.
_KNOWN: Final[tuple[tuple[str, str, str], ...]] = (
    (
        r"no GPU is usable|NVIDIA-SMI has failed|CUDA driver|no CUDA GPUs are available|Found no NVIDIA driver",
        "no usable GPU",
        "run on a node whose `nvidia-smi` lists a GPU and where `python -c 'import torch; "
        "print(torch.cuda.is_available())'` prints True",
    ),
    (
        r"No module named '(vllm|sglang)[.']|needs the (vllm|sglang) package",
        "the rollout engine is not installed",
        "install it: `pip install -r requirements/gpu-vllm.txt` (vLLM) or the two steps of "
        "requirements/gpu-sglang.txt (SGLang); offline: docs/gpu.md",
    ),
    (
        r"No module named 'flash_attn'|flash_attn.*(not installed|ImportError)|FlashAttention2 has been toggled on",
        "flash-attn is missing",
        "`pip install flash-attn --no-build-isolation`, or train without it: USE_REMOVE_PADDING=0 (sdpa attention)",
    ),
    (
        r"Not enough memory\. Please try to increase --mem-fraction-static|No available memory for the cache blocks"
        r"|larger than the maximum number of tokens that can be stored in KV cache",
        "out of GPU memory at engine start: the KV cache does not fit in the engine's share of the card",
        "raise GPU_MEMORY_UTILIZATION (the engine's share of each card; paper preset 0.6), with SGLang keep "
        "SGLANG_MEMORY_SAVER=1 so the trainer's weights leave the card while the engine starts and generates, or "
        f"lower data.max_response_length; {_MORE_GPUS}",
    ),
    (
        rf", in update_actor\b[\s\S]{{0,20000}}{_OOM}",
        "out of GPU memory in the actor update",
        "lower actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu (rows a forward/backward), keep "
        "actor_rollout_ref.actor.fsdp_config.param_offload=True and optimizer_offload=True, with SGLang set "
        f"SGLANG_MEMORY_SAVER=1 (the engine frees its KV cache and weights during the update), {_MORE_GPUS}",
    ),
    (
        rf", in compute_(ref_)?log_prob\b[\s\S]{{0,20000}}{_OOM}",
        "out of GPU memory in a log-prob pass",
        "lower actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu (and the ref's), "
        f"with SGLang set SGLANG_MEMORY_SAVER=1, {_MORE_GPUS}",
    ),
    (
        _OOM,
        "out of GPU memory",
        "lower GPU_MEMORY_UTILIZATION (the engine's share) or actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu, "
        f"keep fsdp_config.param_offload/optimizer_offload on, with SGLang set SGLANG_MEMORY_SAVER=1, {_MORE_GPUS}",
    ),
    (
        r"no retrieval service answers|retrieval service (is )?down|search failure rate",
        "the retrieval service is down",
        "start it (`bash retrieval_launch.sh`) or point RETRIEVER_URL at one whose /health answers",
    ),
    (
        r"rollout engine lost in ",
        "the rollout engine died or hung in a call between generations (a weight sync or a memory release)",
        "the `rollout engine lost in ...` line names the call, what went wrong and the last checkpoint: the same "
        "command resumes from it; a call past its limit with every server alive: see the engine's own lines in "
        "train.log (a sync that is really that slow: raise mr_search.trainer.weight_sync_timeout_s)",
    ),
    (
        r"generation (timed out|hung)|engine server (died|exited)|ActorDiedError",
        "the rollout engine stopped answering",
        "see the engine's lines in train.log; the same command resumes from the last checkpoint",
    ),
)


def diagnose(log: str) -> Diagnosis | None:
    """The first known failure named in the tail of a run's log, else None."""
    tail = log[-TAIL_CHARS:]
    for pattern, cause, fix in _KNOWN:
        if re.search(pattern, tail):
            return Diagnosis(cause, fix)
    return None


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("path", type=Path, help="a run folder (its train.log is read) or a log file")
    path = parser.parse_args(argv).path
    log_path = path / "train.log" if path.is_dir() else path
    if not log_path.is_file():
        print(f"diagnosis: no log at {log_path}", file=sys.stderr)
        return 2
    found = diagnose(log_path.read_text(errors="replace"))
    if found is None:
        print(f"cause: not one of the known failures; read the last error in {log_path}")
        return 1
    print(f"cause: {found.cause}\nfix:   {found.fix}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
