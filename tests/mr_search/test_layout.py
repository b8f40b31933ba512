"""Product and lab apart: the plugin package imports nothing of the embedded-world example, statically or at run;
the method's folders import nothing of the GPU-run tooling (``mr_search.ops``) either."""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
LAB = "mr_search_embedded"


METHOD = ("agent", "advantage", "reward", "trainer")  # the folders of mr_search that are the method


def _imports(path: Path) -> set[str]:
    """Every module an ``import`` anywhere in the file names (``from a import b`` gives ``a`` and ``a.b``)."""
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), filename=str(path))):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module)
            names.update(f"{node.module}.{alias.name}" for alias in node.names)
    return names


def _is_ops_or_lab(name: str) -> bool:
    return name.split(".")[0] == LAB or name == "mr_search.ops" or name.startswith("mr_search.ops.")


def test_the_method_imports_nothing_of_ops_or_the_lab() -> None:
    offenders = {
        str(path.relative_to(REPO)): sorted(name for name in _imports(path) if _is_ops_or_lab(name))
        for folder in METHOD
        for path in sorted((REPO / "mr_search" / folder).rglob("*.py"))
    }
    offenders = {path: names for path, names in offenders.items() if names}
    assert offenders == {}, f"the method's folders {METHOD} must not import mr_search.ops or the lab: {offenders}"


def test_the_probe_sees_an_import_of_ops(tmp_path: Path) -> None:
    module = tmp_path / "m.py"
    module.write_text("def f():\n    from mr_search import ops\n    from mr_search.ops.faults import Fault\n")
    assert {"mr_search.ops", "mr_search.ops.faults"} <= {name for name in _imports(module) if _is_ops_or_lab(name)}


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
