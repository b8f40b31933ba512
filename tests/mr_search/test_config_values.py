"""Every key of every mr_search.* subtree rejects a value of the wrong type, naming the key and what is valid."""

from __future__ import annotations

from dataclasses import fields
from typing import Any

import pytest
from omegaconf import OmegaConf

from mr_search.advantage import AdvantageConfig
from mr_search.agent.config import EpisodeConfig
from mr_search.agent.retrieval_client import RetrieverConfig
from mr_search.reward import RewardConfig

SUBTREES: list[tuple[type, str]] = [
    (EpisodeConfig, "mr_search.episode"),
    (RewardConfig, "mr_search.reward"),
    (AdvantageConfig, "mr_search.advantage"),
    (RetrieverConfig, "mr_search.retriever"),
]

# Values of the wrong type for each annotation (a string that looks right included: Hydra keeps quoted values).
WRONG: dict[str, list[Any]] = {
    "bool": ["false", "true", 0, 1],
    "int": ["3", 3.5, True],
    "float": ["1.0", True, float("nan")],
    "str": [3, True, 1.5],
}

CASES = [
    pytest.param(cls, section, field.name, value, id=f"{section}.{field.name}={value!r}")
    for cls, section in SUBTREES
    for field in fields(cls)
    for value in WRONG[str(field.type).replace(" ", "").removesuffix("|None")]
]


@pytest.mark.parametrize(("cls", "section", "key", "value"), CASES)
def test_a_wrong_type_is_rejected_naming_the_key(cls: type, section: str, key: str, value: Any) -> None:
    with pytest.raises(ValueError, match=rf"^{section}\.{key}=.* is not valid; (use|choose one of)"):
        cls.from_config({key: value})


def test_every_key_has_a_case() -> None:
    tested = {(section, case.values[2]) for case in CASES for section in [case.values[1]]}
    assert tested == {(section, f.name) for cls, section in SUBTREES for f in fields(cls)}


def test_the_string_false_is_not_read_as_true() -> None:
    # `mr_search.episode.early_stop_when_correct='false'` on the command line arrives as a string.
    node = OmegaConf.create({"early_stop_when_correct": "false"})
    with pytest.raises(ValueError, match=r"early_stop_when_correct='false' \(str\) is not valid; use true or false"):
        EpisodeConfig.from_config(node)


@pytest.mark.parametrize(
    ("cls", "values", "listed"),
    [
        (EpisodeConfig, {"context": "short"}, "['full', 'previous_attempt']"),
        (EpisodeConfig, {"stop_params": "tgi"}, "['auto', 'vllm', 'sglang', 'none']"),
        (RewardConfig, {"metric": "acc"}, "['em', 'f1', 'subem']"),
        (AdvantageConfig, {"baseline": "ppo"}, "['loo', 'grpo']"),
        (AdvantageConfig, {"truncated": "drop"}, "['absent', 'zero']"),
    ],
)
def test_enums_list_their_values(cls: type, values: dict, listed: str) -> None:
    with pytest.raises(ValueError) as error:
        cls.from_config(values)
    assert listed in str(error.value)


@pytest.mark.parametrize(("cls", "section"), SUBTREES)
def test_unknown_keys_list_the_valid_ones(cls: type, section: str) -> None:
    with pytest.raises(ValueError, match=rf"{section}: unknown key\(s\) \['bogus'\]; valid keys are \["):
        cls.from_config({"bogus": 1})


def test_whole_numbers_become_floats_and_optional_keys_take_null() -> None:
    assert AdvantageConfig.from_config({"gamma": 1}).gamma == 1.0
    assert isinstance(RetrieverConfig.from_config({"timeout_s": 5}).timeout_s, float)
    assert EpisodeConfig.from_config({"max_context_tokens": None}).max_context_tokens is None
