"""The namesake world's warm-start recipe 3: the thought after the name's article repeats the sentence of it that
names the question's profession, so the alias (or the city) is copied from a line the policy has just written."""

from __future__ import annotations

import random
import re
from dataclasses import replace

import pytest

from mr_search_embedded.tiny_model import policy_shape
from mr_search_embedded.warmstart.lookup import LexicalIndex
from mr_search_embedded.warmstart.train import (
    NAMESAKE_RECIPE,
    NAMESAKE_RECIPES,
    WarmStartConfig,
    policy_config,
    warmstart_config,
)
from mr_search_embedded.warmstart.transcripts import TranscriptBuilder, TranscriptConfig, namesake_sentence
from mr_search_embedded.world.world import corpus_row

ARTICLE = "The painter Aldo Venn was born in Kumholt. The sailor Aldo Venn is better known as Drelo Kam."
SAILOR = "The sailor Aldo Venn is better known as Drelo Kam."
PAINTER = "The painter Aldo Venn was born in Kumholt."


@pytest.fixture
def namesake_index() -> LexicalIndex:
    passages = [("Aldo Venn", ARTICLE), ("Drelo Kam", "Drelo Kam was a sailor born in Tarport.")]
    return LexicalIndex([corpus_row(i, t, x) for i, (t, x) in enumerate(passages)])


RETRY_ROW = {
    "question": "Where was the sailor Aldo Venn born?",
    "golden_answers": ["Tarport"],
    "gold_doc_ids": ["0", "1"],
    "hops": 2,
    "relation": "namesake_birthplace",
}
CONTROL_ROW = {
    "question": "Where was the painter Aldo Venn born?",
    "golden_answers": ["Kumholt"],
    "gold_doc_ids": ["0"],
    "hops": 1,
    "relation": "namesake_control",
}


def _thoughts(attempt) -> list[str]:
    return [m for t in attempt if t.role == "model" for m in re.findall(r"<think> (.*?) </think>", t.text)]


def _queries(attempt) -> list[str]:
    return [q for t in attempt if t.role == "model" for q in re.findall(r"<search> (.*?) </search>", t.text)]


def test_the_sentence_is_the_one_that_names_the_questions_profession():
    assert namesake_sentence(RETRY_ROW["question"], "Aldo Venn", ARTICLE) == SAILOR
    assert namesake_sentence(CONTROL_ROW["question"], "Aldo Venn", ARTICLE) == PAINTER
    with pytest.raises(ValueError, match="names the person"):
        namesake_sentence("Where was the doctor Aldo Venn born?", "Aldo Venn", ARTICLE)


def test_right_first_time_the_thought_copies_the_alias_sentence_before_searching_the_alias(namesake_index):
    config = TranscriptConfig(attempts=1, namesake_copy=True)
    (attempt,) = TranscriptBuilder(namesake_index, [RETRY_ROW], config).build(RETRY_ROW, random.Random(0)).attempts
    assert _queries(attempt) == ["Aldo Venn", "Drelo Kam"]
    assert _thoughts(attempt) == [
        "I need to search for this.",
        f"{SAILOR} I need to search for it.",
        "I found the answer.",
    ]
    assert attempt[-1].text.endswith("<answer> Tarport </answer>")
    # The sentence is written after the article came back, and the alias follows it in the same turn.
    search_alias = attempt[2]
    assert attempt[1].role == "information" and ARTICLE in attempt[1].text
    assert search_alias.trained and search_alias.text.index(SAILOR) < search_alias.text.index("<search> Drelo Kam")


def test_the_retry_after_the_hasty_slip_copies_the_same_sentence(namesake_index):
    config = TranscriptConfig(attempts=2, p_wrong=0.99, namesake_copy=True)
    transcript = TranscriptBuilder(namesake_index, [RETRY_ROW], config).build(RETRY_ROW, random.Random(0))
    assert transcript.correct == (False, True)
    slip, retry = transcript.attempts
    assert slip[-1].text.endswith("<answer> Kumholt </answer>") and not slip[-1].trained, "the hasty answer"
    assert _thoughts(retry)[0] == f"My previous answer may be wrong. {SAILOR} I need to search for it."
    assert _queries(retry) == ["Drelo Kam"] and retry[-1].text.endswith("<answer> Tarport </answer>")
    # With outcome feedback the retry says it was told, and still copies the sentence.
    told = TranscriptBuilder(namesake_index, [RETRY_ROW], replace(config, outcome_feedback=True))
    retry = told.build(RETRY_ROW, random.Random(0)).attempts[1]
    assert _thoughts(retry)[0] == f"My previous answer was incorrect. {SAILOR} I need to search for it."


