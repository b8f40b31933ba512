"""Start-up checks of the MR-Search trainer: every ``mr_search.*`` subtree valid, no option that trains off-policy."""

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
    """Validates the episode and reward subtrees before any worker starts; refuses the short-context options.

    ``mr_search.episode.context=previous_attempt`` and ``max_context_tokens`` make the sampler generate from a
    cut context while the trainer scores the whole meta-episode, so the update would be off-policy; they are
    refused for training (evaluation, ``python -m mr_search.eval``, may use them).

    Raises:
        ValueError: a bad value (naming the key and the valid values) or an off-policy option.
    """
    from mr_search.reward import RewardConfig

    episode = EpisodeConfig.from_config(subtree(config, "episode"))
    RewardConfig.from_config(subtree(config, "reward"))
    off_policy = []
    if episode.context != "full":
        off_policy.append(f"mr_search.episode.context={episode.context}")
    if episode.max_context_tokens is not None:
        off_policy.append(f"mr_search.episode.max_context_tokens={episode.max_context_tokens}")
    if off_policy:
        raise ValueError(
            f"{', '.join(off_policy)}: the sampler would generate from a cut context while the trainer scores the "
            "whole meta-episode, an off-policy update this trainer does not correct. Training supports "
            "context=full without max_context_tokens; use the short-context options in evaluation "
            "(python -m mr_search.eval) only"
        )
