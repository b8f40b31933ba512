"""The namesake world: the default world kept as the control, namesake questions whose natural search misses and whose
passages show it, names recombined from words the policy practises copying, an opt-in variant whose cache never
replaces the default's."""

from __future__ import annotations

import hashlib
import json
import random
import re
from pathlib import Path

import pytest

from mr_search_embedded.world import namesake_stats
from mr_search_embedded.world.facts import WorldConfig, build_facts
from mr_search_embedded.world.namesake import (
    CONTROL_RELATION,
    CONTROL_SOURCE,
    PRESENCE_EXTRAS,
    RETRY_RELATION,
    RETRY_SOURCE,
    NamesakeConfig,
    build_namesake_world,
    namesake_query,
    trained_name_words,
)
from mr_search_embedded.world.variant import variant_cache_dir, world_variant
from mr_search_embedded.world.world import WorldRows, build_world, ensure_world

# sha256 of json.dumps(build_namesake_world(0) as (corpus, train, dev, test, held-out names), sort_keys=True); its
# corpus and dev split are those reports/compare_namesake used (test_splits.py); a change to the generator shows here.
WORLD_SHA256 = "b4256a94d078441f8a267722b7685414b4a1d56f1b92b82b3233afbd06fb407b"


@pytest.fixture(scope="module")
def worlds() -> tuple[WorldRows, WorldRows]:
    return build_world(0), build_namesake_world(0)


def _sha(world: WorldRows) -> str:
    payload = [world.corpus, world.train, world.dev, world.test, [list(world.held_out.dev), list(world.held_out.test)]]
    return hashlib.sha256(json.dumps(payload, sort_keys=True).encode()).hexdigest()


def _words(text: str) -> set[str]:
    return set(re.findall(r"\w+", text.lower()))


def test_two_builds_are_identical_and_pinned(worlds) -> None:
    assert build_namesake_world(0) == worlds[1]
    assert _sha(worlds[1]) == WORLD_SHA256


def test_the_default_worlds_questions_are_kept_as_the_control(worlds) -> None:
    base, world = worlds
    corpus = world.corpus
    assert len(corpus) == len(base.corpus) + NamesakeConfig().groups * (2 + len(PRESENCE_EXTRAS))
    # Dev and test: the default world's questions first, in their order, with the same gold passages' text.
    for base_split, split in ((base.dev, world.dev), (base.test, world.test)):
        assert [q["question"] for q in split[: len(base_split)]] == [q["question"] for q in base_split]
        for old, new in zip(base_split, split[: len(base_split)], strict=True):
            assert old["golden_answers"] == new["golden_answers"] and old["data_source"] == new["data_source"]
            assert [base.corpus[int(i)]["contents"] for i in old["gold_doc_ids"]] == [
                corpus[int(i)]["contents"] for i in new["gold_doc_ids"]
            ]
    assert sorted(q["question"] for q in base.train) == sorted(
        q["question"] for q in world.train if q["relation"] not in (RETRY_RELATION, CONTROL_RELATION)
    )
    assert [row["id"] for row in corpus] == [str(i) for i in range(len(corpus))]


def test_a_namesake_questions_first_search_shows_no_profession_word_and_a_wrong_city(worlds) -> None:
    world = worlds[1]
    corpus, questions = world.corpus, world.train + world.dev + world.test
    retry = [q for q in questions if q["relation"] == RETRY_RELATION]
    control = [q for q in questions if q["relation"] == CONTROL_RELATION]
    assert len(retry) == len(control) == NamesakeConfig().groups
    for q in retry:
        assert q["data_source"] == RETRY_SOURCE
        known, other = (corpus[int(i)] for i in q["gold_doc_ids"])
        name = known["title"]
        profession = namesake_query(q["question"]).split()[0]
        assert namesake_query(q["question"]) == f"{profession} {name}"
        assert other["text"] == f"The {profession} {name} was born in {q['golden_answers'][0]}."
        assert name not in other["title"], "B's article is not titled with N"
        about_n = [row for row in corpus if row["title"] == name]
        assert len(about_n) == 1 + len(PRESENCE_EXTRAS)
        assert all(profession not in _words(row["contents"]) for row in about_n), "the profession word is absent"
        assert all(q["golden_answers"][0] not in row["text"] for row in about_n)
        born = re.search(r"born in (\w+)\.", known["text"])
        assert born is not None and born.group(1) != q["golden_answers"][0], "the hasty answer is another city"
    for q in control:
        assert q["data_source"] == CONTROL_SOURCE and len(q["gold_doc_ids"]) == 1
        article = corpus[int(q["gold_doc_ids"][0])]
        assert q["golden_answers"][0] in article["text"]
        assert namesake_query(q["question"]).split()[0] in _words(article["text"]), "the profession word is present"


