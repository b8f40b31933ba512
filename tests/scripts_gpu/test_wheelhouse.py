"""scripts/gpu/wheelhouse.sh builds the project's wheels in a build environment of its own, so a builder whose Python
has an old setuptools (a Python 3.11 venv starts with 65.5) or none (3.12) runs the documented command as it is."""

from __future__ import annotations

import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "scripts" / "gpu" / "wheelhouse.sh"
PROJECT = {"mr_search", "mr_search_retrieval", "mr_search_embedded_world"}


def _old_python(tmp_path: Path) -> Path:
    """A bare venv's Python: no setuptools at all, what a Python 3.12 venv starts with (3.11's: 65.5, too old too)."""
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(tmp_path / "bare")], check=True)
    python = tmp_path / "bare" / "bin" / "python"
    assert subprocess.run([str(python), "-c", "import setuptools"], capture_output=True).returncode != 0
    return python


def _script(*args: str | Path, **env: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        ["bash", str(SCRIPT), *map(str, args)],
        env={**os.environ, **env},
        capture_output=True,
        text=True,
        timeout=600,
    )


def test_project_wheels_build_from_a_python_with_an_old_setuptools(tmp_path: Path) -> None:
    python = _old_python(tmp_path)
    run = _script("project", tmp_path / "wheelhouse", PYTHON=str(python), TMPDIR=str(tmp_path))
    if run.returncode == 3:
        assert "could not make the build environment" in run.stderr and "BUILD_PYTHON" in run.stderr
        pytest.skip(f"no index to fetch setuptools>=70.1 from here: {run.stderr.strip().splitlines()[-1]}")
    assert run.returncode == 0, run.stdout + run.stderr
    wheels = sorted((tmp_path / "wheelhouse").glob("*.whl"))
    assert {w.name.split("-")[0] for w in wheels} == PROJECT
    for wheel in wheels:
        with zipfile.ZipFile(wheel) as archive:
            assert any(name.endswith(".dist-info/METADATA") for name in archive.namelist()), wheel.name
    assert "3 wheels in" in run.stdout
    # The build environment is the script's own and goes away with it.
    assert not list(tmp_path.glob("wheelhouse-build.*"))


def test_a_build_python_with_an_old_setuptools_is_refused_before_any_download(tmp_path: Path) -> None:
    python = _old_python(tmp_path)
    run = _script("sglang", tmp_path / "wheelhouse", BUILD_PYTHON=str(python), TMPDIR=str(tmp_path))
    assert run.returncode == 2
    assert "setuptools older than 70.1" in run.stderr and "leave BUILD_PYTHON empty" in run.stderr
    assert not (tmp_path / "wheelhouse").exists()


def test_an_unknown_engine_lists_the_valid_ones(tmp_path: Path) -> None:
    run = _script("tgi", tmp_path / "wheelhouse")
    assert run.returncode == 2 and "use vllm, sglang or project" in run.stderr
