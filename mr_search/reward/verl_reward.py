"""A verl ``reward.custom_reward_function`` (``pkg://mr_search.reward.verl_reward``) for the K = 1 baseline."""

from __future__ import annotations

from typing import Any

from mr_search.reward.config import RewardConfig
from mr_search.reward.scoring import exact_match, extract_answer, gold_answers, token_f1


def compute_score(
    data_source: str,
    solution_str: str,
    ground_truth: Any,
    extra_info: dict[str, Any] | None = None,
    metric: str = "em",
    format_score: float = 0.0,
    **kwargs: Any,
) -> dict[str, float]:
    """Scores the LAST ``<answer>`` of a decoded response: ``{"score", "em", "f1", "has_answer"}`` (verl logs all)."""
    config = RewardConfig(metric=metric, format_score=format_score)
    golds = gold_answers(ground_truth)
    answer = extract_answer(solution_str)
    return {
        "score": config.score(answer, golds),
        "em": exact_match(answer, golds),
        "f1": token_f1(answer, golds),
        "has_answer": float(answer is not None),
    }
