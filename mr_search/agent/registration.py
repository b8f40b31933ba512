"""Registers the ``mr_search`` agent loop in verl's agent-loop registry (called from ``mr_search.plugin``)."""

from __future__ import annotations

from mr_search.agent import AGENT_NAME


def register() -> None:
    """Makes ``actor_rollout_ref.rollout.agent.default_agent_loop=mr_search`` work; idempotent.

    Uses verl's public ``register`` decorator, which records the class's import path for hydra; the
    agent-loop workers look the name up when they build a loop for a row.
    """
    from verl.experimental.agent_loop.agent_loop import register as register_agent_loop

    from mr_search.agent.loop import MRSearchAgentLoop

    register_agent_loop(AGENT_NAME)(MRSearchAgentLoop)
