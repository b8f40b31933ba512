"""Typed, frozen configuration of the attempt-level advantage (the ``mr_search.advantage`` Hydra subtree)."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, fields
from typing import Any, Final

BASELINES: Final = ("loo", "grpo")


@dataclass(frozen=True)
class AdvantageConfig:
    """Options of the multi-turn GRPO estimator; the defaults are the paper's (METHOD.md §4).

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
    """

    gamma: float = 1.0
    baseline: str = "loo"
    std_normalize: bool = False
    epsilon: float = 1e-6
    shaping: float = 0.0
    outcome_only: bool = False

    def __post_init__(self) -> None:
        if self.baseline not in BASELINES:
            raise ValueError(
                f"mr_search.advantage.baseline={self.baseline!r} is not valid; choose one of {list(BASELINES)}"
            )
        if isinstance(self.gamma, bool) or not isinstance(self.gamma, (int, float)) or not 0.0 <= self.gamma <= 1.0:
            raise ValueError(f"mr_search.advantage.gamma={self.gamma!r} is not valid; use a number in [0, 1]")
        if isinstance(self.epsilon, bool) or not isinstance(self.epsilon, (int, float)) or not self.epsilon > 0:
            raise ValueError(f"mr_search.advantage.epsilon={self.epsilon!r} is not valid; use a number > 0")
        if (
            isinstance(self.shaping, bool)
            or not isinstance(self.shaping, (int, float))
            or not math.isfinite(self.shaping)
        ):
            raise ValueError(
                f"mr_search.advantage.shaping={self.shaping!r} is not valid; use a finite number (0 = off)"
            )
        for name in ("std_normalize", "outcome_only"):
            if not isinstance(getattr(self, name), bool):
                raise ValueError(f"mr_search.advantage.{name}={getattr(self, name)!r} is not valid; use true or false")
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
        if config is None:
            return cls()
        if not isinstance(config, Mapping):
            try:  # an OmegaConf DictConfig is not a Mapping subclass
                from omegaconf import DictConfig, OmegaConf

                if isinstance(config, DictConfig):
                    config = OmegaConf.to_container(config, resolve=True)
            except ImportError:  # pragma: no cover - omegaconf ships with verl
                pass
        if not isinstance(config, Mapping):
            raise ValueError(f"mr_search.advantage must be a mapping of options, got {type(config).__name__}")
        valid = [f.name for f in fields(cls)]
        unknown = sorted(set(config) - set(valid))
        if unknown:
            raise ValueError(f"unknown key(s) {unknown} under mr_search.advantage; valid keys: {valid}")
        values = dict(config)
        for name in ("gamma", "epsilon", "shaping"):
            if isinstance(values.get(name), int) and not isinstance(values.get(name), bool):
                values[name] = float(values[name])
        return cls(**values)
