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


def test_engine_warm_runs_the_kernel_build_in_the_background_and_stop_ends_it(tmp_path: Path) -> None:
    # A stand-in PYTHON that records its arguments, then sleeps: start returns at once, stop ends it.
    python = tmp_path / "python"
    python.write_text('#!/bin/sh\necho "args: $*"\nexec sleep 30\n')
    python.chmod(0o755)
    log = tmp_path / "warm.log"
    result = _bash(
        f'PYTHON="{python}"; start=$SECONDS; engine_warm_start /models/tiny "{log}"; sleep 0.5\n'
        'kill -0 "$ENGINE_WARM_PID" && echo running; engine_warm_stop\n'
        'wait "$ENGINE_WARM_PID" 2>/dev/null || echo "ended $?"; echo "took $((SECONDS - start))"'
    )
    assert result.stdout.split()[:3] == ["running", "ended", "143"], result.stdout + result.stderr
    assert int(result.stdout.split()[-1]) < 10, "start and stop returned without waiting for the build"
    assert log.read_text().strip() == "args: -m mr_search.ops.engine_warm --model /models/tiny"


def test_engine_warm_stop_without_a_start_does_nothing() -> None:
    assert _bash("engine_warm_stop && echo fine").stdout.strip() == "fine"
