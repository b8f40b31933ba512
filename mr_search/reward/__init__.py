"""Per-attempt reward: answer extraction and EM / F1 / substring-EM scoring (docs/method.md#reward)."""

from __future__ import annotations

from mr_search.reward.config import RewardConfig
from mr_search.reward.scoring import (
    METRICS,
    exact_match,
    extract_answer,
    gold_answers,
    normalize_answer,
    substring_match,
    token_f1,
)
from mr_search.reward.verl_reward import compute_score

__all__ = [
    "METRICS",
    "RewardConfig",
    "compute_score",
    "exact_match",
    "extract_answer",
    "gold_answers",
    "normalize_answer",
    "substring_match",
    "token_f1",
]
