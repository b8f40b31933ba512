"""Per-attempt statistics of rewards and advantages, logged by the MR-Search trainer under ``mr_search/``."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

import torch

from mr_search.contract import SEGMENT

PREFIX = "mr_search"


def attempt_statistics(
    advantages: torch.Tensor,
    rewards: torch.Tensor,
    present: torch.Tensor,
    token_advantages: torch.Tensor,
    attempt_ids: torch.Tensor,
    response_mask: torch.Tensor,
    is_padding: torch.Tensor,
    episode_rows: torch.Tensor | None = None,
) -> dict[str, float]:
    """Per-attempt statistics over one row per meta-episode, plus ``mr_search/model_tokens``: what the policy wrote, the
    budget the lab's comparison matches its arms on (``response_length/mean`` counts the environment's too).
    """
    real = ~is_padding
    trained = response_mask.bool() & real[:, None]
    if episode_rows is not None:
        advantages, rewards, present, is_padding = (
            values.index_select(0, episode_rows) for values in (advantages, rewards, present, is_padding)
        )
    episode_real = ~is_padding
    num_real = int(episode_real.sum())
    metrics: dict[str, float] = {
        f"{PREFIX}/num_attempts": float(advantages.shape[1]),
        f"{PREFIX}/model_tokens": float(trained.sum()),
    }
    for s in range(advantages.shape[1]):
        name = f"{PREFIX}/attempt_{s + 1}"
        here = present[:, s] & episode_real
        count = int(here.sum())
        metrics[f"{name}/present_frac"] = count / num_real if num_real else 0.0
        metrics[f"{name}/trained_tokens"] = float((trained & (attempt_ids == s)).sum())
        if count == 0:
            continue
        adv = advantages[here, s].double()
        metrics[f"{name}/reward_mean"] = float(rewards[here, s].double().mean())
        metrics[f"{name}/adv_mean"] = float(adv.mean())
        metrics[f"{name}/adv_std"] = float(adv.std(unbiased=False))
        metrics[f"{name}/adv_min"] = float(adv.min())
        metrics[f"{name}/adv_max"] = float(adv.max())
        metrics[f"{name}/adv_nonzero_frac"] = float((adv != 0).double().mean())
    if trained.any():
        tokens = token_advantages[trained].double()
        metrics[f"{PREFIX}/token_adv_mean"] = float(tokens.mean())
        metrics[f"{PREFIX}/token_adv_abs_mean"] = float(tokens.abs().mean())
    return metrics


def trajectory_fields(extra_fields: Sequence[Any], uids: Sequence[Any]) -> Iterator[dict[str, Any]]:
    """The ``extra_fields`` of a step's real meta-episodes, one each: a multi-row one from its last row."""
    for fields, uid in zip(extra_fields, uids, strict=True):
        if isinstance(fields, dict) and not str(uid).startswith("pad"):
            segment = fields.get(SEGMENT)
            if isinstance(segment, dict) and segment.get("index") != segment.get("count", 1) - 1:
                continue
            yield fields


def episode_statistics(extra_fields: list, uids: list[str]) -> dict[str, float]:
    """Step means of the agent loop's ``reward_extra_info`` (verl's V1 trainer averages it in validation only)."""
    from mr_search.agent.output import aggregate_metrics

    rows = [
        {key: float(value) for key, value in fields.get("reward_extra_info", {}).items() if _is_number(value)}
        for fields in trajectory_fields(extra_fields, uids)
    ]
    return aggregate_metrics([row for row in rows if row], prefix=f"{PREFIX}/")


def _is_number(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)
