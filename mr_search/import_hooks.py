"""Run a callback once a named module has finished importing (now, if it already has).

The plugin runs inside ``import verl``: importing verl's heavy modules from there would be slow and can fail.
"""

from __future__ import annotations

import importlib.abc
import importlib.util
import logging
import sys
import threading
from collections.abc import Callable, Sequence
from types import ModuleType

logger = logging.getLogger(__name__)

Callback = Callable[[ModuleType], None]

_lock = threading.RLock()
_pending: dict[str, list[Callback]] = {}


class _PostImportFinder(importlib.abc.MetaPathFinder):
    """Finds the real spec of a watched module and runs the callbacks after its loader executes it."""

    def __init__(self) -> None:
        self._resolving: set[str] = set()

    def find_spec(
        self, fullname: str, path: Sequence[str] | None, target: ModuleType | None = None
    ) -> importlib.machinery.ModuleSpec | None:
        with _lock:
            if fullname not in _pending or fullname in self._resolving:
                return None
            self._resolving.add(fullname)
        try:
            spec = importlib.util.find_spec(fullname)
        finally:
            with _lock:
                self._resolving.discard(fullname)
        if spec is None or spec.loader is None or not hasattr(spec.loader, "exec_module"):
            return spec
        loader = spec.loader
        original_exec = loader.exec_module

        def exec_module(module: ModuleType) -> None:
            original_exec(module)
            _run_callbacks(fullname, module)

        # An instance attribute on this module's own loader object: nothing else sees the change.
        loader.exec_module = exec_module  # type: ignore[method-assign]
        return spec


_finder = _PostImportFinder()


def _run_callbacks(name: str, module: ModuleType) -> None:
    with _lock:
        callbacks = _pending.pop(name, [])
    for callback in callbacks:
        callback(module)


def when_imported(module_name: str, callback: Callback) -> None:
    """Calls ``callback(module)`` once ``module_name`` is imported; immediately if it already is."""
    with _lock:
        module = sys.modules.get(module_name)
        if module is None or getattr(getattr(module, "__spec__", None), "_initializing", False):
            if module is not None:
                raise RuntimeError(
                    f"when_imported({module_name!r}): the module is being imported right now; "
                    "attach the hook before it starts importing"
                )
            _pending.setdefault(module_name, []).append(callback)
            if _finder not in sys.meta_path:
                sys.meta_path.insert(0, _finder)
            return
    callback(module)
