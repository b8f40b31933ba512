"""The typed ``mr_search.reward`` config: which metric scores an attempt."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from mr_search.config_checks import check_fields, from_mapping
from mr_search.reward.scoring import METRICS, extract_answer, gold_answers


@dataclass(frozen=True)
class RewardConfig:
    """How an attempt's answer is scored (docs/method.md#reward); keys documented in ``configs/recipe/paper.yaml``."""

    metric: str = "em"
    format_score: float = 0.0

    def __post_init__(self) -> None:
        check_fields(self, "mr_search.reward", {"metric": sorted(METRICS)})
        if not 0.0 <= self.format_score < 1.0:
            raise ValueError(
                f"mr_search.reward.format_score={self.format_score} must be in [0, 1): it is paid for a wrong "
                "but well-formed answer, so it must stay below the reward of a right one"
            )

    @classmethod
    def from_config(cls, config: Mapping[str, Any] | None) -> RewardConfig:
        """Builds the config from the ``mr_search.reward`` subtree (a dict or DictConfig); None gives defaults."""
        return from_mapping(cls, config, "mr_search.reward")

    def score(self, prediction: str | None, golds: list[str]) -> float:
        """The reward of one attempt whose extracted answer is ``prediction`` (None: no answer -> 0)."""
        if prediction is None:
            return 0.0
        value = METRICS[self.metric](prediction, golds)
        return value if value > 0.0 else self.format_score

    def score_text(self, text: str, ground_truth: Any) -> float:
        """Extracts the last answer of ``text`` and scores it against the row's ground truth."""
        return self.score(extract_answer(text), gold_answers(ground_truth))
