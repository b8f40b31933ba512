"""scripts/lib/gpu.sh: whether the shell entry points see a usable GPU (it picks the embedded run's rollout engine)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
LIB = REPO / "scripts" / "lib" / "gpu.sh"


def _bash(snippet: str, path: str | None = None) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHON": sys.executable}
    if path is not None:
        env["PATH"] = path
    return subprocess.run(
        ["bash", "-c", f'source "{LIB}"; {snippet}'], env=env, capture_output=True, text=True, timeout=120, check=False
    )


def _nvidia_smi_lists_a_gpu() -> bool:
    smi = shutil.which("nvidia-smi")
    return smi is not None and subprocess.run([smi, "-L"], capture_output=True, check=False).returncode == 0


def test_has_gpu_agrees_with_nvidia_smi_and_torch() -> None:
    import torch

    expected = _nvidia_smi_lists_a_gpu() and torch.cuda.is_available()
    assert (_bash("has_gpu").returncode == 0) == expected


def test_without_nvidia_smi_there_is_no_gpu_and_no_name(tmp_path: Path) -> None:
    # A PATH with only bash and head: nvidia-smi cannot be found, so the embedded run stays on the CPU backend.
    for tool in ("bash", "head"):
        (tmp_path / tool).symlink_to(shutil.which(tool) or f"/usr/bin/{tool}")
    result = _bash('has_gpu && echo gpu || echo none; echo "name=[$(gpu_name)]"', path=str(tmp_path))
    assert result.stdout.split() == ["none", "name=[]"], result.stderr


def test_gpu_count_reads_cuda_visible_devices_first(tmp_path: Path) -> None:
    # A fake nvidia-smi listing 4 GPUs: CUDA_VISIBLE_DEVICES, when set, decides (the GPUs Ray will see).
    smi = tmp_path / "nvidia-smi"
    smi.write_text('#!/bin/sh\nfor i in 0 1 2 3; do echo "GPU $i: NVIDIA H100 80GB HBM3 (UUID: GPU-$i)"; done\n')
    smi.chmod(0o755)
    path = f"{tmp_path}:{os.environ['PATH']}"
    assert _bash("unset CUDA_VISIBLE_DEVICES; gpu_count", path=path).stdout.strip() == "4"
    assert _bash("CUDA_VISIBLE_DEVICES=2,3 gpu_count", path=path).stdout.strip() == "2"
    assert _bash("CUDA_VISIBLE_DEVICES=1 gpu_count", path=path).stdout.strip() == "1"
