"""A verl ``reward.custom_reward_function`` for single-attempt runs (the K = 1 Search-R1 baseline).

Use with ``reward.custom_reward_function.path=pkg://mr_search.reward.verl_reward`` and
``reward.custom_reward_function.name=compute_score``; ``reward.custom_reward_function.reward_kwargs``
may set ``metric`` (em | f1 | subem) and ``format_score``.
"""

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
    """Scores the LAST ``<answer>`` of a decoded response (passages in ``<information>`` are ignored).

    Returns:
        ``{"score": reward, "em": …, "f1": …, "has_answer": 0/1}``; verl logs the extra keys.
    """
    config = RewardConfig(metric=metric, format_score=format_score)
    golds = gold_answers(ground_truth)
    answer = extract_answer(solution_str)
    return {
        "score": config.score(answer, golds),
        "em": exact_match(answer, golds),
        "f1": token_f1(answer, golds),
        "has_answer": float(answer is not None),
    }
