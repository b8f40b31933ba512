"""The reach of a search budget, with an oracle that searches each hop's entity: one attempt of the agent's turns
cannot reach a three-hop answer, the next attempt can."""

from __future__ import annotations

import json

import pytest

from mr_search_embedded.warmstart.lookup import LexicalIndex
from mr_search_embedded.world import reach as reach_module
from mr_search_embedded.world.reach import Budget, reach, walk
from mr_search_embedded.world.threehop import build_threehop_world


def _title_first(corpus: list[dict]):
    """A retriever that ranks the passage titled as the query first (then lexical): the oracle's query always finds
    its entity's article, so only the budget decides."""
    index = LexicalIndex(corpus)
    by_title = {row["title"]: str(row["id"]) for row in corpus}

    def search(queries: list[str], topk: int) -> list[list[str]]:
        out = []
        for query in queries:
            ids = [by_title[query]] if query in by_title else []
            ids += [str(d["id"]) for d in index.search(query, topk) if str(d["id"]) not in ids]
            out.append(ids[:topk])
        return out

    return search


def test_budgets_count_searches_as_the_agent_loop_runs_them() -> None:
    # The last turn of an attempt answers: 3 turns are 2 searches.
    assert Budget(3, 3).searches() == {"one_attempt": 2, "k_attempts": 6, "one_long_attempt": 8}
    with pytest.raises(ValueError, match="leave no search"):
        Budget(1, 3)


def test_one_attempt_cannot_reach_a_three_hop_answer_the_next_can() -> None:
    world = build_threehop_world(0)
    titles = {row["id"]: row["title"] for row in world.corpus}
    result = reach(world.dev, titles, _title_first(world.corpus), Budget(3, 3))
    assert result["3"]["n"] >= 100
    assert result["3"]["one_attempt"] == 0.0 and result["3"]["shortcut"] == 0.0
    assert result["3"]["k_attempts"] == result["3"]["one_long_attempt"] == 100.0
    assert result["3"]["mean_searches"] == 3.0
    assert result["2"]["one_attempt"] == result["1"]["one_attempt"] == 100.0
    # With a larger attempt (4 turns: 3 searches) one attempt is enough.
    assert reach(world.dev, titles, _title_first(world.corpus), Budget(4, 1))["3"]["one_attempt"] == 100.0


def test_a_shortcut_saves_a_search_and_a_miss_gets_stuck() -> None:
    titles = {"a": "Ziniix", "b": "Aldo Venn", "c": "Kumholt"}
    found = {"Ziniix": ["a", "b"], "Aldo Venn": ["b"], "Kumholt": []}

    def search(queries: list[str], topk: int) -> list[list[str]]:
        return [found[q][:topk] for q in queries]

    questions = [{"gold_doc_ids": ["a", "b", "c"]}, {"gold_doc_ids": ["a", "b"]}]
    chain, short = walk(questions, titles, search, limit=5)
    assert chain.shortcut and chain.stuck and chain.searches is None, "the city's search misses it"
    assert short.shortcut and short.searches == 1 and not short.stuck


def test_the_command_names_the_world_and_split_it_read(tmp_path, monkeypatch, capsys) -> None:
    monkeypatch.setenv("MR_SEARCH_CACHE", str(tmp_path))
    monkeypatch.setenv("MR_SEARCH_WORLD", "threehop")
    world = build_threehop_world(0)
    monkeypatch.setattr(reach_module, "in_process_search", lambda retriever: _title_first(world.corpus))
    assert reach_module.main(["--split", "test", "--retriever", "bm25"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["world"] == "threehop" and out["split"] == "test" and out["questions"].endswith("test.jsonl")
    assert out["budget"] == {
        "turns": 3,
        "attempts": 3,
        "searches": {"one_attempt": 2, "k_attempts": 6, "one_long_attempt": 8},
    }
    assert out["by_hops"]["3"]["one_attempt"] == 0.0 and out["by_hops"]["3"]["n"] >= 200
