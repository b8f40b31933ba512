"""The service is its own distribution: it imports nothing of the trainer and installs and serves on its own."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import sysconfig
import urllib.request
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
# Imported first in a process (as sitecustomize or with -c): any import of the trainer's packages fails loudly.
BLOCKER = """
import importlib.abc, sys
BLOCKED = ("verl", "mr_search", "mr_search_embedded")
class _NoTrainer(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in BLOCKED:
            sys.stderr.write(f"BLOCKED IMPORT {name}\\n")
            raise ImportError(f"the retrieval service must not import {name}")
        return None
sys.meta_path.insert(0, _NoTrainer())
"""
# Modules whose optional dependency may be missing here (the README names them optional).
OPTIONAL_DEPENDENCIES = {"triton", "faiss", "pyserini"}


def test_every_module_of_the_service_imports_without_verl_or_mr_search() -> None:
    script = (
        BLOCKER
        + f"OPTIONAL_DEPENDENCIES = {sorted(OPTIONAL_DEPENDENCIES)!r}\n"
        + """
import importlib, json, pkgutil
import mr_search_retrieval
OPTIONAL = OPTIONAL_DEPENDENCIES
done, optional = [], []
for info in pkgutil.walk_packages(mr_search_retrieval.__path__, "mr_search_retrieval."):
    try:
        importlib.import_module(info.name)
        done.append(info.name)
    except ModuleNotFoundError as err:
        if err.name.split(".")[0] not in OPTIONAL:
            raise
        optional.append(info.name)
print(json.dumps({"imported": done, "optional": optional}))
"""
    )
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300, cwd=REPO)
    assert out.returncode == 0 and "BLOCKED IMPORT" not in out.stderr, out.stderr[-3000:]
    result = json.loads(out.stdout.strip().splitlines()[-1])
    # Every serving and building module is there (the optional ones only lack their own dependency).
    for name in ("server", "app", "retriever", "build_index", "multiproc", "stream_worker", "index_cache"):
        assert f"mr_search_retrieval.{name}" in result["imported"]
    assert set(result["optional"]) <= {"mr_search_retrieval.indexes.triton_block_max"}


def _distribution(pyproject: Path) -> dict:
    tomllib = pytest.importorskip("tomllib")  # Python >= 3.11
    return tomllib.loads(pyproject.read_text())


def test_the_root_project_no_longer_ships_the_service_but_depends_on_it() -> None:
    from setuptools import find_packages

    root = _distribution(REPO / "pyproject.toml")
    found = root["tool"]["setuptools"]["packages"]["find"]
    root_packages = find_packages(where=str(REPO / found["where"][0]), include=found["include"])
    assert "mr_search" in root_packages
    assert not [p for p in root_packages if p.startswith("mr_search_retrieval")]
    assert root["project"]["optional-dependencies"]["retrieval"] == ["mr-search-retrieval[faiss]>=0.1"]
    assert "scripts" not in root["project"]  # the console scripts moved with the service

    service = _distribution(REPO / "retrieval" / "pyproject.toml")
    assert service["project"]["name"] == "mr-search-retrieval"
    deps = " ".join(service["project"]["dependencies"]).lower()
    assert "verl" not in deps and "mr-search " not in deps and "numba" not in deps
    assert service["project"]["scripts"] == {
        "mr-search-retrieval": "mr_search_retrieval.server:main",
        "mr-search-build-index": "mr_search_retrieval.build_index:main",
    }
    found = service["tool"]["setuptools"]["packages"]["find"]
    service_packages = find_packages(where=str(REPO / "retrieval"), include=found["include"])
    assert {"mr_search_retrieval", "mr_search_retrieval.indexes"} <= set(service_packages)
    assert not [p for p in service_packages if "embedded" in p], "the embedded world lives in examples/embedded_world"


@pytest.mark.slow
def test_installed_alone_it_serves_the_embedded_default(tmp_path: Path, launch, dense_index: Path) -> None:
    """`pip install --no-deps ./retrieval` into a fresh venv that sees this environment's packages (no registry: the
    dependency set is checked above) but fails on any import of verl or mr_search; then `bash retrieval_launch.sh`
    with no arguments serves the embedded default (dense_index: built and cached before)."""
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=120)
    py = venv / "bin" / "python"
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    purelib = "import sysconfig; print(sysconfig.get_paths()['purelib'])"
    site = Path(subprocess.check_output([py, "-c", purelib], text=True, env=env).strip())
    (site / "outer.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    (site / "sitecustomize.py").write_text(BLOCKER)
    source = tmp_path / "retrieval"  # a copy: setuptools builds in the source tree (build/, *.egg-info)
    shutil.copytree(REPO / "retrieval", source, ignore=shutil.ignore_patterns("build", "*.egg-info", "__pycache__"))
    pip = [py, "-m", "pip", "install", "-q", "--no-deps", "--no-build-isolation", str(source)]
    subprocess.run(pip, check=True, timeout=300, cwd=tmp_path, env=env)
    where = subprocess.check_output(
        [py, "-c", "import mr_search_retrieval as m; print(m.__file__)"], env=env, cwd=tmp_path, text=True
    )
    assert where.startswith(str(venv)), where
    helped = subprocess.run([venv / "bin" / "mr-search-build-index", "--help"], env=env, capture_output=True, text=True)
    assert helped.returncode == 0 and "--corpus" in helped.stdout, helped.stderr[-2000:]

    server = launch(env={"PYTHON": str(py), "PYTHONPATH": ""})
    body = json.dumps({"queries": ["Where was Pekrul Zuk born?"], "topk": 3, "return_scores": True}).encode()
    request = urllib.request.Request(f"{server.url}/retrieve", data=body, headers={"content-type": "application/json"})
    with urllib.request.urlopen(request, timeout=30) as r:
        result = json.loads(r.read())["result"]
    assert len(result) == 1 and len(result[0]) == 3
    assert any("Pekrul Zuk" in item["document"]["contents"] for item in result[0])
    assert server.stop() in (0, 143)
    assert "BLOCKED IMPORT" not in server.log.read_text()
