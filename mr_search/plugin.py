"""verl plugin entry point: importing this module registers MR-Search's parts in verl's registries."""

from __future__ import annotations

import importlib
import logging

logger = logging.getLogger(__name__)

# Modules exposing an idempotent ``register() -> None`` (a retried plugin import must not raise).
_PARTS: tuple[str, ...] = (
    "mr_search.cpu",
    "mr_search.advantage",
    "mr_search.ops.trainer_registration",
    "mr_search.agent.registration",
    "mr_search.ops.faults",  # only with MR_SEARCH_FAULT set
)

_done = False


def register() -> None:
    """Registers every part once per process."""
    global _done
    if _done:
        return
    for name in _PARTS:
        importlib.import_module(name).register()
    _done = True


register()
