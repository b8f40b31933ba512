"""The namesake world in the warm start: transcripts whose thought after the search for N says whether the question's
profession word is in the passages, and decision windows of freshly drawn groups."""

from __future__ import annotations

import random
import re
from dataclasses import asdict

import pytest

from mr_search_embedded.warmstart.decision import presence_windows, world_name_words
from mr_search_embedded.warmstart.transcripts import (
    MAY_BE_WRONG,
    THINK_ABSENT,
    THINK_PRESENT,
    TranscriptBuilder,
    TranscriptConfig,
)
from mr_search_embedded.world.facts import WorldConfig
from mr_search_embedded.world.namesake import (
    CONTROL_RELATION,
    RETRY_RELATION,
    NamesakeConfig,
    build_namesake_world,
)

NAME_WORDS = world_name_words({"seed": 0, "config": asdict(WorldConfig())})


def _words(text: str) -> set[str]:
    return set(re.findall(r"\w+", text.lower()))


def _kind(train: list[dict], relation: str) -> list[dict]:
    return [q for q in train if q["relation"] == relation]


def _profession(question: str) -> str:
    return re.match(r"Where was the (\w+) ", question).group(1)


def test_the_first_search_shows_the_profession_for_a_control_only(small_namesake) -> None:
    index, train = small_namesake
    builder = TranscriptBuilder(index, train, TranscriptConfig(p_wrong=0.0))
    for relation, present in ((RETRY_RELATION, False), (CONTROL_RELATION, True)):
        rows = _kind(train, relation)
        assert len(rows) >= 20
        for row in rows:
            attempt = builder.build(row, random.Random(0)).attempts[0]  # no slip: the first search is for N
            searched = next(t for t in attempt if t.role == "information")
            assert (_profession(row["question"]) in _words(searched.text)) is present, row["question"]


def test_a_retry_question_searches_the_profession_and_the_name(small_namesake) -> None:
    index, train = small_namesake
    builder = TranscriptBuilder(index, train, TranscriptConfig(p_wrong=0.99))
    rows = _kind(train, RETRY_RELATION)
    slipped = 0
    for seed, row in enumerate(rows):
        transcript = builder.build(row, random.Random(seed))
        name = index.doc(row["gold_doc_ids"][0])["title"]
        profession = _profession(row["question"])
        absent = THINK_ABSENT.format(profession=profession, name=name)
        query = f"<search> {profession} {name} </search>"
        texts = [[t.text for t in attempt] for attempt in transcript.attempts]
        if transcript.correct[0]:
            first = texts[0]
            assert first[0].endswith(f"<search> {name} </search>") and absent in first[2] and query in first[2]
        else:  # the hasty slip: N's article's city, then the retry searches the profession and the name
            slipped += 1
            known_city = re.search(r"born in (\w+)\.", index.doc(row["gold_doc_ids"][0])["text"]).group(1)
            assert texts[0][-1].endswith(f"<answer> {known_city} </answer>")
            assert not transcript.attempts[0][-1].trained, "the slip is context only"
            assert texts[1][0].startswith(f"<think> {MAY_BE_WRONG}. {absent}") and query in texts[1][0]
            assert f'Title: "{profession.capitalize()} from' in texts[1][1], "B's article comes back"
            assert texts[1][-1] == (
                f"<think> {THINK_PRESENT.format(profession=profession)} </think>\n"
                f"<answer> {row['golden_answers'][0]} </answer>"
            )
    assert slipped > len(rows) // 2


def test_a_control_question_answers_after_the_first_search(small_namesake) -> None:
    index, train = small_namesake
    builder = TranscriptBuilder(index, train, TranscriptConfig(p_wrong=0.0))
    for row in _kind(train, CONTROL_RELATION):
        attempt = builder.build(row, random.Random(0)).attempts[0]
        present = THINK_PRESENT.format(profession=_profession(row["question"]))
        assert len(attempt) == 3 and attempt[2].text == (
            f"<think> {present} </think>\n<answer> {row['golden_answers'][0]} </answer>"
        )


def test_presence_windows_are_fresh_groups_of_both_kinds(small_namesake) -> None:
    index, train = small_namesake
    windows = presence_windows(train, index, 40, NAME_WORDS, seed=2)
    assert windows == presence_windows(train, index, 40, NAME_WORDS, seed=2), "deterministic for a seed"
    titles = {doc["title"] for doc in index.docs}
    for number, window in enumerate(windows):
        search, information, decision = window.attempts[0]
        assert search.trained and decision.trained, "the window trains the search for N and the decision"
        name = re.search(r"<search> (.+) </search>", search.text).group(1)
        profession = _profession(window.question)
        assert name not in titles, "a fresh name, not one of the world's"
        assert window.question == f"Where was the {profession} {name} born?"
        retry = number % 2 == 0
        assert (profession in _words(information.text)) is not retry
        if retry:
            assert f"<search> {profession} {name} </search>" in decision.text
        else:
            assert decision.text.endswith(f"<answer> {window.golden_answers[0]} </answer>")
            assert window.golden_answers[0] in information.text


