"""Start-up checks of the MR-Search trainer: every ``mr_search.*`` subtree valid before any worker starts."""

from __future__ import annotations

from typing import Any

from omegaconf import OmegaConf

from mr_search.agent.config import EpisodeConfig


def subtree(config: Any, name: str) -> Any:
    """``mr_search.<name>`` of the training config (an OmegaConf node or a dict), or None."""
    if OmegaConf.is_config(config):
        return OmegaConf.select(config, f"mr_search.{name}", default=None)
    if isinstance(config, dict):
        return (config.get("mr_search") or {}).get(name)
    return None


def check_training_options(config: Any) -> None:
    """Validates the episode and reward subtrees before any worker starts.

    The short-context options (``mr_search.episode.context=previous_attempt``, ``max_context_tokens``) train
    on-policy: the agent loop hands the trainer one row per context the engine saw (``mr_search.agent.segments``).

    Raises:
        ValueError: a bad value, naming the key and the valid values.
    """
    from mr_search.reward import RewardConfig

    EpisodeConfig.from_config(subtree(config, "episode"))
    RewardConfig.from_config(subtree(config, "reward"))
