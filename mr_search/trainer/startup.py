"""Start-up checks of the MR-Search trainer: every ``mr_search.*`` subtree valid before any worker starts."""

from __future__ import annotations

import logging
from typing import Any

from omegaconf import OmegaConf

from mr_search.agent.config import EpisodeConfig

logger = logging.getLogger(__name__)

VERL_REPLAY_POLL_S = 2.0  # verl.trainer.ppo.v1.replay_buffer.ReplayBuffer's default poll_interval

# Per-GPU micro-batch keys of verl's actor_rollout_ref and what each is split out of: the update's out of one GPU's
# share of a PPO mini-batch, the log-prob passes' out of one GPU's share of the whole step.
MICRO_BATCH_KEYS = (
    ("actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu", "actor_rollout_ref.actor.ppo_mini_batch_size"),
    ("actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu", "data.train_batch_size"),
    ("actor_rollout_ref.ref.log_prob_micro_batch_size_per_gpu", "data.train_batch_size"),
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
    replay_poll_seconds(config)
    fit_micro_batches(config)


def replay_poll_seconds(config: Any) -> float:
    """``mr_search.trainer.replay_poll_s``: how often verl's V1 replay buffer checks for a finished batch (verl's own
    2.0 s when the key is absent).

    Raises:
        ValueError: not a number > 0, or an unknown key in ``mr_search.trainer``, naming the key.
    """
    trainer = subtree(config, "trainer") or {}
    unknown = sorted(set(trainer) - {"replay_poll_s"})
    if unknown:
        raise ValueError(f"mr_search.trainer has unknown keys {unknown}; its only key is replay_poll_s")
    value = trainer.get("replay_poll_s", VERL_REPLAY_POLL_S)
    if isinstance(value, bool) or not isinstance(value, int | float) or not value > 0:
        raise ValueError(
            f"mr_search.trainer.replay_poll_s={value!r} must be a number of seconds > 0 (the project's configs: 0.05)"
        )
    return float(value)


def fit_micro_batches(config: Any) -> None:
    """Each per-GPU micro-batch must divide the rows one GPU gets (verl asserts it in the first update, minutes in).

    The update's micro-batch splits a GPU's share of a PPO mini-batch (``ppo_mini_batch_size x rollout.n / dp``
    rows), the log-prob passes' split a GPU's share of the step (``data.train_batch_size x rollout.n / dp``), with
    ``dp = n_gpus_per_node x nnodes / ulysses_sequence_parallel_size``. A micro-batch larger than its share is set to
    the share (it only bounds memory: the computation is the same); one that does not divide it stops the start-up
    naming both numbers. Token-based micro-batches (``use_dynamic_bsz``) have no such rule.
    """
    if not OmegaConf.is_config(config) or OmegaConf.select(
        config, "actor_rollout_ref.actor.use_dynamic_bsz", default=False
    ):
        return
    n = OmegaConf.select(config, "actor_rollout_ref.rollout.n", default=1) or 1
    gpus = (OmegaConf.select(config, "trainer.n_gpus_per_node", default=1) or 1) * (
        OmegaConf.select(config, "trainer.nnodes", default=1) or 1
    )
    sp = OmegaConf.select(config, "actor_rollout_ref.actor.ulysses_sequence_parallel_size", default=1) or 1
    if gpus % sp:
        return  # verl's own check names this one
    dp = gpus // sp
    for key, batch_key in MICRO_BATCH_KEYS:
        micro = OmegaConf.select(config, key, default=None)
        questions = OmegaConf.select(config, batch_key, default=None)
        if micro is None or questions is None:
            continue
        rows = questions * n
        if rows % dp:
            raise ValueError(
                f"{batch_key}={questions} questions x rollout.n {n} = {rows} rows do not split over {dp} "
                f"data-parallel GPUs; choose {batch_key} so that x {n} is a multiple of {dp}"
            )
        share = rows // dp
        if share % micro == 0:
            continue
        if micro > share:
            logger.warning("%s=%d > the %d rows each GPU gets (%s): using %d", key, micro, share, batch_key, share)
            OmegaConf.update(config, key, share, merge=False)
            continue
        raise ValueError(
            f"{key}={micro} does not divide the {share} rows each GPU gets ({batch_key}={questions} x rollout.n "
            f"{n} / {dp} GPUs); use a divisor of {share}"
        )
