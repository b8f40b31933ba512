"""Scoring of attempts: normalisation, EM / F1 / substring EM, last-answer extraction, verl's entry."""

from __future__ import annotations

import numpy as np
import pytest

from mr_search import prompts
from mr_search.reward import (
    RewardConfig,
    compute_score,
    exact_match,
    extract_answer,
    gold_answers,
    normalize_answer,
    substring_match,
    token_f1,
)


@pytest.mark.parametrize(
    ("raw", "normalised"),
    [
        ("The Eiffel Tower", "eiffel tower"),
        ("  an   apple,  a pear!! ", "apple pear"),
        ("U.S.A.", "usa"),
        ("Theatre", "theatre"),  # "the" inside a word stays
        ("Ångström Café", "ångström café"),  # unicode letters are kept, lowercased
        ("Zoë\u2019s \u201cquote\u201d", "zoë\u2019s \u201cquote\u201d"),  # only ASCII punctuation goes
        ("東京", "東京"),
        ("", ""),
    ],
)
def test_normalisation_follows_method(raw: str, normalised: str) -> None:
    assert normalize_answer(raw) == normalised


@pytest.mark.parametrize(
    ("prediction", "golds", "em", "subem"),
    [
        ("Paris", ["paris"], 1.0, 1.0),
        ("the Paris", ["Paris", "Lyon"], 1.0, 1.0),
        ("Paris, France", ["Paris"], 0.0, 1.0),
        ("Lyon", ["Paris"], 0.0, 0.0),
        ("Ångström", ["ångström"], 1.0, 1.0),
        ("Angstrom", ["ångström"], 0.0, 0.0),  # no accent folding: a different string
        (None, ["Paris"], 0.0, 0.0),
        ("", [""], 1.0, 0.0),  # an empty gold never counts as contained
    ],
)
def test_em_and_substring(prediction: str | None, golds: list[str], em: float, subem: float) -> None:
    assert exact_match(prediction, golds) == em
    assert substring_match(prediction, golds) == subem


def test_token_f1() -> None:
    assert token_f1("Paris", ["Paris"]) == 1.0
    assert token_f1("Paris France", ["Paris"]) == pytest.approx(2 * 0.5 * 1 / 1.5)
    assert token_f1("the city of Paris", ["Paris city"]) == pytest.approx(2 * (2 / 3) * 1 / (2 / 3 + 1))
    assert token_f1("Lyon", ["Paris", "Lyon Rhone"]) == pytest.approx(2 / 3)
    assert token_f1("no", ["yes"]) == 0.0
    assert token_f1("yes it is", ["yes"]) == 0.0  # yes/no only match exactly
    assert token_f1(None, ["Paris"]) == 0.0


@pytest.mark.parametrize(
    ("text", "answer"),
    [
        ("<think>x</think><answer> Paris </answer>", "Paris"),
        ("<answer>Lyon</answer> then <answer>Paris</answer>", "Paris"),  # the LAST answer counts
        ("<answer>Paris", None),  # unclosed
        ("no tags at all", None),
        ("<answer>\nmulti\nline\n</answer>", "multi\nline"),
        ("<information>Doc 1(Title: x) <answer>Berlin</answer></information>", None),  # passages are not answers
        ("<answer>Rome</answer><information>Doc <answer>Oslo</answer></information>", "Rome"),
        ("<answer></answer>", ""),
        ("<answer>a <answer>b</answer>", "b"),
    ],
)
def test_extract_answer(text: str, answer: str | None) -> None:
    assert extract_answer(text) == answer


def test_prompt_example_answer_is_never_scored() -> None:
    """The question prompt shows `<answer> Paris </answer>` as an example; only model text is scored."""
    prompt = prompts.question_prompt("What is the capital of Freedonia?")
    assert extract_answer(prompt) == "Paris"  # the example is there...
    response = "<think>I do not know.</think>"
    result = compute_score("embedded_1hop", response, {"target": ["Paris"]})
    assert result["score"] == 0.0  # ...but the response alone is scored
    assert result["has_answer"] == 0.0


def test_gold_answers_shapes() -> None:
    assert gold_answers({"target": np.array(["a", "b"], dtype=object)}) == ["a", "b"]
    assert gold_answers("a") == ["a"]
    assert gold_answers(["a"]) == ["a"]
    with pytest.raises(ValueError, match="target"):
        gold_answers({"answers": ["a"]})
    with pytest.raises(TypeError):
        gold_answers(3)


def test_reward_config_validation_and_metrics() -> None:
    assert RewardConfig.from_config(None) == RewardConfig(metric="em", format_score=0.0)
    with pytest.raises(ValueError, match=r"\['em', 'f1', 'subem'\]"):
        RewardConfig(metric="bleu")
    with pytest.raises(ValueError, match="valid keys"):
        RewardConfig.from_config({"metrc": "em"})
    with pytest.raises(ValueError, match="format_score"):
        RewardConfig(format_score=1.0)
    f1 = RewardConfig.from_config({"metric": "f1"})
    assert f1.score_text("<answer>Paris France</answer>", {"target": ["Paris"]}) == pytest.approx(2 / 3)
    fmt = RewardConfig(format_score=0.1)
    assert fmt.score("Lyon", ["Paris"]) == 0.1
    assert fmt.score(None, ["Paris"]) == 0.0
    assert fmt.score("Paris", ["Paris"]) == 1.0


def test_compute_score_is_verl_compatible() -> None:
    """verl's reward manager calls compute_score(data_source=, solution_str=, ground_truth=, extra_info=)."""
    result = compute_score(
        data_source="nq",
        solution_str="<search> q </search>\n\n<information>Doc 1(Title: P) P</information>\n\n<answer>paris</answer>",
        ground_truth={"target": ["Paris"]},
        extra_info={"num_turns": 3},
        metric="subem",
    )
    assert result == {"score": 1.0, "em": 1.0, "f1": 1.0, "has_answer": 1.0}
