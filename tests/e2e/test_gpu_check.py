"""scripts/gpu_check.sh before any training: a node that cannot run the GPU path gets the cause and the fix."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "scripts" / "gpu_check.sh"


def _run(tmp_path: Path, **env: str) -> subprocess.CompletedProcess:
    full = {**os.environ, "PYTHON": sys.executable, "RUN_DIR": str(tmp_path / "run"), **env}
    return subprocess.run(["bash", str(SCRIPT)], env=full, capture_output=True, text=True, timeout=120)


def test_without_a_gpu_it_fails_before_training_with_cause_and_fix(tmp_path: Path) -> None:
    # This machine has no GPU (CI's has none either): nvidia-smi is missing or lists nothing.
    fake_bin = tmp_path / "bin"
    fake_bin.mkdir()
    (fake_bin / "nvidia-smi").write_text("#!/bin/sh\nexit 9\n")
    (fake_bin / "nvidia-smi").chmod(0o755)
    run = _run(tmp_path, PATH=f"{fake_bin}:{os.environ['PATH']}")
    assert run.returncode == 1
    assert "| preflight | FAIL | no usable GPU" in run.stdout
    assert "cause: no usable GPU" in run.stdout and "fix:" in run.stdout
    assert not (tmp_path / "run").exists(), "nothing is trained or written before the preflight passes"


def test_a_gpu_node_without_the_engine_is_told_what_to_install(tmp_path: Path) -> None:
    # A GPU that nvidia-smi lists and torch can use, but no vllm package: the fix names the requirements file.
    fake_bin = tmp_path / "bin"
    fake_bin.mkdir()
    (fake_bin / "nvidia-smi").write_text("#!/bin/sh\necho 'GPU 0: NVIDIA H100 80GB HBM3'\n")
    (fake_bin / "nvidia-smi").chmod(0o755)
    fake_python = tmp_path / "python"
    # torch.cuda.is_available() answers True; every other question goes to the real interpreter.
    fake_python.write_text(
        f'#!/bin/sh\ncase "$2" in *torch.cuda.is_available*) exit 0 ;; esac\nexec "{sys.executable}" "$@"\n'
    )
    fake_python.chmod(0o755)
    run = _run(tmp_path, PATH=f"{fake_bin}:{os.environ['PATH']}", PYTHON=str(fake_python), ROLLOUT_ENGINE="vllm")
    assert run.returncode == 1
    assert "the vllm package is not installed" in run.stdout
    assert "requirements/gpu-vllm.txt" in run.stdout


def test_steps_is_total_steps_as_in_the_training_script(tmp_path: Path) -> None:
    # One name per knob across the scripts: STEPS (the old name) stops at once, naming TOTAL_STEPS.
    run = _run(tmp_path, STEPS="4")
    assert run.returncode == 2
    assert "use TOTAL_STEPS=4" in run.stderr
    assert not (tmp_path / "run").exists()
    script = SCRIPT.read_text()
    assert 'launch "$TOTAL_STEPS" "$@" && launch "$((TOTAL_STEPS + 1))"' in script
