"""scripts/gpu/offline_site.sh: the installed site carries bytecode, compiled by the node's Python at install time, so
no process of a run compiles the sources of verl, SGLang or transformers on its first import."""

from __future__ import annotations

import gzip
import hashlib
import io
import os
import subprocess
import sys
import tarfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "scripts" / "gpu" / "offline_site.sh"
TAG = sys.implementation.cache_tag  # e.g. cpython-311: the bytecode of this Python


def _script(*args: str | Path, **env: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        ["bash", str(SCRIPT), *map(str, args)],
        env={**os.environ, "PYTHON": sys.executable, **env},
        capture_output=True,
        text=True,
        timeout=300,
    )


def _pieces(out: Path, files: dict[str, str]) -> Path:
    """A packed set as `pack` writes it (site/... in a gzip tar, in pieces, with the joined sha256), by hand."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as tar:
        for name, text in files.items():
            data = text.encode()
            info = tarfile.TarInfo(f"site/{name}")
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    packed = gzip.compress(buffer.getvalue(), compresslevel=1)
    out.mkdir(parents=True)
    half = len(packed) // 2
    (out / "site.part00").write_bytes(packed[:half])
    (out / "site.part01").write_bytes(packed[half:])
    (out / "site.sha256").write_text(hashlib.sha256(packed).hexdigest() + "\n")
    return out


def _site(root: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        (root / "site" / name).parent.mkdir(parents=True, exist_ok=True)
        (root / "site" / name).write_text(text)
    return root


def test_install_leaves_bytecode_for_the_set_and_the_project(tmp_path: Path) -> None:
    pieces = _pieces(tmp_path / "pieces", {"heavy/__init__.py": "", "heavy/models.py": "WIDTH = 3\n"})
    run = _script("install", pieces, tmp_path / "node")
    assert run.returncode == 0, run.stdout + run.stderr
    site = tmp_path / "node" / "site"
    assert (site / "heavy" / "__pycache__" / f"models.{TAG}.pyc").is_file(), "the carried set's sources"
    assert (site / "mr_search" / "__pycache__" / f"__init__.{TAG}.pyc").is_file(), "the project installed into it"
    assert "compiled" in run.stdout and "to bytecode with Python" in run.stdout


def test_a_bad_bytecode_setting_stops_before_anything_is_unpacked(tmp_path: Path) -> None:
    pieces = _pieces(tmp_path / "pieces", {"heavy/models.py": "WIDTH = 3\n"})
    bad = _script("install", pieces, tmp_path / "bad", COMPILE_BYTECODE="yes")
    assert bad.returncode == 1 and "COMPILE_BYTECODE=yes is not valid; use 1" in bad.stderr
    assert not (tmp_path / "bad").exists(), "stops before it unpacks anything"


def test_compile_counts_what_this_python_cannot_compile_and_goes_on(tmp_path: Path) -> None:
    root = _site(tmp_path / "node", {"pkg/good.py": "x = 1\n", "pkg/old.py": 'print "python 2"\n'})
    run = _script("compile", root)
    assert run.returncode == 0, run.stdout + run.stderr
    assert (root / "site" / "pkg" / "__pycache__" / f"good.{TAG}.pyc").is_file()
    assert not (root / "site" / "pkg" / "__pycache__" / f"old.{TAG}.pyc").exists()
    assert "1 files left as sources" in run.stdout


def test_compile_without_a_site_names_the_install(tmp_path: Path) -> None:
    run = _script("compile", tmp_path / "none")
    assert run.returncode == 1
    assert "does not exist; run install PIECES_DIR" in run.stderr
