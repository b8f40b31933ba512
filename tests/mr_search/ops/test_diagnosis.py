"""A failed run's log names its cause and the knob that fixes it, by phase for out-of-memory errors."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from mr_search.ops.diagnosis import TAIL_CHARS, diagnose, main

UPDATE_OOM = """Traceback (most recent call last):
  File "verl/workers/fsdp_workers.py", line 700, in update_actor
    metrics = self.actor.update_policy(data=data)
torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 9.28 GiB."""
LOGPROB_OOM = """  File "verl/workers/fsdp_workers.py", line 900, in compute_log_prob
torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB."""
SGLANG_KV = "RuntimeError: Not enough memory. Please try to increase --mem-fraction-static."
VLLM_KV = "ValueError: No available memory for the cache blocks. Try increasing `gpu_memory_utilization`."


def test_out_of_memory_names_the_phase_and_its_knob() -> None:
    update = diagnose(UPDATE_OOM)
    assert update.cause == "out of GPU memory in the actor update"
    assert "ppo_micro_batch_size_per_gpu" in update.fix and "SGLANG_MEMORY_SAVER=1" in update.fix
    logprob = diagnose(LOGPROB_OOM)
    assert logprob.cause == "out of GPU memory in a log-prob pass"
    assert "log_prob_micro_batch_size_per_gpu" in logprob.fix
    for engine_log in (SGLANG_KV, VLLM_KV):
        found = diagnose(engine_log)
        assert found.cause.startswith("out of GPU memory at engine start")
        assert "GPU_MEMORY_UTILIZATION" in found.fix
    assert diagnose("RuntimeError: CUDA out of memory").cause == "out of GPU memory"
    # a step's timing line names update_actor; an out-of-memory error in the next generation is not the update's
    generation = 'timing_s/update_actor: 43.2\n  File "sglang/srt/x.py", in forward\ntorch.OutOfMemoryError: CUDA'
    assert diagnose(generation).cause == "out of GPU memory"


def test_other_known_failures_and_none() -> None:
    assert diagnose("ModuleNotFoundError: No module named 'sglang.srt'").cause == "the rollout engine is not installed"
    assert "flash-attn" in diagnose("ImportError: No module named 'flash_attn'").fix
    assert diagnose("ray.exceptions.ActorDiedError: The actor died").cause == "the rollout engine stopped answering"
    assert diagnose("all good") is None
    lost = diagnose(
        "ray.exceptions.ActorDiedError: The actor died\nmr_search.trainer.engine_guard.EngineCallFailed: "
        "rollout engine lost in the weight sync after step 2: it did not finish within 300 s"
    )
    assert lost.cause.startswith("the rollout engine died or hung in a call between generations")
    assert "the same command resumes" in lost.fix and "weight_sync_timeout_s" in lost.fix


def test_only_the_tail_is_read() -> None:
    """A memory warning long before the end must not name the cause of an unrelated failure."""
    log = "WARNING: close to out of memory\n" + "x" * TAIL_CHARS + "\nall good"
    assert diagnose(log) is None


def test_main_reads_a_run_folder_or_a_log(tmp_path: Path, capsys) -> None:
    (tmp_path / "train.log").write_text(UPDATE_OOM)
    assert main([str(tmp_path)]) == 0
    assert "cause: out of GPU memory in the actor update" in capsys.readouterr().out
    other = tmp_path / "other.log"
    other.write_text("ValueError: something new")
    assert main([str(other)]) == 1
    assert "not one of the known failures" in capsys.readouterr().out
    assert main([str(tmp_path / "missing")]) == 2


def test_cli_runs_as_a_module(tmp_path: Path) -> None:
    log = tmp_path / "train.log"
    log.write_text(SGLANG_KV)
    out = subprocess.run([sys.executable, "-m", "mr_search.ops.diagnosis", str(log)], capture_output=True, text=True)
    assert out.returncode == 0 and "GPU_MEMORY_UTILIZATION" in out.stdout
