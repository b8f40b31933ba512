"""The ``mr_search.episode`` config: paper defaults, and clear errors for bad values."""

from __future__ import annotations

from typing import Any

import pytest
from omegaconf import OmegaConf

from mr_search.agent.config import EpisodeConfig


def test_defaults_are_the_papers() -> None:
    config = EpisodeConfig()
    assert (config.attempts, config.max_turns_per_attempt, config.topk) == (3, 3, 3)
    assert (config.max_information_tokens, config.max_new_tokens_per_turn) == (1024, 1024)
    assert not config.early_stop_when_correct and not config.outcome_feedback
    assert config.context == "full" and config.reflection_template is None


def test_from_hydra_subtree() -> None:
    subtree = OmegaConf.create({"attempts": 1, "max_turns_per_attempt": 5, "context": "previous_attempt"})
    config = EpisodeConfig.from_config(subtree)
    assert config.attempts == 1 and config.max_turns_per_attempt == 5 and config.context == "previous_attempt"
    assert EpisodeConfig.from_config(None) == EpisodeConfig()


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        ({"attempts": 0}, "attempts"),
        ({"topk": 1.5}, "topk"),
        ({"max_turns_per_attempt": True}, "max_turns_per_attempt"),
        ({"context": "last"}, r"\['full', 'previous_attempt'\]"),
        ({"stop_params": "tgi"}, "auto"),
        ({"max_context_tokens": 1}, "max_context_tokens"),
        ({"reflection_template": "  "}, "reflection_template"),
        ({"val_attempts": 0}, "val_attempts"),
    ],
)
def test_bad_values_are_rejected_with_the_valid_ones(settings: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        EpisodeConfig(**settings)


def test_unknown_keys_list_the_valid_ones() -> None:
    with pytest.raises(ValueError, match=r"valid keys are .*attempts"):
        EpisodeConfig.from_config({"atempts": 3})
