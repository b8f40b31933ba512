"""Typed, frozen configuration of the attempt-level advantage (the ``mr_search.advantage`` Hydra subtree)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

from mr_search.config_checks import check_fields, from_mapping

SECTION: Final = "mr_search.advantage"
BASELINES: Final = ("loo", "grpo")
TRUNCATED_MODES: Final = ("absent", "zero")


@dataclass(frozen=True)
class AdvantageConfig:
    """Options of the multi-turn GRPO estimator, the paper's by default (keys: ``configs/recipe/paper.yaml``)."""

    gamma: float = 1.0
    baseline: str = "loo"
    std_normalize: bool = False
    epsilon: float = 1e-6
    shaping: float = 0.0
    outcome_only: bool = False
    truncated: str = "absent"

    def __post_init__(self) -> None:
        check_fields(self, SECTION, {"baseline": BASELINES, "truncated": TRUNCATED_MODES})
        if not 0.0 <= self.gamma <= 1.0:
            raise ValueError(f"mr_search.advantage.gamma={self.gamma!r} is not valid; use a number in [0, 1]")
        if not self.epsilon > 0:
            raise ValueError(f"mr_search.advantage.epsilon={self.epsilon!r} is not valid; use a number > 0")
        if self.std_normalize and self.baseline != "grpo":
            raise ValueError(
                "mr_search.advantage.std_normalize=true needs baseline=grpo (the leave-one-out baseline is never "
                "divided by the std); set mr_search.advantage.baseline=grpo or std_normalize=false"
            )

    @classmethod
    def from_config(cls, config: Mapping[str, Any] | None) -> AdvantageConfig:
        """Builds the config from the ``mr_search.advantage`` subtree (None: the paper defaults); bad keys raise."""
        return from_mapping(cls, config, SECTION)