def test_held_out_groups_are_disjoint_from_training(worlds) -> None:
    world = worlds[1]

    def names(rows):
        return {world.corpus[int(q["gold_doc_ids"][0])]["title"] for q in rows if q["relation"] in (RETRY_RELATION,)}

    dev, test = names(world.dev), names(world.test)
    assert dev and test and not dev & test and not (dev | test) & names(world.train)
    assert len(dev) == len(test) == round(NamesakeConfig().test_fraction * NamesakeConfig().groups)
    assert dev <= set(world.held_out.dev) and test <= set(world.held_out.test)


def test_names_are_recombined_from_words_of_training_questions(worlds) -> None:
    base, world = worlds
    # The default world's training questions before the dev split: its train and test ones (and some it now drops,
    # which name no person).
    base_train = base.train + base.test
    asked = set(re.findall(r"\w+", " ".join(q["question"] for q in base_train)))
    questions = world.train + world.dev + world.test
    names = [world.corpus[int(q["gold_doc_ids"][0])]["title"] for q in questions if q["relation"] == RETRY_RELATION]
    assert all(len(n.split()) == 2 for n in names)
    assert all(w in asked for n in names for w in n.split()), "every name word occurs in a training question"
    firsts, lasts = trained_name_words(build_facts(random.Random(0), WorldConfig()), base_train)
    assert {n.split()[0] for n in names} <= set(firsts) and {n.split()[1] for n in names} <= set(lasts)
    assert len(set(names)) == len(names), "each group its own name"
    assert not set(names) & {row["title"] for row in base.corpus}, "no name is one of the default world's"


def test_bad_namesake_config_says_what_is_wrong() -> None:
    with pytest.raises(ValueError, match="groups"):
        NamesakeConfig(groups=1)
    with pytest.raises(ValueError, match="test_fraction"):
        NamesakeConfig(test_fraction=0.7)


def test_the_variant_lives_in_its_own_cache(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("MR_SEARCH_CACHE", str(tmp_path))
    monkeypatch.delenv("MR_SEARCH_WORLD", raising=False)
    assert world_variant() == "default" and variant_cache_dir() == tmp_path
    default = ensure_world()
    assert default.root == tmp_path / "world"
    before = default.corpus.read_bytes()
    monkeypatch.setenv("MR_SEARCH_WORLD", "namesake")
    # Named after the generator's version: folders an earlier generator wrote are never read.
    assert variant_cache_dir() == tmp_path / "worlds" / "namesake-v4"
    variant = ensure_world()
    assert variant.root == tmp_path / "worlds" / "namesake-v4" / "world"
    meta = json.loads(variant.meta.read_text())
    assert meta["variant"] == "namesake" and meta["namesake_version"] == 4
    assert default.corpus.read_bytes() == before, "the default world must stay as it was"
    with pytest.raises(ValueError, match="refusing to replace"):
        ensure_world(tmp_path)  # an explicit folder that holds the default world
    monkeypatch.setenv("MR_SEARCH_WORLD", "nope")
    with pytest.raises(ValueError, match=r"MR_SEARCH_WORLD='nope'.*default, namesake, threehop"):
        world_variant()


def _word_search(corpus: list[dict]):
    """A lexical stand-in for the dense index: passages ranked by shared words with the query (ties: shorter first)."""

    bags = [_words(row["contents"]) for row in corpus]

    def search(queries: list[str], topk: int) -> list[list[str]]:
        out = []
        for query in queries:
            q = _words(query)
            scored = sorted(range(len(corpus)), key=lambda i: (-len(q & bags[i]), len(bags[i]), i))
            out.append([str(i) for i in scored[:topk] if q & bags[i]])
        return out

    return search


def test_stats_rank_the_answer_passage_for_each_query(worlds) -> None:
    corpus, test = worlds[1].corpus, worlds[1].test
    by_id = {row["id"]: row for row in corpus}
    summary, per_question = namesake_stats.measure(test, by_id, _word_search(corpus), topk=3, depth=20)
    retry, control = summary[RETRY_RELATION], summary[CONTROL_RELATION]
    assert retry["n"] == control["n"] == 40
    assert retry["natural_hit@1"] == 0.0, "N's own article comes first for the bare name"
    assert retry["reformulated_hit@1"] == 100.0 and control["reformulated_hit@1"] == 100.0
    assert control["natural_hit@1"] == 100.0
    first = per_question[0]
    assert set(first["ranks"]) == {"natural", "question", "reformulated"}
    assert first["queries"]["reformulated"] == namesake_query(first["queries"]["question"])


def test_stats_refuse_a_world_without_namesakes(worlds) -> None:
    corpus, test = worlds[0].corpus, worlds[0].test
    with pytest.raises(ValueError, match="MR_SEARCH_WORLD=namesake"):
        namesake_stats.measure(test, {r["id"]: r for r in corpus}, _word_search(corpus))


def test_namesake_query_refuses_another_question() -> None:
    assert namesake_query("Where was the sailor Aldo Venn born?") == "sailor Aldo Venn"
    with pytest.raises(ValueError, match="not a namesake question"):
        namesake_query("Where was Aldo Venn born?")
