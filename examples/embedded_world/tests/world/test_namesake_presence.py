"""The namesake world through the agent's own dense index (MiniLM): a search for the asked-about name N returns
passages about one namesake only, so the question's profession word is absent from them for a retry question and
present for a control; a search for the profession word and the name ranks the other namesake's article first."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from mr_search_embedded.world import namesake_stats
from mr_search_embedded.world.namesake import (
    CONTROL_RELATION,
    RETRY_RELATION,
    NamesakeConfig,
    build_namesake_world,
    namesake_query,
)

SMALL = NamesakeConfig(groups=24)


def _namesake(rows: list[dict], relation: str) -> list[dict]:
    return [q for q in rows if q["relation"] == relation]


@pytest.fixture(scope="module")
def small_dense():
    """A small namesake world (24 groups) and exact dense search over it with the embedded world's encoder (MiniLM).

    The namesake world's corpus is the default world's passages plus its namesake articles: the default's vectors are
    read back from the default world's cached dense index (`make test` prepares it; built here when missing), the
    encoder that built it encodes the rest (120 of 2,405 passages)."""
    from mr_search_embedded.world.world import ensure_world
    from mr_search_retrieval.config import EncoderConfig
    from mr_search_retrieval.encoders import HFEncoder
    from mr_search_retrieval.index_cache import ensure_index
    from mr_search_retrieval.indexes.faiss_index import FaissIndex

    world = build_namesake_world(0, SMALL)
    corpus = world.corpus
    texts = [row["contents"] for row in corpus]
    default_corpus = Path(ensure_world().corpus)
    default_texts = [json.loads(line)["contents"] for line in default_corpus.read_text(encoding="utf-8").splitlines()]
    index = FaissIndex.load(ensure_index(default_corpus, "dense"), device="cpu")
    vectors = index.reconstruct(np.arange(len(default_texts)))
    assert vectors is not None and index.index.ntotal == len(default_texts)
    known = dict(zip(default_texts, vectors, strict=True))
    encoder = HFEncoder(EncoderConfig())
    new = [text for text in texts if text not in known]
    assert len(new) < len(texts) // 10, "the namesake world no longer holds the default world's passages"
    known.update(zip(new, encoder.encode_passages(new), strict=True))
    passages = np.stack([known[text] for text in texts])

    def search(queries: list[str], topk: int) -> list[list[str]]:
        scores = encoder.encode_queries(queries) @ passages.T
        return [[str(i) for i in row[:topk]] for row in np.argsort(-scores, axis=1, kind="stable")]

    return corpus, world.train + world.dev + world.test, search


def test_the_natural_search_shows_the_profession_for_a_control_only(small_dense) -> None:
    corpus, questions, search = small_dense
    by_id = {row["id"]: row for row in corpus}
    summary, per_question = namesake_stats.measure(questions, by_id, search, topk=3, depth=20)
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
