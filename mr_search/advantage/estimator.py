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
    """verl estimator: per-attempt credit spread over each attempt's tokens; raises without the contract's columns."""
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
    """``attempt_advantages`` over the credited attempts, each meta-episode (``episode_ids``) counted once."""
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
