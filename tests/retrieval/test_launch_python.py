"""retrieval_launch.sh run outside the virtual environment: it uses the project's .venv, or says in one line how to
make one (never a bare ModuleNotFoundError)."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


def _checkout(tmp_path: Path, with_venv: bool) -> tuple[Path, dict[str, str]]:
    """A copy of the launch script in a fake checkout, and an environment whose `python` lacks the service."""
    root = tmp_path / "checkout"
    root.mkdir()
    shutil.copy(REPO / "retrieval_launch.sh", root / "retrieval_launch.sh")
    fake_bin = tmp_path / "bin"
    fake_bin.mkdir()
    (fake_bin / "python").write_text("#!/bin/sh\nexit 1\n")  # imports nothing: a python without the service
    (fake_bin / "python").chmod(0o755)
    if with_venv:
        venv_bin = root / ".venv" / "bin"
        venv_bin.mkdir(parents=True)
        # The project's environment: this test's python with its import path (mr_search_retrieval), marking its use.
        (venv_bin / "python").write_text(
            f'#!/bin/sh\necho used >> "{tmp_path / "venv-used"}"\n'
            f'PYTHONPATH="{os.environ.get("PYTHONPATH", "")}" exec "{sys.executable}" "$@"\n'
        )
        (venv_bin / "python").chmod(0o755)
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHON", "PYTHONPATH", "VIRTUAL_ENV")}
    env["PATH"] = f"{fake_bin}:/usr/bin:/bin"
    return root, env


def test_without_a_python_that_has_the_service_it_says_how_to_make_one(tmp_path: Path) -> None:
    root, env = _checkout(tmp_path, with_venv=False)
    out = subprocess.run(
        ["bash", str(root / "retrieval_launch.sh")], env=env, capture_output=True, text=True, timeout=60
    )
    assert out.returncode == 1
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1 and "has no mr_search_retrieval" in lines[0], out.stderr
    assert "make setup" in lines[0] and "pip install" in lines[0] and "retrieval[faiss]" in lines[0]
    assert "ModuleNotFoundError" not in out.stderr


@pytest.mark.slow
def test_outside_the_venv_it_uses_the_projects_venv(tmp_path: Path, dense_index: Path, cache_dir: Path) -> None:
    root, env = _checkout(tmp_path, with_venv=True)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    env.update(RETRIEVER_PORT=str(port), MR_SEARCH_CACHE=str(cache_dir))
    log = tmp_path / "launch.log"
    with log.open("w") as f:
        proc = subprocess.Popen(
            ["bash", str(root / "retrieval_launch.sh")], env=env, stdout=f, stderr=subprocess.STDOUT, cwd=tmp_path
        )
    try:
        deadline = time.monotonic() + 180
        while "retrieval_launch.sh: ready" not in log.read_text():
            assert proc.poll() is None, log.read_text()[-3000:]
            assert time.monotonic() < deadline, log.read_text()[-3000:]
            time.sleep(0.3)
    finally:
        proc.terminate()
        proc.wait(60)
    assert (tmp_path / "venv-used").is_file()


@pytest.mark.parametrize(
    ("knobs", "visible"),
    [
        ({"RETRIEVER_DEVICE": "cpu"}, ""),
        ({"RETRIEVER_DEVICE": "cpu", "RETRIEVER_GPUS": "1"}, "1"),
        ({"RETRIEVER_DEVICE": "auto"}, "unset"),
        ({"RETRIEVER_TYPE": "bm25"}, ""),  # BM25 has no GPU path: hidden whatever the device knob says
    ],
)
def test_a_cpu_service_sees_no_gpu(tmp_path: Path, knobs: dict[str, str], visible: str) -> None:
    """On a training node a CPU service must take no GPU memory, even through a library that would (JAX)."""
    root, env = _checkout(tmp_path, with_venv=False)
    seen = tmp_path / "seen"
    fake = tmp_path / "service-python"
    # Has the service (the launcher's check passes), then records what the server process would see and exits.
    fake.write_text(
        "#!/bin/sh\n"
        f'if [ "$1" = "-m" ]; then echo "${{CUDA_VISIBLE_DEVICES-unset}}|${{JAX_PLATFORMS-unset}}" > "{seen}"; fi\n'
        "exit 0\n"
    )
    fake.chmod(0o755)
    env.pop("CUDA_VISIBLE_DEVICES", None)
    env.update(PYTHON=str(fake), **knobs)
    subprocess.run(["bash", str(root / "retrieval_launch.sh")], env=env, capture_output=True, text=True, timeout=60)
    cuda, jax = seen.read_text().strip().split("|")
    assert cuda == visible
    assert jax == ("cpu" if cuda == "" else "unset")
