"""The three question splits of an embedded world, drawn by entity: ``train``, ``dev`` (for choosing) and ``test``
(read once).

A split holds every question about its people and companies (cities and countries are shared: their questions are
training questions). ``dev`` and ``test`` are two draws of entities; ``train`` keeps the questions about the rest
whose gold passages name no dev or test entity (a company's article names its founder: a training question about a
company founded by a held-out person is dropped, so no training transcript shows a held-out entity's article as its
evidence). Draws:

* ``draw_independent``: a share of the people, then of the companies, sampled apart (the default and namesake worlds'
  dev split: the questions held out before there was a dev split, on which every choice so far was made).
* ``draw_components``: a share of the companies, each with its founder, then people who founded no company, none
  in or linked to an earlier draw; each draw gets a generator of its own (the test split of every world; the
  threehop world's dev split too). A test question then names no dev entity and no dev question a test entity, and
  a test company's founder is a test person, so no fact on a test question's chain but a shared city's is in train.
"""

from __future__ import annotations

import json
import random
import re
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from mr_search_embedded.world.facts import FactGraph
from mr_search_embedded.world.questions import Question

SPLITS: Final = ("train", "dev", "test")


@dataclass(frozen=True)
class HeldOut:
    """The names whose questions are dev or test questions (people and companies; the namesake world adds its
    groups' shared names), in draw order. Written to a world's ``held_out.json``."""

    dev: tuple[str, ...]
    test: tuple[str, ...]

    def __post_init__(self) -> None:
        both = set(self.dev) & set(self.test)
        if both:
            raise ValueError(f"HeldOut: {len(both)} names are in both dev and test, e.g. {sorted(both)[0]!r}")

    @property
    def names(self) -> frozenset[str]:
        """Every held-out name, dev and test."""
        return frozenset(self.dev) | frozenset(self.test)

    def to_json(self) -> str:
        return json.dumps({"dev": list(self.dev), "test": list(self.test)}, indent=1) + "\n"

    @classmethod
    def read(cls, path: Path) -> HeldOut:
        """The held-out names a world wrote to ``path`` (its ``held_out.json``)."""
        try:
            data = json.loads(Path(path).read_text(encoding="utf-8"))
        except FileNotFoundError:
            raise FileNotFoundError(
                f"{path} does not exist: the world predates its dev and test splits; rebuild it "
                "(python -m mr_search_embedded.prepare corpus)"
            ) from None
        return cls(tuple(data["dev"]), tuple(data["test"]))


def _count(fraction: float, total: int) -> int:
    return max(1, round(fraction * total))


def draw_independent(rng: random.Random, graph: FactGraph, fraction: float) -> list[str]:
    """``fraction`` of the people, then of the companies, each sampled apart from ``rng`` (the draws the default
    world's held-out questions were made with, kept as its dev split)."""
    people = [p.name for p in graph.people]
    companies = [c.name for c in graph.companies]
    return rng.sample(people, _count(fraction, len(people))) + rng.sample(companies, _count(fraction, len(companies)))


def draw_components(rng: random.Random, graph: FactGraph, fraction: float, avoid: Collection[str] = ()) -> list[str]:
    """``fraction`` of the companies, each with its founder, then people who founded no company until ``fraction``
    of the people are drawn; none is in ``avoid`` or founded a company there, and no company drawn has a founder
    there. Returns the companies, their founders, then the other people."""
    avoid = set(avoid)
    founders = {c.founder for c in graph.companies}
    companies = [c for c in graph.companies if c.name not in avoid and c.founder not in avoid]
    solo = [p.name for p in graph.people if p.name not in founders and p.name not in avoid]
    n_companies = _count(fraction, len(graph.companies))
    n_solo = max(0, _count(fraction, len(graph.people)) - n_companies)
    if n_companies > len(companies) or n_solo > len(solo):
        raise ValueError(
            f"draw_components: {n_companies} companies and {n_solo} other people wanted, {len(companies)} and "
            f"{len(solo)} free; lower the held-out share (WorldConfig.test_fraction={fraction}) or add entities"
        )
    chosen = rng.sample(companies, n_companies)
    return [c.name for c in chosen] + [c.founder for c in chosen] + rng.sample(solo, n_solo)


@dataclass(frozen=True)
class Partition:
    """Questions by split, each in the order given; ``dropped``: questions about training entities whose gold
    passages name a held-out one."""

    train: list[Question]
    dev: list[Question]
    test: list[Question]
    dropped: list[Question]


def partition(questions: Sequence[Question], held_out: HeldOut) -> Partition:
    """Splits ``questions`` by their subject; a question about neither split's entities is a training question only
    if it names none of them (``Question.entities``)."""
    dev, test, hidden = set(held_out.dev), set(held_out.test), held_out.names
    out: dict[str, list[Question]] = {"train": [], "dev": [], "test": [], "dropped": []}
    for q in questions:
        if q.subject in dev:
            out["dev"].append(q)
        elif q.subject in test:
            out["test"].append(q)
        elif hidden.isdisjoint(q.entities):
            out["train"].append(q)
        else:
            out["dropped"].append(q)
    return Partition(**out)


def naming(names: Iterable[str]) -> re.Pattern[str]:
    """A pattern that finds any of ``names`` as whole words (longest first: "Aldo Venna" is not "Aldo Venn")."""
    ordered = sorted(set(names), key=len, reverse=True)
    if not ordered:
        return re.compile(r"(?!x)x")  # matches nothing
    return re.compile(r"\b(?:" + "|".join(map(re.escape, ordered)) + r")\b")


def naming_passages(corpus: Iterable[Mapping[str, Any]], names: Iterable[str]) -> list[str]:
    """Ids of the passages whose title or text names any of ``names`` (a held-out entity's article, its distractor
    passages, the article of a company it founded)."""
    pattern = naming(names)
    return [str(row["id"]) for row in corpus if pattern.search(str(row["contents"]))]
