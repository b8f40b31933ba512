"""Where the gold passage of a namesake question ranks for the natural and for the reformulated query.

    MR_SEARCH_WORLD=namesake python -m mr_search_retrieval.embedded.namesake_stats            # in-process dense index
    MR_SEARCH_WORLD=namesake python -m mr_search_retrieval.embedded.namesake_stats --url http://127.0.0.1:8019/retrieve

For each question of the namesake world (``namesake.py``; held-out by default) it searches three queries and
records the rank (1-based; ``None`` beyond ``--depth``) of the passage that holds the answer:

- ``natural``: the asked-about name N, as the question writes it (what a policy that copies the entity searches);
- ``question``: the whole question text;
- ``reformulated``: the name the first passage gives instead (the alias L; for a control question, N itself).

and prints, per relation, the share (%) of questions whose answer passage is in the top ``--topk`` (``hit@k``) and
first (``hit@1``), and its median rank, for each query, and ``miss_then_fixed``: the share whose natural query
misses (not in the top k) and whose reformulated query ranks it first; with ``--json`` the per-question ranks too.
``MR_SEARCH_NAMESAKE_VERSION`` picks the world's version (``namesake.py``).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from mr_search_retrieval.embedded.namesake import CONTROL_RELATION, RETRY_RELATION, VARIANT
from mr_search_retrieval.embedded.stats import http_search
from mr_search_retrieval.embedded.variant import world_variant
from mr_search_retrieval.embedded.world import ensure_world

Search = Callable[[list[str], int], list[list[str]]]  # queries, topk -> doc ids per query
QUERIES = ("natural", "question", "reformulated")


def queries_of(question: dict[str, Any], corpus: dict[str, dict[str, Any]]) -> dict[str, str]:
    """The three queries of a namesake question (N from its first gold passage's title, L from its last)."""
    gold = question["gold_doc_ids"]
    return {
        "natural": str(corpus[gold[0]]["title"]),
        "question": str(question["question"]),
        "reformulated": str(corpus[gold[-1]]["title"]),
    }


def _rank(ids: Sequence[str], doc: str) -> int | None:
    return ids.index(doc) + 1 if doc in ids else None


def measure(
    questions: Sequence[dict[str, Any]],
    corpus: dict[str, dict[str, Any]],
    search: Search,
    topk: int = 3,
    depth: int = 50,
) -> tuple[dict[str, dict[str, Any]], list[dict[str, Any]]]:
    """``(summary per relation, per-question ranks)`` for the namesake questions among ``questions``."""
    rows = [q for q in questions if q.get("relation") in (RETRY_RELATION, CONTROL_RELATION)]
    if not rows:
        raise ValueError("namesake_stats: no namesake questions in this world; build it with MR_SEARCH_WORLD=namesake")
    per_question: list[dict[str, Any]] = []
    texts = [queries_of(q, corpus) for q in rows]
    ranked = {name: search([t[name] for t in texts], depth) for name in QUERIES}
    for i, q in enumerate(rows):
        answer_doc = q["gold_doc_ids"][-1]
        ranks = {name: _rank(ranked[name][i], answer_doc) for name in QUERIES}
        per_question.append({"id": q["id"], "relation": q["relation"], "queries": texts[i], "ranks": ranks})
    summary: dict[str, dict[str, Any]] = {}
    for relation in (RETRY_RELATION, CONTROL_RELATION):
        group = [p for p in per_question if p["relation"] == relation]
        if not group:
            continue
        row: dict[str, Any] = {"n": len(group)}
        for name in QUERIES:
            ranks = [p["ranks"][name] for p in group]
            row[f"{name}_hit@{topk}"] = round(100.0 * sum(r is not None and r <= topk for r in ranks) / len(group), 1)
            row[f"{name}_hit@1"] = round(100.0 * sum(r == 1 for r in ranks) / len(group), 1)
            # Ranks beyond the depth count as depth + 1 for the median.
            row[f"{name}_median_rank"] = statistics.median(r if r is not None else depth + 1 for r in ranks)
        fixed = [
            p
            for p in group
            if (p["ranks"]["natural"] is None or p["ranks"]["natural"] > topk) and p["ranks"]["reformulated"] == 1
        ]
        row["miss_then_fixed"] = round(100.0 * len(fixed) / len(group), 1)
        summary[relation] = row
    return summary, per_question


def in_process_search() -> Search:
    """The embedded world's dense index (the one ``retrieval_launch.sh`` serves), searched in this process."""
    from mr_search_retrieval.config import EncoderConfig
    from mr_search_retrieval.default_index import embedded_corpus, ensure_index
    from mr_search_retrieval.encoders import HFEncoder
    from mr_search_retrieval.indexes.metadata import IndexMetadata
    from mr_search_retrieval.retriever import DenseSearcher, load_vector_index

    index_dir = ensure_index(embedded_corpus())
    searcher = DenseSearcher(
        HFEncoder(EncoderConfig()), load_vector_index(IndexMetadata.read(index_dir), index_dir, "cpu")
    )

    def search(queries: list[str], topk: int) -> list[list[str]]:
        out: list[list[str]] = []
        for start in range(0, len(queries), 64):
            _, ids = searcher.search(queries[start : start + 64], topk)
            out += [[str(int(i)) for i in row if int(i) >= 0] for row in ids]
        return out

    return search


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--url", default=None, help="a running service's /retrieve URL (default: in-process dense)")
    parser.add_argument("--split", choices=("train", "test"), default="test")
    parser.add_argument("--topk", type=int, default=3)
    parser.add_argument("--depth", type=int, default=50, help="ranks beyond this count as not found")
    parser.add_argument("--json", type=Path, default=None, help="also write the per-question ranks here")
    args = parser.parse_args(argv)
    if world_variant() != VARIANT:
        parser.error(f"set MR_SEARCH_WORLD={VARIANT}: the default world has no namesake questions")
    world = ensure_world()
    with world.corpus.open(encoding="utf-8") as handle:
        corpus = {row["id"]: row for row in map(json.loads, handle)}
    path = world.test if args.split == "test" else world.train
    questions = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]
    search = http_search(args.url) if args.url else in_process_search()
    summary, per_question = measure(questions, corpus, search, args.topk, args.depth)
    sys.stdout.write(json.dumps(summary, indent=1) + "\n")
    if args.json:
        args.json.write_text(json.dumps({"summary": summary, "questions": per_question}, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
