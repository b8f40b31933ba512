"""Attempt-level advantage of MR-Search: pure functions, typed options and the verl estimator registration."""

from __future__ import annotations

from mr_search.advantage.config import BASELINES, TRUNCATED_MODES, AdvantageConfig
from mr_search.advantage.core import attempt_advantages, group_codes, spread_to_tokens
from mr_search.advantage.estimator import ESTIMATOR_NAME, compute_mr_search_advantage, per_attempt_advantages, register
from mr_search.advantage.status import credited_attempts

__all__ = [
    "BASELINES",
    "ESTIMATOR_NAME",
    "TRUNCATED_MODES",
    "AdvantageConfig",
    "attempt_advantages",
    "compute_mr_search_advantage",
    "credited_attempts",
    "group_codes",
    "per_attempt_advantages",
    "register",
    "spread_to_tokens",
]
