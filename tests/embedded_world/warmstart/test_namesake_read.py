"""Namesake recipe 9 (world version 4): the answer read from B's article wherever it stands, and a check of a namesake
answer that searches "<profession> N" again instead of searching N and deciding again."""

from __future__ import annotations

import random
import re
from collections import Counter
from dataclasses import replace

import pytest

from mr_search_embedded.warmstart.decision import presence_windows
from mr_search_embedded.warmstart.train import (
    NAMESAKE_CHECK_SHARE,
    NAMESAKE_READ_BATCH_SIZE,
    NAMESAKE_READ_RECIPE,
    NAMESAKE_SHUFFLED_RECIPE,
    WarmStartConfig,
    warmstart_config,
)
from mr_search_embedded.warmstart.transcripts import (
    THINK_CHECK_REFORMULATED,
    THINK_PRESENT,
    THINK_RETRY,
    TranscriptBuilder,
    TranscriptConfig,
    answer_turn,
    search_turn,
)
from mr_search_embedded.world.namesake import (
    CONTROL_RELATION,
    RETRY_RELATION,
)

_TITLES = re.compile(r'Doc \d\(Title: "([^"]+)"\) ([^\n]*)')


def _search(text: str) -> str:
    return re.search(r"<search> (.+) </search>", text).group(1)


def _answer(text: str) -> str:
    return re.search(r"<answer> (.+) </answer>", text).group(1)


