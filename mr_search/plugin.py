"""verl plugin entry point: importing this module registers MR-Search's parts in verl's registries.

verl loads every ``verl.plugins`` entry point on ``import verl`` (Ray workers included) and logs a
failing plugin only at DEBUG level, so ``tests/mr_search/test_plugin.py`` asserts that each name
below really is registered. Each part registers itself in its own ``register()``; the list is
the single place that says what the plugin contributes.
"""

from __future__ import annotations

import importlib
import logging

logger = logging.getLogger(__name__)

# Modules exposing ``register() -> None``; each must be idempotent (a retried plugin import must
# not raise "already registered").
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
