"""Namesake world version 4: the retry decision is a presence check. A search for the asked-about name N returns
passages about one namesake only, so the question's profession word is absent from them for a retry question and
present for a control; a search for the profession word and the name ranks the other namesake's article first."""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path

import numpy as np
import pytest

from mr_search_embedded.world import namesake_stats
from mr_search_embedded.world.namesake import (
    CONTROL_RELATION,
    PRESENCE_EXTRAS,
    RETRY_RELATION,
    NamesakeConfig,
    build_namesake_world,
    namesake_person_names,
    namesake_query,
)
from mr_search_embedded.world.variant import variant_cache_dir
from mr_search_embedded.world.world import ensure_world

# sha256 of json.dumps(build_namesake_world(0, version=4), sort_keys=True) (versions 2 and 3:
# test_namesake_versions.py, unchanged by version 4).
V4_SHA256 = "3129007a9e5bfe5eef23bdeb91ac3f25d620c491cee0e06a865b7378e1b9fc59"
SMALL = NamesakeConfig(groups=24)


@pytest.fixture(scope="module")
def v3_v4():
    return build_namesake_world(0, version=3), build_namesake_world(0, version=4)


def _words(text: str) -> set[str]:
    return set(re.findall(r"\w+", text.lower()))


def _namesake(rows: list[dict], relation: str) -> list[dict]:
    return [q for q in rows if q["relation"] == relation]


def test_v4_is_deterministic_and_pinned(v3_v4) -> None:
    world = v3_v4[1]
    assert build_namesake_world(0, version=4) == world
    assert hashlib.sha256(json.dumps(world, sort_keys=True).encode()).hexdigest() == V4_SHA256


def test_v4_keeps_v3s_questions_and_changes_only_the_group_passages(v3_v4) -> None:
    (c3, tr3, te3), (c4, tr4, te4) = v3_v4
    assert [q["question"] for q in te3] == [q["question"] for q in te4], "the same held-out questions, in order"
    assert [(q["question"], q["golden_answers"]) for q in tr3] == [(q["question"], q["golden_answers"]) for q in tr4]
    groups = NamesakeConfig().groups
    assert len(c4) == len(c3) + groups * len(PRESENCE_EXTRAS), "N's article gains the extras; the alias's is B's"
    for old, new in zip(te3 + tr3, te4 + tr4, strict=True):  # the default world's questions: the same passages
        if old["relation"] not in (RETRY_RELATION, CONTROL_RELATION):
            assert [c3[int(i)]["contents"] for i in old["gold_doc_ids"]] == [
                c4[int(i)]["contents"] for i in new["gold_doc_ids"]
            ]


def test_v4_passages_name_no_alias_and_only_bs_article_names_bs_profession(v3_v4) -> None:
    corpus, train, test = v3_v4[1]
    for q in _namesake(train + test, RETRY_RELATION):
        known, other = (corpus[int(i)] for i in q["gold_doc_ids"])
        name = known["title"]
        profession = namesake_query(q["question"]).split()[0]
        assert namesake_query(q["question"]) == f"{profession} {name}"
        assert other["text"] == f"The {profession} {name} was born in {q['golden_answers'][0]}."
        assert name not in other["title"], "B's article is not titled with N"
        about_n = [row for row in corpus if row["title"] == name]
        assert len(about_n) == 1 + len(PRESENCE_EXTRAS)
        assert all(profession not in _words(row["contents"]) for row in about_n)
        assert all(q["golden_answers"][0] not in row["text"] for row in about_n)
    names = namesake_person_names(0, version=4)
    assert len(names) == 900 + NamesakeConfig().groups, "N only: version 4 names no alias"
    titles = {row["title"] for row in corpus}
    assert set(names) <= titles


def test_v4_has_its_own_cache_root(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("MR_SEARCH_CACHE", str(tmp_path))
    monkeypatch.setenv("MR_SEARCH_WORLD", "namesake")
    monkeypatch.setenv("MR_SEARCH_NAMESAKE_VERSION", "3")
    v3 = ensure_world()
    before = v3.corpus.read_bytes()
    monkeypatch.setenv("MR_SEARCH_NAMESAKE_VERSION", "4")
    assert variant_cache_dir() == tmp_path / "worlds" / "namesake-v4"
    v4 = ensure_world()
    assert json.loads(v4.meta.read_text())["namesake_version"] == 4
    assert v4.corpus.read_bytes() != before and v3.corpus.read_bytes() == before
    with pytest.raises(ValueError, match="version 3, not 4: refusing to replace"):
        ensure_world(tmp_path / "worlds" / "namesake-v3")


def test_namesake_query_refuses_another_question() -> None:
    assert namesake_query("Where was the sailor Aldo Venn born?") == "sailor Aldo Venn"
    with pytest.raises(ValueError, match="not a namesake question"):
        namesake_query("Where was Aldo Venn born?")


@pytest.fixture(scope="module")
def small_dense():
    """A small v4 world (24 groups) and exact dense search over it with the embedded world's encoder (MiniLM)."""
    from mr_search_retrieval.config import EncoderConfig
    from mr_search_retrieval.encoders import HFEncoder

    corpus, train, test = build_namesake_world(0, SMALL, version=4)
    encoder = HFEncoder(EncoderConfig())
    passages = encoder.encode_passages([row["contents"] for row in corpus])

    def search(queries: list[str], topk: int) -> list[list[str]]:
        scores = encoder.encode_queries(queries) @ passages.T
        return [[str(i) for i in row[:topk]] for row in np.argsort(-scores, axis=1, kind="stable")]

    return corpus, train + test, search


def test_the_natural_search_shows_the_profession_for_a_control_only(small_dense) -> None:
    corpus, questions, search = small_dense
    by_id = {row["id"]: row for row in corpus}
    summary, per_question = namesake_stats.measure(questions, by_id, search, topk=3, depth=20, version=4)
    retry, control = summary[RETRY_RELATION], summary[CONTROL_RELATION]
    assert retry["n"] == control["n"] == SMALL.groups
    # The decision: the question's profession word is absent from the natural query's top 3 (search again) for a
    # retry question, present (answer) for a control; the reformulation ranks B's article in the top 3.
    assert retry["profession_in_natural_top3"] <= 100.0 / SMALL.groups, "at most one group's B article slips in"
    assert control["profession_in_natural_top3"] == 100.0
    assert retry["natural_hit@3"] <= 100.0 / SMALL.groups and retry["reformulated_hit@3"] >= 90.0
    assert control["natural_hit@3"] >= 90.0
    first = next(p for p in per_question if p["relation"] == RETRY_RELATION)
    assert first["queries"]["reformulated"] == namesake_query(first["queries"]["question"])
    # A control's answer is in every passage about N, so the first search answers it.
    for q in _namesake(questions, CONTROL_RELATION):
        top = search([by_id[q["gold_doc_ids"][0]]["title"]], 3)[0]
        assert any(q["golden_answers"][0] in by_id[i]["text"] for i in top)