def test_recipe_9_is_recipe_8_with_reading_and_checks_and_earlier_keys_stay(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MR_SEARCH_NAMESAKE_VERSION", "4")
    keys = {r: warmstart_config(world="namesake", namesake_recipe=r).key() for r in (6, 7, 8)}
    assert keys == {6: "a76b922e103c", 7: "5a35f173d0c2", 8: "0b25ef7fe162"}, "recipes 6-8 keep their cache keys"
    eight = warmstart_config(world="namesake", namesake_recipe=NAMESAKE_SHUFFLED_RECIPE)
    nine = warmstart_config(world="namesake", namesake_recipe=NAMESAKE_READ_RECIPE)
    assert nine == replace(
        eight,
        decision_read_answer=True,
        decision_check_share=NAMESAKE_CHECK_SHARE,
        decision_batch_size=NAMESAKE_READ_BATCH_SIZE,
        transcripts=replace(eight.transcripts, presence_check_reformulated=True),
    )
    assert nine.decision_count > eight.decision_count, "more windows than recipe 8's 12,000: they carry more"
    assert 0 < NAMESAKE_CHECK_SHARE < 1 and nine.key() not in set(keys.values())
    monkeypatch.setenv("MR_SEARCH_NAMESAKE_VERSION", "3")
    with pytest.raises(ValueError, match="recipe 9 does not fit the namesake world's version 3"):
        warmstart_config(world="namesake", namesake_recipe=NAMESAKE_READ_RECIPE)
    with pytest.raises(ValueError, match="only with decision_read_answer"):
        WarmStartConfig(decision_check_share=0.5)
    with pytest.raises(ValueError, match="presence_check_reformulated is for the namesake world's version 4"):
        TranscriptConfig(presence_check_reformulated=True)


def test_read_windows_answer_from_bs_article_wherever_it_stands(small_v4) -> None:
    index, train = small_v4
    plain = presence_windows(train, index, 600, seed=2)
    read = presence_windows(train, index, 600, seed=2, read_answer=True)
    places = Counter()
    for before, window in zip(plain, read, strict=True):
        (attempt,) = window.attempts
        assert attempt[:3] == before.attempts[0], "the decision part is recipe 6-8's window to the byte"
        answer = window.golden_answers[0]
        name = _search(attempt[0].text)
        profession = re.match(r"Where was the (\w+) ", window.question).group(1)
        if len(attempt) == 3:  # a control: answered after N's passages, as before
            assert answer in attempt[1].text and attempt[2].text.endswith(f"<answer> {answer} </answer>")
            continue
        assert _search(attempt[2].text) == f"{profession} {name}"
        passages = _TITLES.findall(attempt[3].text)
        b_article = (f"{profession.capitalize()} from {answer}", f"The {profession} {name} was born in {answer}.")
        assert len(passages) == 3 and passages.count(b_article) == 1, attempt[3].text
        assert all(answer not in text for title, text in passages if (title, text) != b_article)
        places[passages.index(b_article)] += 1
        assert attempt[4].text == answer_turn(THINK_PRESENT.format(profession=profession), answer)
        assert attempt[4].trained and attempt[2].trained
    assert set(places) == {0, 1, 2} and min(places.values()) > 60, places


def test_check_windows_search_the_reformulation_again_for_namesake_answers_only(small_v4) -> None:
    index, train = small_v4
    windows = presence_windows(train, index, 800, seed=3, read_answer=True, check_share=0.5)
    kinds = Counter()
    for window in windows:
        if len(window.attempts) == 1:
            kinds["single"] += 1
            continue
        first, check = window.attempts
        answer = window.golden_answers[0]
        name = _search(first[0].text)
        profession = re.match(r"Where was the (\w+) ", window.question).group(1)
        assert first[2].trained, "every window trains the decision after N's passages, a check window's too"
        assert first[-1].trained is window.correct[0], "a misread first answer is context only"
        assert check[-1].text == answer_turn(THINK_PRESENT.format(profession=profession), answer) and check[-1].trained
        if len(first) == 3:  # a control: checked as every recipe checks, by searching N again
            assert check[0].text == search_turn(THINK_RETRY, name) and check[1] == first[1]
            assert window.correct == (True, True)
            kinds["control"] += 1
            continue
        think = THINK_CHECK_REFORMULATED.format(profession=profession, name=name)
        assert check[0].text == search_turn(think, f"{profession} {name}") and check[0].trained
        assert check[1] == first[3], "the same search shows the same passages"
        given = _answer(first[4].text)
        if window.correct[0]:
            assert given == answer
            kinds["namesake right"] += 1
        else:  # misread: a city of a passage that is not B's article; the check reads B's
            assert given != answer and given in first[3].text
            kinds["namesake misread"] += 1
    assert min(kinds.values()) > 60, kinds
    assert 0.4 < (len(windows) - kinds["single"]) / len(windows) < 0.6
    with pytest.raises(ValueError, match="check_share needs read_answer"):
        presence_windows(train, index, 2, check_share=0.5)


def test_a_namesake_answer_is_checked_by_searching_the_reformulation_and_controls_as_before(small_v4) -> None:
    index, train = small_v4
    base = TranscriptConfig(
        namesake_presence=True, p_wrong=0.5, p_verify=1.0, p_verify_found=0.1, presence_gold_shuffled=True
    )
    nine = TranscriptBuilder(index, train, replace(base, presence_check_reformulated=True))
    eight = TranscriptBuilder(index, train, base)
    counts = Counter()
    for seed, row in enumerate(train):
        transcript = nine.build(row, random.Random(seed))
        before = eight.build(row, random.Random(seed))
        if row["relation"] != RETRY_RELATION:
            assert transcript == before, "control and default-world checks are recipe 8's"
            counts["control" if row["relation"] == CONTROL_RELATION else "other"] += 1
            continue
        name = index.doc(row["gold_doc_ids"][0])["title"]
        profession = re.match(r"Where was the (\w+) ", row["question"]).group(1)
        for number in range(1, len(transcript.attempts)):
            if not transcript.correct[number - 1]:
                continue
            check = transcript.attempts[number]
            think = THINK_CHECK_REFORMULATED.format(profession=profession, name=name)
            # p_verify (1 here), not p_verify_found: every right namesake answer is checked, by "<profession> N" alone
            assert check[0].text == search_turn(think, f"{profession} {name}"), check[0].text
            assert [_search(t.text) for t in check if "<search>" in t.text] == [f"{profession} {name}"]
            b_title = index.doc(row["gold_doc_ids"][1])["title"]
            assert f'(Title: "{b_title}")' in check[1].text
            assert check[2].text == answer_turn(THINK_PRESENT.format(profession=profession), row["golden_answers"][0])
            counts["namesake checks"] += 1
    assert min(counts.values()) > 5, counts
