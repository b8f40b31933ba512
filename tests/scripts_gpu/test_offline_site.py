"""scripts/gpu/offline_site.sh: the installed site carries bytecode, compiled by the node's Python at install time, so
no process of a run compiles the sources of verl, SGLang or transformers on its first import."""

from __future__ import annotations

import gzip
import hashlib
import io
import lzma
import os
import subprocess
import sys
import tarfile
import zipfile
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


def _pieces(out: Path, files: dict[str, str], compress: str = "gzip") -> Path:
    """A packed set as `pack` writes it (site/... in a gzip or xz tar, in pieces, with the joined sha256), by hand."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as tar:
        for name, text in files.items():
            data = text.encode()
            info = tarfile.TarInfo(f"site/{name}")
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    if compress == "xz":
        packed = lzma.compress(buffer.getvalue(), preset=3)
    else:
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


def _wheel(folder: Path, name: str, tag: str) -> Path:
    """A one-module binary wheel of ``name`` with platform ``tag``, written by hand (zip, METADATA, WHEEL, RECORD)."""
    path = folder / f"{name}-1.0-cp312-cp312-{tag}.whl"
    info = f"{name}-1.0.dist-info"
    files = {
        f"{name}/__init__.py": "WIDTH = 3\n",
        f"{info}/METADATA": f"Metadata-Version: 2.1\nName: {name}\nVersion: 1.0\n",
        f"{info}/WHEEL": f"Wheel-Version: 1.0\nGenerator: hand\nRoot-Is-Purelib: false\nTag: cp312-cp312-{tag}\n",
    }
    files[f"{info}/RECORD"] = "".join(f"{name},,\n" for name in files) + f"{info}/RECORD,,\n"
    folder.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(path, "w") as archive:
        for member, text in files.items():
            archive.writestr(member, text)
    return path


def _packed_names(pieces: Path) -> set[str]:
    joined = b"".join(part.read_bytes() for part in sorted(pieces.glob("site.part*")))
    with tarfile.open(fileobj=io.BytesIO(joined), mode="r:gz") as tar:
        return set(tar.getnames())


def test_pack_installs_every_platform_the_wheelhouse_downloads(tmp_path: Path) -> None:
    # vLLM's set holds llguidance as a manylinux_2_31 wheel, which pack's own, shorter platform list refused
    # ("is not a supported wheel on this platform"); both scripts now read scripts/gpu/platforms.sh.
    wheelhouse = tmp_path / "wheelhouse"
    _wheel(wheelhouse, "grammar", "manylinux_2_31_x86_64")
    _wheel(wheelhouse, "newest", "manylinux_2_35_x86_64")
    run = _script("pack", wheelhouse, tmp_path / "pieces")
    assert run.returncode == 0, run.stdout + run.stderr
    names = _packed_names(tmp_path / "pieces")
    assert {"site/grammar/__init__.py", "site/newest/__init__.py"} <= names
    assert "2 wheels -> 1 pieces" in run.stdout


def test_the_platform_list_reaches_the_nodes_glibc() -> None:
    listing = subprocess.run(
        ["bash", "-c", f'source {REPO / "scripts/gpu/platforms.sh"}; printf "%s\\n" "${{NODE_PLATFORM_ARGS[@]}}"'],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    assert "manylinux_2_31_x86_64" in listing and "manylinux_2_35_x86_64" in listing


def test_install_reads_xz_pieces_as_well_as_gzip(tmp_path: Path) -> None:
    pieces = _pieces(tmp_path / "pieces", {"heavy/__init__.py": "", "heavy/models.py": "WIDTH = 3\n"}, "xz")
    run = _script("install", pieces, tmp_path / "node", COMPILE_BYTECODE="0")
    assert run.returncode == 0, run.stdout + run.stderr
    assert (tmp_path / "node" / "site" / "heavy" / "models.py").read_text() == "WIDTH = 3\n"
    (pieces / "site.part00").write_bytes(b"PK\x03\x04" + (pieces / "site.part00").read_bytes()[4:])
    (pieces / "site.sha256").unlink()
    bad = _script("install", pieces, tmp_path / "bad")
    assert bad.returncode == 1 and "is neither gzip nor xz" in bad.stderr


def test_pack_refuses_an_unknown_compression(tmp_path: Path) -> None:
    (tmp_path / "wh").mkdir()
    (tmp_path / "wh" / "x-1.0-py3-none-any.whl").write_bytes(b"")
    run = _script("pack", tmp_path / "wh", tmp_path / "out", COMPRESS="zstd")
    assert run.returncode == 1 and "COMPRESS=zstd is not valid; use gzip (the default) or xz" in run.stderr