def test_the_probe_counts_the_reformulation_as_the_second_hop(monkeypatch: pytest.MonkeyPatch) -> None:
    from mr_search_embedded.warmstart.probe import _presence_queries

    rows = [
        {"extra_info": {"id": "a", "question": "Where was the sailor Aldo Venn born?", "relation": RETRY_RELATION}},
        {"extra_info": {"id": "b", "question": "Where was the painter Aldo Venn born?", "relation": CONTROL_RELATION}},
        {"extra_info": {"id": "c", "question": "Where was Aldo Venn born?", "relation": "birthplace"}},
    ]
    monkeypatch.setenv("MR_SEARCH_WORLD", "namesake")
    assert _presence_queries(rows) == {"a": "sailor Aldo Venn"}
    monkeypatch.delenv("MR_SEARCH_WORLD")
    assert _presence_queries(rows) == {}, "the default world has no namesake questions"


def test_a_found_answer_is_kept_more_often_than_checked(small_namesake) -> None:
    """``p_verify_found``: after a fix of a wrong answer, and after any right attempt of a namesake question, the next
    attempt checks with that chance (here 0: keeps); other right first attempts still check with ``p_verify``."""
    from mr_search_embedded.warmstart.transcripts import THINK_KEEP

    index, train = small_namesake
    found = TranscriptConfig(p_wrong=0.5, p_verify=1.0, p_verify_found=0.0)
    before = TranscriptConfig(p_wrong=0.5, p_verify=1.0)
    keep = f"<think> {THINK_KEEP} </think>"
    kept = {"fixed": 0, "namesake": 0, "checked": 0}
    for builder_config, expect_keep in ((found, True), (before, False)):
        builder = TranscriptBuilder(index, train, builder_config)
        for seed, row in enumerate(_kind(train, RETRY_RELATION) + train[:200]):
            transcript = builder.build(row, random.Random(seed))
            for number in range(1, 3):
                if not transcript.correct[number - 1]:
                    continue
                after_fix = number >= 2 and not transcript.correct[number - 2]
                namesake = row["relation"] == RETRY_RELATION
                is_keep = transcript.attempts[number][0].text.startswith(keep)
                if after_fix or namesake:
                    assert is_keep is expect_keep, (row["question"], number)
                    kept["fixed" if after_fix else "namesake"] += expect_keep
                else:
                    assert not is_keep, "a right first attempt of another question is still checked (p_verify 1)"
                    kept["checked"] += 1
    assert min(kept.values()) > 5, kept
    same = TranscriptConfig(p_verify_found=None)
    assert TranscriptBuilder(index, train, same).build(train[0], random.Random(1)) == TranscriptBuilder(
        index, train, TranscriptConfig()
    ).build(train[0], random.Random(1))
    with pytest.raises(ValueError, match=r"p_verify_found=1\.5"):
        TranscriptConfig(p_verify_found=1.5)


def test_fresh_window_names_can_use_every_word_held_out_names_use(small_namesake) -> None:
    """The windows draw N from ``world_name_words`` (the words every name of the world recombines, held-out ones
    included), never a name the corpus has."""
    index, train = small_namesake
    world = build_namesake_world(0, NamesakeConfig(groups=24))
    test = world.dev + world.test
    firsts, lasts = NAME_WORDS
    held_out = {index.doc(row["gold_doc_ids"][0])["title"] for row in test if row["relation"] == RETRY_RELATION}
    assert held_out and all(n.split()[0] in firsts and n.split()[-1] in lasts for n in held_out)
    titles = {doc["title"] for doc in index.docs}
    windows = presence_windows(train, index, 400, NAME_WORDS, seed=2)
    names = [re.search(r"<search> (.+) </search>", w.attempts[0][0].text).group(1) for w in windows]
    assert not set(names) & titles, "a fresh name, never one of the world's"
    words = {word for name in names for word in name.split()}
    assert words <= set(firsts) | set(lasts)
    assert len(words) > 100, "names from the whole vocabulary of name words, not from a few hundred groups"
    with pytest.raises(ValueError, match="no 'seed' or 'config'"):
        world_name_words({"seed": 0})
    with pytest.raises(ValueError, match="no first names or no surnames"):
        presence_windows(train, index, 2, ([], ["Venn"]))


def test_bs_article_takes_a_place_among_the_passages_drawn_from_the_query(small_namesake) -> None:
    """The lexical search for "<profession> N" misses B's article: it takes a place among the passages drawn from the
    query (the agent's dense index does not always rank it first), the same place for the same query."""
    index, train = small_namesake
    builder = TranscriptBuilder(index, train, TranscriptConfig(p_wrong=0.0))
    places = []
    for row in _kind(train, RETRY_RELATION):
        attempt = builder.build(row, random.Random(0)).attempts[0]
        second = [t for t in attempt if t.role == "information"][1].text
        titles = re.findall(r'Doc \d\(Title: "([^"]+)"\)', second)
        b_title = index.doc(row["gold_doc_ids"][1])["title"]
        assert titles.count(b_title) == 1 and len(titles) == 3, second
        places.append(titles.index(b_title))
        assert builder.build(row, random.Random(0)).attempts[0] == attempt, "drawn from the query: deterministic"
    assert set(places) == {0, 1, 2}
