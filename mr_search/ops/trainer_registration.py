"""Registers the MR-Search trainer once ``verl.trainer.ppo.v1`` loads: not in ``import verl``, which it would slow."""

from __future__ import annotations

import logging
import sys
from types import ModuleType
from typing import Final

from mr_search.import_hooks import when_imported

logger = logging.getLogger(__name__)

TRAINER_NAME: Final = "mr_search"
_V1_PACKAGE: Final = "verl.trainer.ppo.v1"


def register_now() -> None:
    """Imports the trainer and puts it in verl's trainer registry (a repeated call is a no-op)."""
    from verl.trainer.ppo.v1.trainer_base import TRAINER_REGISTRY, register_trainer

    from mr_search.ops.trainer import MRSearchTrainer

    existing = TRAINER_REGISTRY.get(TRAINER_NAME)
    if existing is not None:
        if (existing.__module__, existing.__qualname__) != (MRSearchTrainer.__module__, MRSearchTrainer.__qualname__):
            raise ValueError(
                f"verl already has a trainer named {TRAINER_NAME!r} ({existing.__module__}.{existing.__qualname__}); "
                "uninstall the plugin that registers it"
            )
        return
    register_trainer(TRAINER_NAME)(MRSearchTrainer)


def _register_after_import(module: ModuleType) -> None:
    try:
        register_now()
    except Exception:  # never break verl's own import; the plugin test catches a missing name
        logger.exception("could not register the %r trainer with verl", TRAINER_NAME)


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
    when_imported(_V1_PACKAGE, _register_after_import)
