"""Start-up checks of the MR-Search trainer: every ``mr_search.*`` subtree valid before any worker starts."""

from __future__ import annotations

import logging
from typing import Any

from omegaconf import OmegaConf

from mr_search.agent.config import EpisodeConfig
from mr_search.config_checks import subtree
from mr_search.ops import faults

logger = logging.getLogger(__name__)

VERL_REPLAY_POLL_S = 2.0  # verl.trainer.ppo.v1.replay_buffer.ReplayBuffer's default poll_interval
DEFAULT_WEIGHT_SYNC_TIMEOUT_S = 300.0
TRAINER_KEYS = ("replay_poll_s", "resume_steps", "weight_sync_timeout_s")  # the keys of mr_search.trainer

# Per-GPU micro-batch keys and the batch each splits a GPU's share of (a PPO mini-batch, or the whole step).
MICRO_BATCH_KEYS = (
    ("actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu", "actor_rollout_ref.actor.ppo_mini_batch_size"),
    ("actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu", "data.train_batch_size"),
    ("actor_rollout_ref.ref.log_prob_micro_batch_size_per_gpu", "data.train_batch_size"),
)


def check_training_options(config: Any) -> None:
    """Validates every ``mr_search.*`` subtree before any worker starts (ValueError naming the key)."""
    from mr_search.reward import RewardConfig

    EpisodeConfig.from_config(subtree(config, "episode"))
    RewardConfig.from_config(subtree(config, "reward"))
    replay_poll_seconds(config)
    resume_steps(config)
    weight_sync_timeout_seconds(config)
    faults.from_env()  # a bad MR_SEARCH_FAULT: the plugin only logged it in each process
    fit_micro_batches(config)


def replay_poll_seconds(config: Any) -> float:
    """``mr_search.trainer.replay_poll_s`` (verl's 2.0 s when absent); unknown ``mr_search.trainer`` keys raise."""
    trainer = subtree(config, "trainer") or {}
    unknown = sorted(set(trainer) - set(TRAINER_KEYS))
    if unknown:
        raise ValueError(f"mr_search.trainer has unknown keys {unknown}; its keys are {list(TRAINER_KEYS)}")
    return _seconds(trainer, "replay_poll_s", VERL_REPLAY_POLL_S, "the project's configs: 0.05")


def weight_sync_timeout_seconds(config: Any) -> float:
    """``mr_search.trainer.weight_sync_timeout_s``: how long an engine call may take (300 s when absent)."""
    hint = f"the longest weight sync measured: 5.5 s at the 7B shape; default {DEFAULT_WEIGHT_SYNC_TIMEOUT_S:g}"
    return _seconds(subtree(config, "trainer") or {}, "weight_sync_timeout_s", DEFAULT_WEIGHT_SYNC_TIMEOUT_S, hint)


def _seconds(trainer: Any, key: str, default: float, hint: str) -> float:
    """``mr_search.trainer.<key>``: a number of seconds > 0, ``default`` when absent; ValueError otherwise."""
    value = trainer.get(key, default)
    if isinstance(value, bool) or not isinstance(value, int | float) or not value > 0:
        raise ValueError(f"mr_search.trainer.{key}={value!r} must be a number of seconds > 0 ({hint})")
    return float(value)


def resume_steps(config: Any) -> int:
    """``mr_search.trainer.resume_steps`` (0: off); the run must keep its last two checkpoints."""
    value = (subtree(config, "trainer") or {}).get("resume_steps", 0)
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ValueError(f"mr_search.trainer.resume_steps={value!r} must be a whole number of steps >= 0 (0: off)")
    if value and OmegaConf.is_config(config):
        needs = {
            "trainer.save_freq": (OmegaConf.select(config, "trainer.save_freq", default=None), lambda v: v == 1),
            "trainer.total_training_steps": (
                OmegaConf.select(config, "trainer.total_training_steps", default=None),
                lambda v: isinstance(v, int) and v >= 2,
            ),
            "trainer.max_actor_ckpt_to_keep": (
                OmegaConf.select(config, "trainer.max_actor_ckpt_to_keep", default=None),
                lambda v: v is None or v >= 2,
            ),
        }
        for key, (seen, ok) in needs.items():
            if not ok(seen):
                raise ValueError(
                    f"mr_search.trainer.resume_steps={value} rewinds to the checkpoint before the last one: it needs "
                    f"trainer.save_freq=1, trainer.total_training_steps >= 2 and trainer.max_actor_ckpt_to_keep "
                    f"null or >= 2 ({key}={seen!r})"
                )
    return value


def fit_micro_batches(config: Any) -> None:
    """Fits each per-GPU micro-batch to a divisor of its GPU's rows (verl asserts it minutes in), with a warning."""
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
        if isinstance(micro, bool) or not isinstance(micro, int) or micro < 1:
            raise ValueError(
                f"{key}={micro!r} must be a whole number of rows >= 1 (a divisor of the {share} each GPU gets)"
            )
        if share % micro == 0:
            continue
        fitted = largest_divisor_up_to(share, micro)
        relation = ">" if micro > share else "does not divide"
        logger.warning(
            "%s=%d %s the %d rows each GPU gets (%s): using %d", key, micro, relation, share, batch_key, fitted
        )
        OmegaConf.update(config, key, fitted, merge=False)


def largest_divisor_up_to(n: int, bound: int) -> int:
    """The largest divisor of ``n`` that is at most ``bound`` (``bound`` >= 1)."""
    return max(d for d in range(1, min(n, bound) + 1) if n % d == 0)
