"""The mr_search.advantage subtree becomes a frozen, validated AdvantageConfig with the paper's defaults."""

from __future__ import annotations

import dataclasses

import pytest
from omegaconf import OmegaConf

from mr_search.advantage import AdvantageConfig


def test_defaults_are_the_papers() -> None:
    config = AdvantageConfig.from_config(None)
    assert (config.gamma, config.baseline, config.std_normalize, config.shaping, config.outcome_only) == (
        1.0,
        "loo",
        False,
        0.0,
        False,
    )


def test_reads_an_omegaconf_subtree() -> None:
    root = OmegaConf.create({"mr_search": {"advantage": {"gamma": 0, "baseline": "grpo", "std_normalize": True}}})
    config = AdvantageConfig.from_config(root.mr_search.advantage)
    assert config == AdvantageConfig(gamma=0.0, baseline="grpo", std_normalize=True)
    assert isinstance(config.gamma, float)


def test_is_frozen() -> None:
    with pytest.raises(dataclasses.FrozenInstanceError):
        AdvantageConfig().gamma = 0.5  # type: ignore[misc]


def test_unknown_key_lists_the_valid_ones() -> None:
    with pytest.raises(ValueError, match=r"unknown key\(s\) \['gama'\].*valid keys are \['gamma', 'baseline'"):
        AdvantageConfig.from_config({"gama": 0.5})


@pytest.mark.parametrize(
    ("values", "message"),
    [
        ({"baseline": "ppo"}, r"choose one of \['loo', 'grpo'\]"),
        ({"gamma": 1.2}, r"in \[0, 1\]"),
        ({"gamma": True}, "gamma"),
        ({"epsilon": 0.0}, "> 0"),
        ({"shaping": float("nan")}, "finite"),
        ({"outcome_only": "yes"}, "true or false"),
        ({"std_normalize": True}, "needs baseline=grpo"),
    ],
)
def test_invalid_values_say_what_is_valid(values: dict, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        AdvantageConfig.from_config(values)
