"""The meta-episode agent loop (``mr_search``): K search attempts with reflection turns in one context.

``mr_search.agent.loop.MRSearchAgentLoop`` is the verl agent loop; importing this package stays light
(the loop module imports verl's agent-loop machinery).
"""

from __future__ import annotations

from mr_search.agent.config import EpisodeConfig

AGENT_NAME = "mr_search"

__all__ = ["AGENT_NAME", "EpisodeConfig"]
