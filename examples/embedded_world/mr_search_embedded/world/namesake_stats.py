"""Where the gold passage of a namesake question ranks for the natural and for the reformulated query.

    MR_SEARCH_WORLD=namesake python -m mr_search_embedded.world.namesake_stats            # in-process dense index
    MR_SEARCH_WORLD=namesake python -m mr_search_embedded.world.namesake_stats --url http://127.0.0.1:8019/retrieve
    MR_SEARCH_WORLD=namesake python -m mr_search_embedded.world.namesake_stats --retriever bm25  # in-process BM25

For each question of the namesake world (``namesake.py``; the dev split by default) it searches three queries and
records the rank (1-based; ``None`` beyond ``--depth``) of the passage that holds the answer:

- ``natural``: the asked-about name N, as the question writes it (what a policy that copies the entity searches);
- ``question``: the whole question text;
- ``reformulated``: the question's profession word and the name (``namesake.namesake_query``: "sailor Aldo Venn";
  for a control question, "painter Aldo Venn").

and prints, per relation, the share (%) of questions whose answer passage is in the top ``--topk`` (``hit@k``) and
first (``hit@1``), and its median rank, for each query, ``miss_then_fixed``: the share whose natural query misses
(not in the top k) and whose reformulated query ranks it first, and ``profession_in_natural_top<k>``: the share
whose profession word (the question's, "sailor") occurs in a passage of the natural query's top k (the world's
decision: absent for a retry question, present for a control); with ``--json`` the per-question ranks too.
``--retriever`` picks the index searched in-process (the dense MiniLM one the agent uses, or BM25).
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from mr_search_embedded.world.namesake import CONTROL_RELATION, RETRY_RELATION, VARIANT, namesake_query
from mr_search_embedded.world.search import Search, http_search, in_process_search
from mr_search_embedded.world.variant import world_variant
from mr_search_embedded.world.world import ensure_world

QUERIES = ("natural", "question", "reformulated")


def queries_of(question: dict[str, Any], corpus: dict[str, dict[str, Any]]) -> dict[str, str]:
    """The three queries of a namesake question (N from its first gold passage's title; the reformulation: the
    profession word and N)."""
    natural = str(corpus[question["gold_doc_ids"][0]]["title"])
    reformulated = namesake_query(str(question["question"]))
    return {"natural": natural, "question": str(question["question"]), "reformulated": reformulated}


def profession_present(question: dict[str, Any], passages: Sequence[dict[str, Any]]) -> bool:
    """Whether the question's profession word ("sailor" in "Where was the sailor N born?") occurs as a word in one of
    ``passages`` (title or text, case aside)."""
    word = namesake_query(str(question["question"])).split()[0].lower()
    return any(word in re.findall(r"\w+", str(p["contents"]).lower()) for p in passages)


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
        present = profession_present(q, [corpus[d] for d in ranked["natural"][i][:topk]])
        row = {"id": q["id"], "relation": q["relation"], "queries": texts[i], "ranks": ranks}
        per_question.append({**row, "profession_in_top": present})
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
        row[f"profession_in_natural_top{topk}"] = round(
            100.0 * sum(p["profession_in_top"] for p in group) / len(group), 1
        )
        summary[relation] = row
    return summary, per_question


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--url", default=None, help="a running service's /retrieve URL (default: in-process)")
    parser.add_argument("--retriever", choices=("dense", "bm25"), default="dense", help="the in-process index")
    parser.add_argument("--split", choices=("train", "dev", "test"), default="dev", help="default dev (for choosing)")
    parser.add_argument("--topk", type=int, default=3)
    parser.add_argument("--depth", type=int, default=50, help="ranks beyond this count as not found")
    parser.add_argument("--json", type=Path, default=None, help="also write the per-question ranks here")
    args = parser.parse_args(argv)
    if world_variant() != VARIANT:
        parser.error(f"set MR_SEARCH_WORLD={VARIANT}: the default world has no namesake questions")
    world = ensure_world()
    with world.corpus.open(encoding="utf-8") as handle:
        corpus = {row["id"]: row for row in map(json.loads, handle)}
    path = world.split(args.split)
    questions = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]
    search = http_search(args.url) if args.url else in_process_search(args.retriever)
    summary, per_question = measure(questions, corpus, search, args.topk, args.depth)
    sys.stdout.write(json.dumps(summary, indent=1) + "\n")
    if args.json:
        args.json.write_text(json.dumps({"summary": summary, "questions": per_question}, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
