"""The MR-Search trainer (``trainer.v1.trainer_mode=mr_search``), registered with verl's ``register_trainer``.

The trainer module imports verl's whole V1 trainer stack, which must not be imported from the plugin while
``import verl`` is still running (VERL_CPU.md, pitfall 7), and would slow every Ray worker's start. So
``register()`` registers it at once only when verl's V1 trainer package is already loaded; otherwise it leaves a
one-shot import hook that registers it right after ``verl.trainer.ppo.v1`` finishes loading. That package holds
``get_trainer_cls``, so the trainer is registered in every process before verl can look it up (the V1 task
runner imports the package inside ``run``).
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import logging
import sys
import threading
from collections.abc import Callable
from types import ModuleType
from typing import Any, Final

logger = logging.getLogger(__name__)

TRAINER_NAME: Final = "mr_search"
_V1_PACKAGE: Final = "verl.trainer.ppo.v1"

_lock = threading.Lock()


def register_now() -> None:
    """Imports the trainer and puts it in verl's trainer registry (a repeated call is a no-op)."""
    from verl.trainer.ppo.v1.trainer_base import TRAINER_REGISTRY, register_trainer

    from mr_search.trainer.attempt_trainer import MRSearchTrainer

    existing = TRAINER_REGISTRY.get(TRAINER_NAME)
    if existing is not None:
        if (existing.__module__, existing.__qualname__) != (MRSearchTrainer.__module__, MRSearchTrainer.__qualname__):
            raise ValueError(
                f"verl already has a trainer named {TRAINER_NAME!r} ({existing.__module__}.{existing.__qualname__}); "
                "uninstall the plugin that registers it"
            )
        return
    register_trainer(TRAINER_NAME)(MRSearchTrainer)


class _Loader(importlib.abc.Loader):
    """Delegating loader that calls ``callback`` once the wrapped module has executed."""

    def __init__(self, inner: importlib.abc.Loader, callback: Callable[[], None]) -> None:
        self._inner = inner
        self._callback = callback

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType | None:
        return self._inner.create_module(spec)

    def exec_module(self, module: ModuleType) -> None:
        self._inner.exec_module(module)
        try:
            self._callback()
        except Exception:
            logger.exception("could not register the %r trainer with verl", TRAINER_NAME)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)


class _AfterImport(importlib.abc.MetaPathFinder):
    """One-shot finder: wraps the loader of one module so that ``callback`` runs after it loads."""

    def __init__(self, target: str, callback: Callable[[], None]) -> None:
        self.target = target
        self.callback = callback

    def find_spec(self, fullname: str, path: Any = None, target: ModuleType | None = None) -> Any:
        if fullname != self.target:
            return None
        with _lock:
            if self in sys.meta_path:
                sys.meta_path.remove(self)
        for finder in sys.meta_path:
            find = getattr(finder, "find_spec", None)
            spec = find(fullname, path, target) if find is not None else None
            if spec is not None:
                if spec.loader is not None:
                    spec.loader = _Loader(spec.loader, self.callback)
                return spec
        return None


def _hook_installed() -> bool:
    return any(isinstance(finder, _AfterImport) and finder.target == _V1_PACKAGE for finder in sys.meta_path)


def register() -> None:
    """Registers the trainer now if verl's V1 trainer is loaded, else right after it loads."""
    module = sys.modules.get(_V1_PACKAGE)
    initializing = getattr(getattr(module, "__spec__", None), "_initializing", False)
    if module is not None and not initializing:
        register_now()
        return
    if module is not None:
        logger.warning("verl.trainer.ppo.v1 is half-imported: the %r trainer is not registered", TRAINER_NAME)
        return
    with _lock:
        if not _hook_installed():
            sys.meta_path.insert(0, _AfterImport(_V1_PACKAGE, register_now))
