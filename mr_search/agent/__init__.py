"""The meta-episode agent loop (``mr_search``); this package stays light, ``.loop`` imports verl."""

from __future__ import annotations

from mr_search.agent.config import EpisodeConfig

AGENT_NAME = "mr_search"

__all__ = ["AGENT_NAME", "EpisodeConfig"]