def test_the_control_question_copies_its_own_sentence_and_answers(namesake_index):
    config = TranscriptConfig(attempts=1, namesake_copy=True)
    (attempt,) = TranscriptBuilder(namesake_index, [CONTROL_ROW], config).build(CONTROL_ROW, random.Random(0)).attempts
    assert _queries(attempt) == ["Aldo Venn"]
    assert _thoughts(attempt) == ["I need to search for this.", f"{PAINTER} I found the answer."]
    assert attempt[-1].text.endswith("<answer> Kumholt </answer>")


def test_without_the_option_the_transcripts_are_as_before(namesake_index):
    (attempt,) = (
        TranscriptBuilder(namesake_index, [RETRY_ROW], TranscriptConfig(attempts=1))
        .build(RETRY_ROW, random.Random(0))
        .attempts
    )
    assert _thoughts(attempt)[1] == "I found Drelo Kam. I need to search for it."
    assert SAILOR not in "".join(t.text for t in attempt if t.role == "model")


def test_the_recipe_is_versioned_and_earlier_recipes_keep_their_cache_keys():
    assert NAMESAKE_RECIPE == 3 and NAMESAKE_RECIPES == 14, "recipes 4-14 are opt-in, 3 stays the default"
    assert warmstart_config(world="namesake").transcripts.namesake_copy
    assert not warmstart_config(world="default").transcripts.namesake_copy
    # The default world's key and the namesake recipe 2's (the build the namesake comparison used) are unchanged.
    assert WarmStartConfig().key() == "18f3fe193c67"
    assert warmstart_config(world="namesake", namesake_recipe=2).key() == "1f43ce19d5ff"
    assert warmstart_config(world="namesake", namesake_recipe=1).key() == WarmStartConfig().key()
    assert warmstart_config(world="namesake").key() not in {"18f3fe193c67", "1f43ce19d5ff"}
    # Recipe 3 (the "copy the sentence" probe's build) keeps its key; recipe 4 trains on the same transcripts.
    assert warmstart_config(world="namesake", namesake_recipe=3).key() == "69a2ec909998"
    assert warmstart_config(world="namesake", namesake_recipe=4) == warmstart_config(
        world="namesake", namesake_recipe=3
    )
    with pytest.raises(ValueError, match="namesake_recipe=15"):
        warmstart_config(world="namesake", namesake_recipe=15)


def test_recipe_4_starts_from_a_policy_with_name_tokens_and_earlier_recipes_from_the_plain_one():
    for policy in ("tiny", "small"):
        assert policy_config(policy) == policy_shape(policy) == policy_config(policy, "default", 4)
        for recipe in (1, 2, 3, 5):
            assert policy_config(policy, "namesake", recipe) == policy_shape(policy)
        assert policy_config(policy, "namesake") == policy_shape(policy), "the default recipe (3) starts plain"
        assert policy_config(policy, "namesake", 4) == replace(policy_shape(policy), name_tokens=True)
    assert policy_config("small", "namesake", 3).key() == "42fd57d854a0", "the base recipes 2 and 3 were built on"
    with pytest.raises(ValueError, match="namesake_recipe=0; use 1 to 14"):
        policy_config("small", "namesake", 0)


def test_the_command_takes_a_recipe_and_rejects_one_that_does_not_exist(tmp_path):
    import os
    import subprocess
    import sys

    env = {**os.environ, "MR_SEARCH_WORLD": "namesake", "MR_SEARCH_CACHE": str(tmp_path)}
    done = subprocess.run(
        [sys.executable, "-m", "mr_search_embedded.warmstart", "--namesake-recipe", "15"],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 2, done.stderr
    assert "namesake_recipe=15; use 1 to 14" in done.stderr
    assert not any(tmp_path.iterdir()), "nothing is built for a recipe that does not exist"
