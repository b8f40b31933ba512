"""Namesake recipe 10 (world version 4): recipe 8's decision windows untouched, and the reading of B's article and the
"<profession> N" check in skill windows of their own whose trained tokens never include the deciding position."""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import replace

import pytest

from mr_search_embedded.warmstart.decision import THINK_FOUND_NAMED, presence_windows, skill_windows
from mr_search_embedded.warmstart.render import encode
from mr_search_embedded.warmstart.train import (
    NAMESAKE_SHUFFLED_RECIPE,
    NAMESAKE_SKILL_BATCH_SIZE,
    NAMESAKE_SKILL_LOSS_WEIGHT,
    NAMESAKE_SKILL_RECIPE,
    WarmStartConfig,
    warmstart_config,
)
from mr_search_embedded.warmstart.transcripts import THINK_CHECK_REFORMULATED, answer_turn, search_turn

_TITLES = re.compile(r'Doc \d\(Title: "([^"]+)"\) ([^\n]*)')
_WORDS = (["Aldo", "Bera", "Cato", "Dina"], ["Venn", "Kol", "Marr", "Tesk"])
_DECIDING = "in the passages"


def _search(text: str) -> str:
    return re.search(r"<search> (.+) </search>", text).group(1)


def _answer(text: str) -> str:
    return re.search(r"<answer> (.+) </answer>", text).group(1)


def test_recipe_10_is_recipe_8_plus_skill_windows_and_earlier_keys_stay(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MR_SEARCH_NAMESAKE_VERSION", "4")
    keys = {r: warmstart_config(world="namesake", namesake_recipe=r).key() for r in (6, 7, 8, 9)}
    assert keys == {6: "a76b922e103c", 7: "5a35f173d0c2", 8: "0b25ef7fe162", 9: "3fdcadd66cbf"}
    eight = warmstart_config(world="namesake", namesake_recipe=NAMESAKE_SHUFFLED_RECIPE)
    ten = warmstart_config(world="namesake", namesake_recipe=NAMESAKE_SKILL_RECIPE)
    # Transcripts, decision windows (count, batch, seed, kinds) are recipe 8's: only the skill windows are added.
    assert ten == replace(
        eight, skill_batch_size=NAMESAKE_SKILL_BATCH_SIZE, skill_loss_weight=NAMESAKE_SKILL_LOSS_WEIGHT
    )
    assert NAMESAKE_SKILL_BATCH_SIZE > 0 and 0 < NAMESAKE_SKILL_LOSS_WEIGHT < 1
    assert ten.decision_count == eight.decision_count and ten.decision_batch_size == 24
    assert not ten.decision_read_answer and not ten.decision_check_share
    assert ten.key() not in set(keys.values())
    monkeypatch.setenv("MR_SEARCH_NAMESAKE_VERSION", "3")
    with pytest.raises(ValueError, match="recipe 10 does not fit the namesake world's version 3"):
        warmstart_config(world="namesake", namesake_recipe=NAMESAKE_SKILL_RECIPE)
    with pytest.raises(ValueError, match="skill_batch_size=4: use 0, or a positive count with decision_mixed"):
        WarmStartConfig(skill_batch_size=4)


def test_recipe_8s_decision_windows_are_unchanged_by_the_skill_windows(small_v4) -> None:
    index, train = small_v4
    before = presence_windows(train, index, 40, seed=2, train_search=True, name_words=_WORDS)
    skill_windows(train, index, 40, _WORDS, seed=2)  # draws of its own generator
    assert presence_windows(train, index, 40, seed=2, train_search=True, name_words=_WORDS) == before


def test_read_windows_answer_from_bs_article_wherever_it_stands_without_training_the_decision(small_v4) -> None:
    index, train = small_v4
    windows = skill_windows(train, index, 600, _WORDS, seed=1)
    places, kinds = Counter(), Counter()
    for window in windows:
        first = window.attempts[0]
        answer = window.golden_answers[0]
        name = _search(first[0].text)
        profession = re.match(r"Where was the (\w+) ", window.question).group(1)
        assert [t.role for t in first] == ["model", "information", "model", "information", "model"]
        assert not first[0].trained and not first[2].trained, "the search for N and the decision are context only"
        assert _DECIDING in first[2].text and _search(first[2].text) == f"{profession} {name}"
        passages = _TITLES.findall(first[3].text)
        b_article = (f"{profession.capitalize()} from {answer}", f"The {profession} {name} was born in {answer}.")
        assert len(passages) == 3 and passages.count(b_article) == 1, first[3].text
        assert all(answer not in text for title, text in passages if (title, text) != b_article)
        places[passages.index(b_article)] += 1
        found = THINK_FOUND_NAMED.format(profession=profession, name=name)
        assert _DECIDING not in found
        trained = [t.text for attempt in window.attempts for t in attempt if t.role == "model" and t.trained]
        assert trained and all(_DECIDING not in text for text in trained), "no trained token decides"
        if len(window.attempts) == 1:
            assert first[4].text == answer_turn(found, answer) and first[4].trained
            kinds["read"] += 1
            continue
        check = window.attempts[1]
        think = THINK_CHECK_REFORMULATED.format(profession=profession, name=name)
        assert check[0].text == search_turn(think, f"{profession} {name}") and check[0].trained
        assert check[1] == first[3], "the same search shows the same passages"
        assert check[2].text == answer_turn(found, answer) and check[2].trained
        assert not first[4].trained, "the first answer is context only"
        given = _answer(first[4].text)
        assert (given == answer) is window.correct[0]
        kinds["check kept" if window.correct[0] else "check fixed"] += 1
        if not window.correct[0]:
            assert given in first[3].text, "a misread: the city of a passage that is not B's article"
    assert set(places) == {0, 1, 2} and min(places.values()) > 120, places
    assert kinds["read"] == 300 and min(kinds["check kept"], kinds["check fixed"]) > 100, kinds
    with pytest.raises(ValueError, match="no first names or no surnames"):
        skill_windows(train, index, 2, ([], ["Venn"]))


def test_the_deciding_sentence_is_absent_from_the_encoded_trained_tokens(small_v4, tokenizer) -> None:
    index, train = small_v4
    for window in skill_windows(train, index, 6, _WORDS, seed=4):
        encoded = encode(window, tokenizer)
        trained = tokenizer.decode([i for i, m in zip(encoded.input_ids, encoded.loss_mask, strict=True) if m])
        whole = tokenizer.decode(encoded.input_ids)
        assert _DECIDING in whole and "I found the answer" in trained
        assert _DECIDING not in trained and "not in" not in trained, trained
