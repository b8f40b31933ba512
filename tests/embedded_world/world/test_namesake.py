"""The namesake world: the default world kept as the control, namesake questions whose natural search misses for a
stated reason, an opt-in variant whose cache never replaces the default's."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from mr_search_embedded.world import namesake_stats
from mr_search_embedded.world.namesake import (
    CONTROL_RELATION,
    CONTROL_SOURCE,
    RETRY_RELATION,
    RETRY_SOURCE,
    NamesakeConfig,
    build_namesake_world,
)
from mr_search_embedded.world.variant import variant_cache_dir, world_variant
from mr_search_embedded.world.world import build_world, ensure_world


@pytest.fixture(scope="module", params=[2, 3], ids=["v2", "v3"])
def version(request) -> int:
    """Each version of the namesake world that can be built: every test that takes ``worlds`` holds for both."""
    return request.param


@pytest.fixture(scope="module")
def worlds(version: int) -> tuple[tuple[list, list, list], tuple[list, list, list]]:
    return build_world(0), build_namesake_world(0, version=version)


def test_two_builds_are_identical(worlds, version: int) -> None:
    assert build_namesake_world(0, version=version) == worlds[1]


def test_the_default_worlds_questions_are_kept_as_the_control(worlds) -> None:
    (base_corpus, base_train, base_test), (corpus, train, test) = worlds
    assert len(corpus) > len(base_corpus)
    # Held-out: the default world's questions first, in their order, with the same gold passages' text.
    assert [q["question"] for q in test[: len(base_test)]] == [q["question"] for q in base_test]
    for old, new in zip(base_test, test[: len(base_test)], strict=True):
        assert old["golden_answers"] == new["golden_answers"] and old["data_source"] == new["data_source"]
        assert [base_corpus[int(i)]["contents"] for i in old["gold_doc_ids"]] == [
            corpus[int(i)]["contents"] for i in new["gold_doc_ids"]
        ]
    assert sorted(q["question"] for q in base_train) == sorted(
        q["question"] for q in train if q["relation"] not in (RETRY_RELATION, CONTROL_RELATION)
    )
    assert [row["id"] for row in corpus] == [str(i) for i in range(len(corpus))]


def test_a_namesake_question_states_why_its_first_search_misses(worlds) -> None:
    corpus, train, test = worlds[1]
    retry = [q for q in train + test if q["relation"] == RETRY_RELATION]
    control = [q for q in train + test if q["relation"] == CONTROL_RELATION]
    assert len(retry) == len(control) == NamesakeConfig().groups
    for q in retry:
        assert q["data_source"] == RETRY_SOURCE
        known, alias = (corpus[int(i)] for i in q["gold_doc_ids"])
        name = re.fullmatch(r"Where was the (\w+) (.+) born\?", q["question"])
        assert name is not None
        profession, person = name.groups()
        answer = q["golden_answers"][0]
        assert known["title"] == person and person not in alias["text"], "the natural query must not name the answer"
        assert f"The {profession} {person} is better known as {alias['title']}." in known["text"]
        assert answer in alias["text"] and answer not in known["text"]
        born = re.search(r"was born in (\w+)\.", known["text"])
        assert born is not None and born.group(1) != answer, "the hasty answer is another city"
    for q in control:
        assert q["data_source"] == CONTROL_SOURCE and len(q["gold_doc_ids"]) == 1
        assert q["golden_answers"][0] in corpus[int(q["gold_doc_ids"][0])]["text"]


def test_held_out_groups_are_disjoint_from_training(worlds) -> None:
    corpus, train, test = worlds[1]

    def names(rows):
        return {corpus[int(q["gold_doc_ids"][0])]["title"] for q in rows if q["relation"] in (RETRY_RELATION,)}

    held = names(test)
    assert held and not held & names(train)
    assert len(held) == round(NamesakeConfig().test_fraction * NamesakeConfig().groups)


def test_bad_namesake_config_says_what_is_wrong() -> None:
    with pytest.raises(ValueError, match="groups"):
        NamesakeConfig(groups=1)
    with pytest.raises(ValueError, match="test_fraction"):
        NamesakeConfig(test_fraction=0.7)


def test_the_variant_lives_in_its_own_cache(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("MR_SEARCH_CACHE", str(tmp_path))
    monkeypatch.delenv("MR_SEARCH_NAMESAKE_VERSION", raising=False)  # version 2: worlds/namesake
    monkeypatch.delenv("MR_SEARCH_WORLD", raising=False)
    assert world_variant() == "default" and variant_cache_dir() == tmp_path
    default = ensure_world()
    assert default.root == tmp_path / "world"
    before = default.corpus.read_bytes()
    monkeypatch.setenv("MR_SEARCH_WORLD", "namesake")
    variant = ensure_world()
    assert variant.root == tmp_path / "worlds" / "namesake" / "world"
    assert json.loads(variant.meta.read_text())["variant"] == "namesake"
    assert default.corpus.read_bytes() == before, "the default world must stay as it was"
    with pytest.raises(ValueError, match="refusing to replace"):
        ensure_world(tmp_path)  # an explicit folder that holds the default world
    monkeypatch.setenv("MR_SEARCH_WORLD", "nope")
    with pytest.raises(ValueError, match=r"MR_SEARCH_WORLD='nope'.*default, namesake"):
        world_variant()


def _word_search(corpus: list[dict]):
    """A lexical stand-in for the dense index: passages ranked by shared words with the query (ties: shorter first)."""

    def words(text: str) -> set[str]:
        return set(re.findall(r"\w+", text.lower()))

    bags = [words(row["contents"]) for row in corpus]

    def search(queries: list[str], topk: int) -> list[list[str]]:
        out = []
        for query in queries:
            q = words(query)
            scored = sorted(range(len(corpus)), key=lambda i: (-len(q & bags[i]), len(bags[i]), i))
            out.append([str(i) for i in scored[:topk] if q & bags[i]])
        return out

    return search


def test_stats_rank_the_answer_passage_for_each_query(worlds) -> None:
    corpus, _, test = worlds[1]
    by_id = {row["id"]: row for row in corpus}
    summary, per_question = namesake_stats.measure(test, by_id, _word_search(corpus), topk=3, depth=20)
    retry, control = summary[RETRY_RELATION], summary[CONTROL_RELATION]
    assert retry["n"] == control["n"] == 40
    assert retry["natural_hit@3"] == 0.0, "the alias's passage never contains the asked-about name"
    assert retry["reformulated_hit@3"] == 100.0 and retry["miss_then_fixed"] > 90.0
    assert control["natural_hit@3"] > 90.0 and control["miss_then_fixed"] == 0.0
    first = per_question[0]
    assert set(first["ranks"]) == {"natural", "question", "reformulated"}


def test_stats_refuse_a_world_without_namesakes(worlds) -> None:
    corpus, _, test = worlds[0]
    with pytest.raises(ValueError, match="MR_SEARCH_WORLD=namesake"):
        namesake_stats.measure(test, {r["id"]: r for r in corpus}, _word_search(corpus))


def test_the_person_names_are_the_worlds_people_and_each_groups_name_and_alias(worlds, version: int) -> None:
    from mr_search_embedded.world.namesake import namesake_person_names

    corpus, train, test = worlds[1]
    names = namesake_person_names(0, version=version)
    assert len(names) == len(set(names)) == 900 + 2 * NamesakeConfig().groups
    titles = {row["title"] for row in corpus}
    assert set(names) <= titles, "every person has an article titled with the name"
    retry = [q for q in train + test if q["relation"] == RETRY_RELATION]
    for q in retry:
        known, alias = (corpus[int(i)]["title"] for i in q["gold_doc_ids"])
        assert known in names and alias in names
    assert namesake_person_names(0, NamesakeConfig(groups=2), version=version)[:900] == names[:900]
