"""Post-import hooks: registrations and workarounds attach to verl modules whenever verl imports them."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import pytest

from mr_search.import_hooks import when_imported


@pytest.fixture
def package(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    name = f"hooked_pkg_{tmp_path.name.replace('-', '_')}"
    root = tmp_path / name
    root.mkdir()
    (root / "__init__.py").write_text("")
    (root / "engine.py").write_text("VALUE = 1\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    yield name
    for module in [m for m in sys.modules if m.startswith(name)]:
        del sys.modules[module]


def test_callback_runs_once_after_a_later_import(package: str) -> None:
    seen: list[int] = []

    def patch(module: ModuleType) -> None:
        seen.append(module.VALUE)  # the module has finished executing
        module.VALUE = 2

    when_imported(f"{package}.engine", patch)
    assert seen == []
    engine = __import__(f"{package}.engine", fromlist=["VALUE"])
    assert seen == [1] and engine.VALUE == 2
    from importlib import reload

    reload(engine)
    assert seen == [1]  # once only


def test_callback_runs_at_once_for_an_imported_module(package: str) -> None:
    engine = __import__(f"{package}.engine", fromlist=["VALUE"])
    seen: list[ModuleType] = []
    when_imported(f"{package}.engine", seen.append)
    assert seen == [engine]


def test_a_missing_module_is_left_to_the_import_system(package: str) -> None:
    when_imported(f"{package}.absent", lambda module: None)
    with pytest.raises(ModuleNotFoundError):
        __import__(f"{package}.absent")
