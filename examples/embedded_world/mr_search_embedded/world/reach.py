"""Which questions a search budget can answer at all: an oracle that always searches the right entity, through the
real retriever.

    python -m mr_search_embedded.world.reach [--split dev] [--turns N] [--attempts K]      # in-process dense index
    python -m mr_search_embedded.world.reach --retriever bm25 | --url http://127.0.0.1:8000/retrieve

The oracle's every search is the name of the first gold passage (in hop order) not yet in its context: the asked-about
entity, then each bridge entity, which the passage before it names (the gold passage's title). The agent loop gives
an attempt ``mr_search.episode.max_turns_per_attempt`` model turns (``--turns``, default the config's 3) and runs no
search on an attempt's last turn (``mr_search/agent/loop.py``: no turn would be left to read it), so an attempt of N
turns holds at most N - 1 searches and an answer; later attempts see every earlier attempt's passages (the paper's
``context: full``). Three budgets, as searches:

- ``one_attempt``: N - 1 (one attempt);
- ``k_attempts``: K (N - 1) (K attempts in one context, MR-Search's);
- ``one_long_attempt``: K N - 1 (one attempt given K times the turns).

For each kind of question (1, 2 or 3 hops) it prints as JSON the share (%) whose answer passage (the last gold one)
is in the context within each budget, and ``shortcut``: the share whose first search's top k already holds a later
hop's gold passage (a hop the question would not need). ``stuck``: the share whose oracle search misses the passage
it names (it could never go on). The JSON names the world, the split and the retriever it read.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any

from mr_search_embedded.world.search import RETRIEVERS, Search, http_search, in_process_search


@dataclass(frozen=True)
class Budget:
    """An attempt's model turns and the attempts of a meta-episode."""

    turns: int
    attempts: int

    def __post_init__(self) -> None:
        if self.turns < 2:
            raise ValueError(f"reach: {self.turns} turns an attempt leave no search (the last turn answers); use >= 2")
        if self.attempts < 1:
            raise ValueError(f"reach: attempts={self.attempts}; use at least 1")

    def searches(self) -> dict[str, int]:
        """The searches each budget allows (the module docstring)."""
        return {
            "one_attempt": self.turns - 1,
            "k_attempts": self.attempts * (self.turns - 1),
            "one_long_attempt": self.attempts * self.turns - 1,
        }


@dataclass(frozen=True)
class Walk:
    """One question's oracle walk: the searches until its answer passage was in the context (None: never, within
    the most searches walked), whether its first search held a later hop's passage, whether a search missed."""

    searches: int | None
    shortcut: bool
    stuck: bool


def walk(
    questions: Sequence[Mapping[str, Any]],
    titles: Mapping[str, str],
    search: Search,
    limit: int,
    topk: int = 3,
) -> list[Walk]:
    """The oracle's walk for each question, at most ``limit`` searches each (batched: one retriever call a step).

    Args:
        questions: rows with ``gold_doc_ids`` in hop order.
        titles: doc id -> its title (the entity a search for that passage names).
        search: the retriever (``search.py``).
        limit: the most searches a walk makes.
        topk: passages a search returns (the agent's 3).
    """
    contexts: list[set[str]] = [set() for _ in questions]
    done: list[int | None] = [None] * len(questions)
    shortcut = [False] * len(questions)
    stuck = [False] * len(questions)
    for step in range(1, limit + 1):
        active, queries, wanted = [], [], []
        for i, q in enumerate(questions):
            if done[i] is not None or stuck[i]:
                continue
            gold = [str(d) for d in q["gold_doc_ids"]]
            missing = next(d for d in gold if d not in contexts[i])
            active.append(i)
            wanted.append(missing)
            queries.append(titles[missing])
        if not active:
            break
        for i, doc, found in zip(active, wanted, search(queries, topk), strict=True):
            gold = [str(d) for d in questions[i]["gold_doc_ids"]]
            contexts[i].update(found)
            if step == 1:
                shortcut[i] = any(d in found for d in gold[1:])
            if gold[-1] in contexts[i]:
                done[i] = step
            elif doc not in found:
                stuck[i] = True
    return [Walk(done[i], shortcut[i], stuck[i]) for i in range(len(questions))]


def reach(
    questions: Sequence[Mapping[str, Any]],
    titles: Mapping[str, str],
    search: Search,
    budget: Budget,
    topk: int = 3,
) -> dict[str, dict[str, float | None]]:
    """Per number of hops (``"1"``, ``"2"``, ``"3"``): ``n``, the share (%) of questions reached within each of
    ``budget``'s searches (``Budget.searches``), ``shortcut`` and ``stuck`` (%), ``mean_searches`` of those reached
    (None: none was)."""
    allowed = budget.searches()
    walks = walk(questions, titles, search, max(allowed.values()), topk)
    groups: dict[str, list[Walk]] = defaultdict(list)
    for q, w in zip(questions, walks, strict=True):
        groups[str(len(q["gold_doc_ids"]))].append(w)
    out: dict[str, dict[str, float | None]] = {}
    for hops, group in sorted(groups.items()):
        n = len(group)
        row: dict[str, float | None] = {"n": n}
        for name, limit in allowed.items():
            row[name] = round(100.0 * sum(w.searches is not None and w.searches <= limit for w in group) / n, 1)
        row["shortcut"] = round(100.0 * sum(w.shortcut for w in group) / n, 1)
        row["stuck"] = round(100.0 * sum(w.stuck for w in group) / n, 1)
        reached = [w.searches for w in group if w.searches is not None]
        row["mean_searches"] = round(sum(reached) / len(reached), 2) if reached else None
        out[hops] = row
    return out


def _default_turns() -> int:
    from mr_search.agent.config import EpisodeConfig

    return EpisodeConfig().max_turns_per_attempt


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--split", choices=("train", "dev", "test"), default="dev", help="default dev (for choosing)")
    parser.add_argument(
        "--turns", type=int, default=None, help="model turns an attempt (default: mr_search.episode's, 3)"
    )
    parser.add_argument("--attempts", type=int, default=3, help="attempts of a meta-episode, K (default 3)")
    parser.add_argument("--topk", type=int, default=3, help="passages a search returns (default 3)")
    parser.add_argument("--url", default=None, help="a running service's /retrieve URL (default: in-process)")
    parser.add_argument("--retriever", choices=RETRIEVERS, default="dense", help="the in-process index (default dense)")
    args = parser.parse_args(argv)
    try:
        budget = Budget(args.turns if args.turns is not None else _default_turns(), args.attempts)
    except ValueError as error:
        parser.error(str(error))

    from mr_search_embedded.world.variant import world_variant
    from mr_search_embedded.world.world import ensure_world

    world = ensure_world()
    with world.corpus.open(encoding="utf-8") as handle:
        titles = {row["id"]: row["title"] for row in map(json.loads, handle)}
    path = world.split(args.split)
    questions = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    search = http_search(args.url) if args.url else in_process_search(args.retriever)
    result = {
        "world": world_variant(),
        "split": args.split,
        "questions": str(path),
        "retriever": args.url or args.retriever,
        "topk": args.topk,
        "budget": {**asdict(budget), "searches": budget.searches()},
        "by_hops": reach(questions, titles, search, budget, args.topk),
    }
    sys.stdout.write(json.dumps(result, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
