"""Registers the ``mr_search`` agent loop in verl's agent-loop registry (called from ``mr_search.plugin``)."""

from __future__ import annotations

import logging
from types import ModuleType

from mr_search.agent import AGENT_NAME

logger = logging.getLogger(__name__)

AGENT_LOOP_MODULE = "verl.experimental.agent_loop.agent_loop"


def _register_into(agent_loop_module: ModuleType) -> None:
    try:
        from mr_search.agent.loop import MRSearchAgentLoop

        agent_loop_module.register(AGENT_NAME)(MRSearchAgentLoop)
    except Exception:  # never break verl's own import; the plugin test catches a missing name
        logger.exception("could not register the %r agent loop with verl", AGENT_NAME)


def register() -> None:
    """Makes ``default_agent_loop=mr_search`` work once verl imports its agent-loop module; idempotent."""
    from mr_search.import_hooks import when_imported

    when_imported(AGENT_LOOP_MODULE, _register_into)
