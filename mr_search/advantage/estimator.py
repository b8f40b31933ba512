"""The ``algorithm.adv_estimator=mr_search`` estimator in verl's registry, over the pure functions of ``core``."""

from __future__ import annotations

from typing import Any, Final

import numpy as np
import torch

from mr_search.advantage.config import AdvantageConfig
from mr_search.advantage.core import GroupIds, attempt_advantages, spread_to_tokens
from mr_search.advantage.episodes import check_same_attempts, episode_rows
from mr_search.advantage.status import credited_attempts

ESTIMATOR_NAME: Final = "mr_search"

_MISSING_COLUMNS: Final = (
    "algorithm.adv_estimator=mr_search got no per-attempt columns: it needs the MR-Search trainer, which hands them "
    "over from the rollout. Set trainer.v1.trainer_mode=mr_search (the MR-Search configs do), or pick one of "
    "verl's own estimators (grpo, rloo) for single-attempt rows"
)


def compute_mr_search_advantage(
    token_level_rewards: torch.Tensor,
    response_mask: torch.Tensor,
    index: GroupIds | None = None,
    config: Any = None,
    *,
    attempt_ids: torch.Tensor | None = None,
    attempt_rewards: torch.Tensor | None = None,
    attempt_status: torch.Tensor | None = None,
    episode_ids: torch.Tensor | None = None,
    per_attempt: torch.Tensor | None = None,
    **_: Any,
) -> tuple[torch.Tensor, torch.Tensor]:
    """verl advantage estimator: per-attempt credit spread over each attempt's tokens.

    verl's own ``compute_advantage`` passes only the first four arguments; the MR-Search trainer
    (``trainer.v1.trainer_mode=mr_search``) also passes the per-attempt columns of ``mr_search.contract``.
    Called without them (verl's own trainer) it raises instead of guessing: treating each row as one attempt
    would silently train outcome-only credit on meta-episodes.

    Args:
        token_level_rewards: float ``[B, T]``; gives the dtype of the result.
        response_mask: ``[B, T]``, 1 on trained tokens.
        index: ``[B]`` group id (verl ``uid``) of each row.
        config: an ``AdvantageConfig``; anything else (verl's algorithm config) means the paper defaults.
        attempt_ids: int ``[B, T]`` attempt of each token, -1 on padding.
        attempt_rewards: float ``[B, K]`` reward of each attempt.
        attempt_status: int ``[B, K]`` ``mr_search.contract.AttemptStatus`` of each attempt.
        episode_ids: int ``[B]`` meta-episode of each row (unique within its group); rows with the same group and
            episode id are one meta-episode trained as several rows, counted once in the baseline. None: one row
            per meta-episode.
        per_attempt: float ``[B, K]`` the attempt advantages when the caller has already computed them with
            ``per_attempt_advantages`` (the MR-Search trainer, which also logs them); only spread over the tokens
            then. None: computed here from ``attempt_rewards`` and ``attempt_status``.

    Returns:
        ``(advantages, returns)``, both float ``[B, T]`` and equal (outcome estimators have no critic).

    Raises:
        ValueError: no group index, or the per-attempt columns are missing.
    """
    if index is None:
        raise ValueError("the mr_search estimator needs the group index (verl passes data.non_tensor_batch['uid'])")
    options = config if isinstance(config, AdvantageConfig) else AdvantageConfig()
    if attempt_ids is None or (per_attempt is None and (attempt_rewards is None or attempt_status is None)):
        raise ValueError(_MISSING_COLUMNS)
    if isinstance(index, (np.ndarray, list, tuple)):
        index = np.asarray(index, dtype=object)
    with torch.no_grad():
        if per_attempt is None:
            rewards = attempt_rewards.to(token_level_rewards.dtype)
            per_attempt = per_attempt_advantages(rewards, attempt_status, index, options, episode_ids)
        advantages = spread_to_tokens(per_attempt.to(token_level_rewards.dtype), attempt_ids, response_mask)
    return advantages, advantages


def per_attempt_advantages(
    rewards: torch.Tensor,
    status: torch.Tensor,
    index: GroupIds,
    options: AdvantageConfig,
    episode_ids: torch.Tensor | None = None,
) -> torch.Tensor:
    """``attempt_advantages`` over the credited attempts (``credited_attempts``), options from an
    ``AdvantageConfig``: ``[B, K]`` rewards and statuses -> ``[B, K]`` advantages.

    With ``episode_ids`` (``[B]``), the rows of one meta-episode (same group and id) must carry the same rewards and
    statuses; the advantages are computed over one row per meta-episode, so the baseline counts it once, and each
    of its rows gets them.

    Raises:
        ValueError: rows of one meta-episode disagree on its rewards or statuses.
    """
    if episode_ids is not None:
        rows = episode_rows(index, episode_ids, rewards.shape[0])
        check_same_attempts(rows, rewards, status)
        first = rows.first.to(rewards.device)
        per_episode = per_attempt_advantages(
            rewards.index_select(0, first), status.index_select(0, first), _take(index, rows.first), options
        )
        return per_episode.index_select(0, rows.of_row.to(rewards.device))
    credited, present = credited_attempts(rewards, status, options.truncated)
    return attempt_advantages(
        credited,
        present,
        index,
        gamma=options.gamma,
        baseline=options.baseline,  # type: ignore[arg-type]
        std_normalize=options.std_normalize,
        epsilon=options.epsilon,
        shaping=options.shaping,
        outcome_only=options.outcome_only,
    )


def _take(index: GroupIds, rows: torch.Tensor) -> GroupIds:
    """The group ids of the given rows."""
    if isinstance(index, torch.Tensor):
        return index.reshape(-1).index_select(0, rows.to(index.device))
    return np.asarray(index, dtype=object).reshape(-1)[rows.numpy()]


def register() -> None:
    """Registers ``mr_search`` in verl's advantage-estimator registry; a repeated call is a no-op."""
    from verl.trainer.ppo import core_algos

    existing = core_algos.ADV_ESTIMATOR_REGISTRY.get(ESTIMATOR_NAME)
    if existing is not None:
        ours = (existing.__module__, existing.__qualname__) == (
            compute_mr_search_advantage.__module__,
            compute_mr_search_advantage.__qualname__,
        )
        if not ours:
            raise ValueError(
                f"verl already has an advantage estimator named {ESTIMATOR_NAME!r} ({existing.__module__}."
                f"{existing.__qualname__}); uninstall the plugin that registers it"
            )
        return  # a retried plugin import: the function registered first stays
    core_algos.register_adv_est(ESTIMATOR_NAME)(compute_mr_search_advantage)
