"""The fixed texts of a meta-episode: the reflection turn with and without its options."""

from __future__ import annotations

import pytest

from mr_search import prompts


def test_the_reflection_turn_is_fixed_unless_asked_to_restate_the_question() -> None:
    assert prompts.reflection_prompt() == prompts.REFLECTION_PROMPT, "paper: a fixed turn"
    restated = prompts.reflection_prompt(None, question=" Where was the sailor Aldo Venn born ")
    assert restated == prompts.REFLECTION_PROMPT + "\nQuestion: Where was the sailor Aldo Venn born?\n"
    first = prompts.question_prompt("Where was the sailor Aldo Venn born")
    assert first.endswith(restated.removeprefix(prompts.REFLECTION_PROMPT)), "the same line as the first turn's"
    told = prompts.reflection_prompt(False, question="Who founded Ziniix?")
    assert told.startswith(prompts.FEEDBACK_WRONG) and told.endswith("Question: Who founded Ziniix?\n")


def test_the_question_is_read_back_from_the_first_turn_and_a_turn_without_one_is_named() -> None:
    assert prompts.question_of_prompt(prompts.question_prompt("Who founded Ziniix")) == "Who founded Ziniix?"
    with pytest.raises(ValueError, match=r"no 'Question: \.\.\.' line"):
        prompts.question_of_prompt("Who founded Ziniix?")
