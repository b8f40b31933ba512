"""Start-up checks of the MR-Search trainer: every ``mr_search.*`` subtree valid before any worker starts."""

from __future__ import annotations

import logging
from typing import Any

from omegaconf import OmegaConf

from mr_search.agent.config import EpisodeConfig

logger = logging.getLogger(__name__)

# Per-GPU micro-batch keys of verl's actor_rollout_ref, each split out of one GPU's share of a PPO mini-batch.
MICRO_BATCH_KEYS = (
    "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu",
    "actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu",
    "actor_rollout_ref.ref.log_prob_micro_batch_size_per_gpu",
)


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
    fit_micro_batches(config)


def fit_micro_batches(config: Any) -> None:
    """Each per-GPU micro-batch must divide one GPU's share of a PPO mini-batch (verl asserts it in the first
    update, minutes in). A micro-batch larger than the share is set to the share (it only bounds memory: the
    update is the same); one that does not divide it stops the start-up naming both numbers.

    The share is ``ppo_mini_batch_size x rollout.n / (n_gpus_per_node x nnodes / ulysses_sequence_parallel_size)``
    rows; a step's rows are a whole number of mini-batches (verl pads them), so dividing the share is enough.
    """
    if not OmegaConf.is_config(config) or OmegaConf.select(
        config, "actor_rollout_ref.actor.use_dynamic_bsz", default=False
    ):
        return
    mini = OmegaConf.select(config, "actor_rollout_ref.actor.ppo_mini_batch_size", default=None)
    n = OmegaConf.select(config, "actor_rollout_ref.rollout.n", default=1)
    gpus = (OmegaConf.select(config, "trainer.n_gpus_per_node", default=1) or 1) * (
        OmegaConf.select(config, "trainer.nnodes", default=1) or 1
    )
    sp = OmegaConf.select(config, "actor_rollout_ref.actor.ulysses_sequence_parallel_size", default=1) or 1
    if mini is None or gpus % sp:
        return
    dp, rows = gpus // sp, mini * n
    if rows % dp:
        raise ValueError(
            f"a PPO mini-batch of {mini} questions x rollout.n {n} = {rows} rows does not split over {dp} "
            f"data-parallel GPUs; set actor_rollout_ref.actor.ppo_mini_batch_size so that x {n} is a multiple of {dp}"
        )
    share = rows // dp
    for key in MICRO_BATCH_KEYS:
        micro = OmegaConf.select(config, key, default=None)
        if micro is None or share % micro == 0:
            continue
        if micro > share:
            logger.warning("%s=%d > the %d rows each GPU gets from a mini-batch: using %d", key, micro, share, share)
            OmegaConf.update(config, key, share, merge=False)
            continue
        raise ValueError(
            f"{key}={micro} does not divide the {share} rows each GPU gets from a PPO mini-batch ({mini} questions "
            f"x rollout.n {n} / {dp} GPUs); use a divisor of {share}"
        )
