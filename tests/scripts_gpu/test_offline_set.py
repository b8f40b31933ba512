"""The offline set is complete: every third-party module the project's packages import on the default path of
`make gpu-check` and of a training start comes from a distribution that scripts/gpu/wheelhouse.sh puts in the
wheelhouse (requirements/offline-ENGINE.txt, then the project's own wheels, requirements/offline-project.txt).

Imports are collected statically (AST) from the three packages; each top-level module is mapped to the distribution
that provides it in this environment (``importlib.metadata.packages_distributions()``).
"""

from __future__ import annotations

import ast
import importlib.metadata
import re
import sys
from pathlib import Path

import pytest
import tomllib
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

REPO = Path(__file__).resolve().parents[2]
PROJECT_SET = REPO / "requirements" / "offline-project.txt"
PACKAGES = ("mr_search", "retrieval/mr_search_retrieval", "examples/embedded_world/mr_search_embedded")

# On the GPU image the offline sets are made for (docs/gpu.md, "Install without network access"): never in a set.
IMAGE = {
    "torch": "the image's CUDA build (2.11.0+cu130), which verl 0.9.1 and the engines pin",
    "numpy": "installed with the image's torch",
    "triton": "installed with the image's torch (the retrieval service's GPU block-max kernel only)",
}
# Imported only on paths that neither `make gpu-check` nor a default training start takes, each guarded or lazy.
OPTIONAL = {
    "faiss": "FAISS indexes (the [faiss] extra): without it the dense default is searched by torch (--backend auto), "
    "and gpu-check's BM25 service uses no dense index",
    "pyserini": "an existing Lucene BM25 index (RETRIEVER_INDEX=<Lucene folder>, the [pyserini] extra, needs Java)",
    "Stemmer": "PyStemmer, which the BM25 index uses when installed (indexes/bm25.py: no stemming without it)",
    "matplotlib": "plots of evaluation reports and of the embedded world's comparison (the [eval] extra)",
    "sglang": "the engine itself, which the SGLang set carries; mr_search/ops/engine_warm.py (gpu-check's kernel "
    "builds ahead) imports it lazily and runs only with ROLLOUT_ENGINE=sglang",
}
# `<name>  # from <folder>`: the line wheelhouse.sh reads to build a project wheel.
PROJECT_LINE = re.compile(r"^(?P<name>[a-z][a-z0-9-]*)\s*# from (?P<folder>\S+)$")


def _top_level_imports(root: Path) -> dict[str, set[str]]:
    """Top-level module -> the files importing it (absolute imports, at module level or inside functions)."""
    found: dict[str, set[str]] = {}
    for path in sorted(root.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), filename=str(path))):
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names = [node.module]
            else:
                continue
            for name in names:
                found.setdefault(name.split(".")[0], set()).add(str(path.relative_to(REPO)))
    return found


def _requirement_names(path: Path) -> set[str]:
    names = set()
    for line in path.read_text(encoding="utf-8").splitlines():
        line = re.sub(r"(^|\s)#.*$", "", line).strip()
        if line:
            names.add(canonicalize_name(Requirement(line).name))
    return names


def _project_wheels() -> dict[str, str]:
    """The project's wheels wheelhouse.sh builds: distribution name -> folder."""
    wheels = {}
    for line in PROJECT_SET.read_text(encoding="utf-8").splitlines():
        if line.strip() and not line.startswith("#"):
            match = PROJECT_LINE.match(line.strip())
            assert match, f"{PROJECT_SET.name}: {line!r} is not '<name>  # from <folder>'"
            wheels[canonicalize_name(match["name"])] = match["folder"]
    return wheels


def test_wheelhouse_builds_every_project_wheel_its_set_names() -> None:
    wheels = _project_wheels()
    for name, folder in wheels.items():
        pyproject = tomllib.loads((REPO / folder / "pyproject.toml").read_text(encoding="utf-8"))
        assert canonicalize_name(pyproject["project"]["name"]) == name, f"{folder} builds another distribution"
    # Every distribution of this repository is in the set (the plugin, its retrieval service, the embedded world).
    ours = {
        canonicalize_name(tomllib.loads(p.read_text(encoding="utf-8"))["project"]["name"])
        for p in [REPO / "pyproject.toml", *REPO.glob("*/pyproject.toml"), *REPO.glob("examples/*/pyproject.toml")]
    }
    assert set(wheels) == ours


@pytest.mark.parametrize("engine", ["vllm", "sglang"])
def test_every_module_the_default_path_imports_is_in_the_offline_set(engine: str) -> None:
    listed = _requirement_names(REPO / "requirements" / f"offline-{engine}.txt") | set(_project_wheels())
    providers = importlib.metadata.packages_distributions()
    imports: dict[str, set[str]] = {}
    for package in PACKAGES:
        for module, files in _top_level_imports(REPO / package).items():
            imports.setdefault(module, set()).update(files)
    missing, unknown = {}, {}
    for module, files in sorted(imports.items()):
        if module in sys.stdlib_module_names or module in IMAGE or module in OPTIONAL:
            continue
        distributions = {canonicalize_name(d) for d in providers.get(module, [])}
        if not distributions:
            unknown[module] = sorted(files)[:3]
        elif not distributions & listed:
            missing[module] = (sorted(distributions), sorted(files)[:3])
    assert not unknown, f"not installed here, so its distribution is unknown (install it or list it above): {unknown}"
    assert not missing, (
        f"imported by the project but in no distribution of the {engine} offline set "
        f"(requirements/offline-{engine}.txt or requirements/offline-project.txt): {missing}"
    )


def test_the_exceptions_are_still_imported() -> None:
    """An exception that no module imports any more is stale: drop it."""
    imported = set()
    for package in PACKAGES:
        imported |= set(_top_level_imports(REPO / package))
    assert set(IMAGE) | set(OPTIONAL) <= imported
