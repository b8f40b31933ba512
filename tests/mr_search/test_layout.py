"""Product and lab apart: the plugin package imports nothing of the embedded-world example, statically or at run."""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
LAB = "mr_search_embedded"


def _imports(path: Path) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), filename=str(path))):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module)
    return names


def test_no_module_of_the_plugin_or_the_service_names_the_lab() -> None:
    offenders = {
        str(path.relative_to(REPO)): sorted(name for name in _imports(path) if name.split(".")[0] == LAB)
        for root in ("mr_search", "retrieval/mr_search_retrieval")
        for path in sorted((REPO / root).rglob("*.py"))
    }
    offenders = {path: names for path, names in offenders.items() if names}
    assert offenders == {}, f"the plugin and the service must not import the embedded-world example: {offenders}"


# Imports every module of the plugin in a fresh interpreter in which the lab cannot be imported: a lazy import of it
# anywhere (inside a function run at import time, an entry point) fails this test.
PROBE = f"""
import importlib, importlib.abc, json, pkgutil, sys
class _NoLab(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] == {LAB!r}:
            raise ImportError("the plugin must not import " + name)
sys.meta_path.insert(0, _NoLab())
import verl  # runs the verl.plugins entry point: mr_search.plugin and its registrations
import mr_search
failed = {{}}
for info in pkgutil.walk_packages(mr_search.__path__, "mr_search."):
    try:
        importlib.import_module(info.name)
    except ImportError as error:
        if {LAB!r} in str(error):
            failed[info.name] = str(error)
print(json.dumps(failed))
"""


def test_the_plugin_imports_and_registers_without_the_lab() -> None:
    done = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True, timeout=600, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    assert json.loads(done.stdout.strip().splitlines()[-1]) == {}
