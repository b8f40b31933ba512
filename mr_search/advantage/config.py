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
    """Options of the multi-turn GRPO estimator; the defaults are the paper's
    (docs/method.md#the-attempt-level-advantage).

    Attributes:
        gamma: discount over later attempts, ``A_s = sum_{s' >= s} gamma^(s'-s) r~_{s'}``; in [0, 1].
            Paper: 1.0 (0.0 is the paper's ablation: each attempt credited with its own reward only).
        baseline: ``"loo"`` (leave-one-out mean of the other trajectories' rewards at the same attempt
            index; paper default, no std division) or ``"grpo"`` (group mean, optionally divided by the std).
        std_normalize: divide the ``grpo`` baseline-subtracted reward by (group std + epsilon), as verl's
            ``grpo`` with ``norm_adv_by_std_in_grpo``. Only valid with ``baseline="grpo"``.
        epsilon: added to the std before dividing (verl's default 1e-6); > 0.
        shaping: improvement-shaping weight g: the reward of attempt s becomes ``r_s + g (r_s - r_{s-1})``
            (no term for the first attempt). 0 disables it (paper).
        outcome_only: give every attempt of a trajectory the advantage of its final outcome (the reward of its
            last present attempt, compared across the group with the same baseline) instead of per-attempt
            credit: the "outcome only" comparison. ``gamma`` plays no part then.
        truncated: how an attempt that could not complete counts, whether the response budget cut it mid-way or
            left no room to start it (``mr_search.contract.AttemptStatus.TRUNCATED``): ``absent`` (default) as
            if it had not taken place (no reward, no part in the baseline, nothing flows back to earlier attempts,
            its tokens get advantage 0); ``zero`` as a present attempt with reward 0 (the original code's
            accident for a cut attempt, now applied to both cases).
    """

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
        """Builds the config from the ``mr_search.advantage`` subtree (a dict or an OmegaConf node).

        Args:
            config: the subtree, or None for the paper defaults.

        Raises:
            ValueError: on an unknown key (the message lists the valid ones) or an invalid value.
        """
        return from_mapping(cls, config, SECTION)
