"""The ``algorithm.adv_estimator=mr_search`` estimator in verl's registry, over the pure functions of ``core``."""

from __future__ import annotations

import logging
from typing import Any, Final

import numpy as np
import torch

from mr_search.advantage.config import AdvantageConfig
from mr_search.advantage.core import GroupIds, attempt_advantages, spread_to_tokens

logger = logging.getLogger(__name__)

ESTIMATOR_NAME: Final = "mr_search"

_warned_single_attempt = False


def compute_mr_search_advantage(
    token_level_rewards: torch.Tensor,
    response_mask: torch.Tensor,
    index: GroupIds | None = None,
    config: Any = None,
    *,
    attempt_ids: torch.Tensor | None = None,
    attempt_rewards: torch.Tensor | None = None,
    attempt_present: torch.Tensor | None = None,
    **_: Any,
) -> tuple[torch.Tensor, torch.Tensor]:
    """verl advantage estimator: per-attempt credit spread over each attempt's tokens.

    verl's own ``compute_advantage`` passes only the first four arguments; the MR-Search trainer
    (``trainer.v1.trainer_mode=mr_search``) also passes the per-attempt columns of ``mr_search.contract``.
    Without them every row is one attempt whose reward is the sum of its token rewards (the K = 1 Search-R1
    case: baseline ``loo`` equals verl's ``rloo``, ``grpo`` equals verl's ``grpo``).

    Args:
        token_level_rewards: float ``[B, T]``; used only when no attempt columns are given.
        response_mask: ``[B, T]``, 1 on trained tokens.
        index: ``[B]`` group id (verl ``uid``) of each row.
        config: an ``AdvantageConfig``; anything else (verl's algorithm config) means the paper defaults.
        attempt_ids: int ``[B, T]`` attempt of each token, -1 on padding.
        attempt_rewards: float ``[B, K]`` reward of each attempt.
        attempt_present: ``[B, K]`` nonzero where the attempt took place.

    Returns:
        ``(advantages, returns)``, both float ``[B, T]`` and equal (outcome estimators have no critic).
    """
    global _warned_single_attempt
    if index is None:
        raise ValueError("the mr_search estimator needs the group index (verl passes data.non_tensor_batch['uid'])")
    options = config if isinstance(config, AdvantageConfig) else AdvantageConfig()
    given = [x is not None for x in (attempt_ids, attempt_rewards, attempt_present)]
    if any(given) and not all(given):
        raise ValueError("pass attempt_ids, attempt_rewards and attempt_present together (mr_search.contract)")
    if not all(given):
        if not _warned_single_attempt:
            logger.warning(
                "mr_search advantage got no per-attempt columns: each row is treated as ONE attempt (K = 1). "
                "For meta-episodes select the MR-Search trainer: trainer.v1.trainer_mode=mr_search"
            )
            _warned_single_attempt = True
        attempt_rewards = token_level_rewards.sum(dim=-1, keepdim=True)
        attempt_present = torch.ones_like(attempt_rewards, dtype=torch.bool)
        attempt_ids = torch.zeros(response_mask.shape, dtype=torch.int64, device=response_mask.device)
    if isinstance(index, (np.ndarray, list, tuple)):
        index = np.asarray(index, dtype=object)
    with torch.no_grad():
        per_attempt = per_attempt_advantages(
            attempt_rewards.to(token_level_rewards.dtype), attempt_present.bool(), index, options
        )
        advantages = spread_to_tokens(per_attempt, attempt_ids, response_mask)
    return advantages, advantages


def per_attempt_advantages(
    rewards: torch.Tensor, present: torch.Tensor, index: GroupIds, options: AdvantageConfig
) -> torch.Tensor:
    """``attempt_advantages`` with its options taken from an ``AdvantageConfig``: ``[B, K]`` -> ``[B, K]``."""
    return attempt_advantages(
        rewards,
        present,
        index,
        gamma=options.gamma,
        baseline=options.baseline,  # type: ignore[arg-type]
        std_normalize=options.std_normalize,
        epsilon=options.epsilon,
        shaping=options.shaping,
        outcome_only=options.outcome_only,
    )


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
