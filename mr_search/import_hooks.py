"""Run a callback once a named module has finished importing (now, if it already has).

verl's plugin entry point runs while ``import verl`` is still in progress, in every process. Importing
the heavy verl modules we register into (rollout replicas, FSDP engines) from there would add seconds
to every ``import verl`` and can fail on a half-imported package, so registrations and the CPU
workarounds attach themselves to those modules instead: the callback runs right after verl itself
imports the module, before any of verl's code can use it.
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
    """Calls ``callback(module)`` once ``module_name`` is imported; immediately if it already is.

    Args:
        module_name: dotted name of the module to watch.
        callback: receives the fully executed module; runs once.
    """
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
