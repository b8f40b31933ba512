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

# Per-GPU micro-batch keys of verl's actor_rollout_ref and what each is split out of: the update's out of one GPU's
# share of a PPO mini-batch, the log-prob passes' out of one GPU's share of the whole step.
MICRO_BATCH_KEYS = (
    ("actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu", "actor_rollout_ref.actor.ppo_mini_batch_size"),
    ("actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu", "data.train_batch_size"),
    ("actor_rollout_ref.ref.log_prob_micro_batch_size_per_gpu", "data.train_batch_size"),
)


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
    resume_steps(config)
    weight_sync_timeout_seconds(config)
    faults.from_env()  # a bad MR_SEARCH_FAULT: the plugin only logged it in each process
    fit_micro_batches(config)


def replay_poll_seconds(config: Any) -> float:
    """``mr_search.trainer.replay_poll_s``: how often verl's V1 replay buffer checks for a finished batch (verl's own
    2.0 s when the key is absent).

    Raises:
        ValueError: not a number > 0, or an unknown key in ``mr_search.trainer``, naming the key.
    """
    trainer = subtree(config, "trainer") or {}
    unknown = sorted(set(trainer) - set(TRAINER_KEYS))
    if unknown:
        raise ValueError(f"mr_search.trainer has unknown keys {unknown}; its keys are {list(TRAINER_KEYS)}")
    return _seconds(trainer, "replay_poll_s", VERL_REPLAY_POLL_S, "the project's configs: 0.05")


def weight_sync_timeout_seconds(config: Any) -> float:
    """``mr_search.trainer.weight_sync_timeout_s``: how long a weight sync or an engine memory release may take before
    the run ends (``mr_search.ops.engine_guard``); 300 s when the key is absent.

    Raises:
        ValueError: not a number > 0, naming the key.
    """
    hint = f"the longest weight sync measured: 5.5 s at the 7B shape; default {DEFAULT_WEIGHT_SYNC_TIMEOUT_S:g}"
    return _seconds(subtree(config, "trainer") or {}, "weight_sync_timeout_s", DEFAULT_WEIGHT_SYNC_TIMEOUT_S, hint)


def _seconds(trainer: Any, key: str, default: float, hint: str) -> float:
    """``mr_search.trainer.<key>`` (``trainer`` is that subtree), a number of seconds > 0; ``default`` when absent.

    Raises:
        ValueError: anything else, naming the key and ``hint``.
    """
    value = trainer.get(key, default)
    if isinstance(value, bool) or not isinstance(value, int | float) or not value > 0:
        raise ValueError(f"mr_search.trainer.{key}={value!r} must be a number of seconds > 0 ({hint})")
    return float(value)


def resume_steps(config: Any) -> int:
    """``mr_search.trainer.resume_steps``: after the last step, resume from the run's own checkpoints in the same
    launch and train this many more steps (``mr_search.ops.resume_check``); 0 (absent): off.

    The resume rewinds to the checkpoint before the last one first, so the run must keep both: at least 2 steps,
    a checkpoint after each (``trainer.save_freq=1``), ``trainer.max_actor_ckpt_to_keep`` null or >= 2.

    Raises:
        ValueError: not a whole number >= 0, or settings that would not leave the two checkpoints, naming the key.
    """
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
    """Each per-GPU micro-batch must divide the rows one GPU gets (verl asserts it in the first update, minutes in).

    The update's micro-batch splits a GPU's share of a PPO mini-batch (``ppo_mini_batch_size x rollout.n / dp``
    rows), the log-prob passes' split a GPU's share of the step (``data.train_batch_size x rollout.n / dp``), with
    ``dp = n_gpus_per_node x nnodes / ulysses_sequence_parallel_size``. A micro-batch only bounds memory (the
    computation is the same), so one that does not divide its share is set to the largest divisor of the share not
    above it (the share itself when it is larger), with a warning naming both numbers: the paper preset's log-prob
    micro-batch 8 on 2 GPUs with 8 questions x 5 (20 rows a GPU) runs with 5. Token-based micro-batches
    (``use_dynamic_bsz``) have no such rule.
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
