"""How hard the embedded world is for a search agent: what the question text finds through a running service.

    python -m mr_search_embedded.world.stats --url http://127.0.0.1:8000/retrieve

For each question (the question text as the query, top-k), per relation and number of hops:
``first@1`` / ``first@k`` (the first-hop gold passage ranks 1st / in the top k), ``all@k`` (every gold
passage in the top k; for two-hop questions that needs a second search when it is low) and
``confuser@k`` (the top k holds a non-gold passage naming another candidate answer of the same kind,
e.g. another city: a twin's or a distractor's passage that makes a careless reader answer wrong).
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import defaultdict
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from mr_search_embedded.world.search import Search, http_search
from mr_search_embedded.world.world import ensure_world


def measure(questions: Sequence[dict[str, Any]], corpus: dict[str, str], search: Search, topk: int = 3) -> dict:
    """Per ``<relation>`` (and ``all_1hop`` / ``all_2hop``) rates in percent, with counts."""
    candidates: dict[str, set[str]] = defaultdict(set)
    for q in questions:
        candidates[q["relation"]].update(q["golden_answers"])
    ranked = search([q["question"] for q in questions], topk)
    sums: dict[str, dict[str, float]] = defaultdict(lambda: defaultdict(float))
    for q, ids in zip(questions, ranked, strict=True):
        gold = q["gold_doc_ids"]
        others = [corpus[i] for i in ids if i not in gold]
        wrong = candidates[q["relation"]] - set(q["golden_answers"])
        row = {
            "first@1": float(bool(ids) and ids[0] == gold[0]),
            f"first@{topk}": float(gold[0] in ids),
            f"all@{topk}": float(all(g in ids for g in gold)),
            f"confuser@{topk}": float(any(c in text for text in others for c in wrong)),
            "n": 1.0,
        }
        for key in (q["relation"], f"all_{q['hops']}hop"):
            for name, value in row.items():
                sums[key][name] += value
    return {
        key: {name: (round(100 * v / s["n"], 1) if name != "n" else int(v)) for name, v in s.items()}
        for key, s in sorted(sums.items())
    }


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--url", default="http://127.0.0.1:8000/retrieve")
    parser.add_argument("--split", choices=("train", "dev", "test"), default="dev", help="default dev (for choosing)")
    parser.add_argument("--topk", type=int, default=3)
    parser.add_argument("--cache-dir", type=Path, default=None)
    args = parser.parse_args(argv)
    world = ensure_world(args.cache_dir)
    corpus = {}
    with world.corpus.open(encoding="utf-8") as handle:
        for line in handle:
            row = json.loads(line)
            corpus[row["id"]] = row["contents"]
    path = world.split(args.split)
    questions = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]
    stats = measure(questions, corpus, http_search(args.url), args.topk)
    width = max(len(k) for k in stats)
    names = list(next(iter(stats.values())))
    sys.stdout.write(" ".join([" " * width, *(f"{n:>12}" for n in names)]) + "\n")
    for key, row in stats.items():
        sys.stdout.write(" ".join([f"{key:<{width}}", *(f"{row[n]:>12}" for n in names)]) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
