"""The ``namesake`` embedded world (opt-in, ``MR_SEARCH_WORLD=namesake``): the default world plus questions whose
first, natural search misses, whose passages show it, and which a search with the question's own words fixes.

DESIGN

* Everything of the default world (``world.py``, same seed): its passages and its questions, each in its split, with
  the default world's dev and test questions first in theirs and in their order (the same first N per data source
  as before): the control.
* Namesake groups (``NamesakeConfig.groups``, 400). Two people share a name N and differ in profession: the well-known
  one, an A (say a painter) born in city C1, and the other, a B born in C2 (another country). N's article, titled N,
  is about the A only, and so are three more passages titled N (``PRESENCE_EXTRAS``, none naming B's profession); B's
  article is titled with B's profession and city, and names N in the question's words:

      "Aldo Venn"           Aldo Venn was a painter born in Kumholt.
      "Aldo Venn"           Aldo Venn worked as a painter in Kumholt for many years.   (and two more like it)
      "Sailor from Tarport" The sailor Aldo Venn was born in Tarport.

  ``Where was the sailor Aldo Venn born?`` (relation ``namesake_birthplace``, data source ``embedded_namesake``,
  answer C2, gold passages N's article then B's). The natural query, N, returns the A's passages (B's article falls
  below the top 3 the agent reads): their only birthplace is the painter's, C1, the wrong answer a hasty reader
  gives, and none holds the question's profession word "sailor". Absent, search again with it and the name,
  ``namesake_query`` ("sailor Aldo Venn"), which ranks B's article first.
  ``Where was the painter Aldo Venn born?`` (``namesake_control``, data source ``embedded_namesake_control``, answer
  C1, N's article only) has the same shape, its profession word is in N's passages, and the first search answers it:
  retrying it only risks breaking a right answer, so a policy that retries must read which case it is in.
* Names. Each N is recombined: the first word from the first names, the last from the surnames, of the default
  world's people named in its questions other than dev ones (its training questions before there was a dev split:
  the corpus has not changed since); no full name is anyone else's. Every name word is then one the policy
  practises copying, and a held-out group's name is still a new combination.
* Splits (the default world's shares): the questions about 10% of the groups are dev questions (the groups held out
  before there was a dev split), those about another 10%, drawn from the rest by a generator of their own, test
  questions; ``held_out.json`` names the dev and test groups' N beside the default world's held-out entities.
* ``python -m mr_search_embedded.world.namesake_stats`` measures (in-process or through a service) the share of
  namesake questions whose natural query misses the gold passage and its rank for the natural and the reformulated
  query.
* Determinism: the default world's generator, then one ``random.Random("namesake-<seed>")`` for the groups, one of
  their own for the names and for the passages' order (ids reveal nothing), so two builds are byte-identical. The
  draws are those of the world ``reports/compare_namesake`` used (its hash is pinned in the tests): each group also
  draws syllable names that the recombined ones replace and an alias no passage names, and the groups' generator
  makes a shuffle's draws for a list without the ``PRESENCE_EXTRAS`` before it draws the split.
"""

from __future__ import annotations

import random
import re
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any, Final

from mr_search_embedded.world.facts import PROFESSIONS, City, FactGraph, WorldConfig, build_facts
from mr_search_embedded.world.names import NameGenerator
from mr_search_embedded.world.splits import HeldOut
from mr_search_embedded.world.variant import NAMESAKE_WORLD_VERSION
from mr_search_embedded.world.world import (
    DEFAULT_SEED,
    WORLD_VERSION,
    WorldPaths,
    WorldRows,
    build_world,
    corpus_row,
    write_rows,
)

VARIANT: Final = "namesake"
# The passages about the A besides N's article, all titled N: they fill the top 3 of a search for N, so B's
# article, which names N once and not in its title, falls below it (ranks: reports/compare_namesake).
PRESENCE_EXTRAS: Final = (
    "{name} worked as {article} {profession} in {city} for many years.",
    "{name} is remembered in {city} as {article} {profession} of great skill.",
    "{name} spent most of a long life in {city}.",
)
RETRY_SOURCE: Final = "embedded_namesake"
CONTROL_SOURCE: Final = "embedded_namesake_control"
RETRY_RELATION: Final = "namesake_birthplace"
CONTROL_RELATION: Final = "namesake_control"


@dataclass(frozen=True)
class NamesakeConfig:
    """Sizes of the namesake part (the default world's own sizes are ``WorldConfig``'s defaults)."""

    groups: int = 400
    # Share of groups whose N also has a distractor passage ("Travels of N": the dense index ranks it above N's own
    # article for the bare name, so the hasty answer becomes the distractor's city).
    distractor_rate: float = 0.0
    test_fraction: float = 0.1  # share of groups whose two questions are in each of dev and test

    def __post_init__(self) -> None:
        if not isinstance(self.groups, int) or self.groups < 2:
            raise ValueError(f"NamesakeConfig.groups={self.groups!r}: must be an integer >= 2")
        if not 0.0 <= self.distractor_rate <= 1.0:
            raise ValueError(f"NamesakeConfig.distractor_rate={self.distractor_rate!r}: must be in [0, 1]")
        if not 0.0 < self.test_fraction < 0.5:
            raise ValueError(f"NamesakeConfig.test_fraction={self.test_fraction!r}: must be in (0, 0.5)")


@dataclass(frozen=True)
class NamesakeGroup:
    name: str  # N, shared by both
    known_profession: str  # A: the one N's own article is about
    known_city: str  # C1
    other_profession: str  # B: the one whose article is titled with profession and city
    other_city: str  # C2, in another country than C1
    alias: str  # drawn with the group, named in no passage


def namesake_meta(config: NamesakeConfig | None = None) -> dict[str, Any]:
    """What ``meta.json`` records about the variant (a cached world whose record differs is rebuilt)."""
    return {
        "variant": VARIANT,
        "namesake_version": NAMESAKE_WORLD_VERSION,
        "namesake": asdict(config or NamesakeConfig()),
    }


def _article(word: str) -> str:
    return "an" if word[0] in "aeiou" else "a"


class RecombinedNames:
    """The groups' person names: a first name from ``firsts`` and a surname from ``lasts`` (each list drawn from
    uniformly), unique across every name ``names`` has claimed; ``person(avoid)`` shares no word with ``avoid``."""

    def __init__(self, rng: random.Random, names: NameGenerator, firsts: list[str], lasts: list[str]) -> None:
        if not firsts or not lasts:
            raise ValueError("RecombinedNames: no first names or surnames to recombine; the world has no people")
        self._rng, self._names, self._firsts, self._lasts = rng, names, firsts, lasts

    def person(self, avoid: str = "") -> str:
        taken = set(avoid.lower().split())
        for _ in range(10_000):
            first, last = self._rng.choice(self._firsts), self._rng.choice(self._lasts)
            if {first.lower(), last.lower()} & taken or first.lower() == last.lower():
                continue
            name = f"{first} {last}"
            if self._names.claim(name):
                return name
        raise RuntimeError("RecombinedNames: no unused combination left; lower NamesakeConfig.groups")


def trained_name_words(graph: FactGraph, train: list[dict[str, Any]]) -> tuple[list[str], list[str]]:
    """``(first names, surnames)``, each once in the order of ``graph.people``, of the people whose full name occurs
    in a question of ``train`` (the default world's training questions)."""
    text = "\n".join(str(q["question"]) for q in train)
    people = [p.name for p in graph.people if p.name in text]
    firsts = list(dict.fromkeys(name.split()[0] for name in people))
    lasts = list(dict.fromkeys(name.split()[-1] for name in people))
    return firsts, lasts


def _groups(rng: random.Random, names: NameGenerator, cities: list[City], count: int) -> list[NamesakeGroup]:
    out = []
    for _ in range(count):
        known, other = rng.sample(PROFESSIONS, 2)
        c1 = rng.choice(cities)
        c2 = rng.choice([c for c in cities if c.country != c1.country])
        out.append(NamesakeGroup(names.person(), known, c1.name, other, c2.name, names.person()))
    return out


def _recombine(groups: list[NamesakeGroup], names: RecombinedNames) -> list[NamesakeGroup]:
    """``groups`` with each N and alias replaced by a recombined name: all else as drawn."""
    out = []
    for group in groups:
        name = names.person()
        out.append(replace(group, name=name, alias=names.person(avoid=name)))
    return out


def presence_passages(group: NamesakeGroup) -> tuple[list[tuple[str, str]], tuple[str, str]]:
    """``([(title, text) of N's article, then of each PRESENCE_EXTRAS passage], (title, text) of B's article)``; only
    B's article names B's profession."""
    n, known = group.name, group.known_profession
    article = f"{n} was {_article(known)} {known} born in {group.known_city}."
    extras = [
        extra.format(name=n, article=_article(known), profession=known, city=group.known_city)
        for extra in PRESENCE_EXTRAS
    ]
    other = (
        f"{group.other_profession.capitalize()} from {group.other_city}",
        f"The {group.other_profession} {n} was born in {group.other_city}.",
    )
    return [(n, article)] + [(n, text) for text in extras], other


_QUESTION = re.compile(r"^Where was the (\w+) (.+) born\?$")


def namesake_query(question: str) -> str:
    """The query that names the person a namesake question means: its profession word and the name ("sailor Aldo
    Venn" for "Where was the sailor Aldo Venn born?"): the reformulation a namesake question needs."""
    found = _QUESTION.match(question.strip())
    if found is None or found.group(1) not in PROFESSIONS:
        raise ValueError(
            f"namesake_query: {question!r} is not a namesake question ('Where was the <profession> <name> born?', "
            f"profession one of {', '.join(PROFESSIONS)})"
        )
    return f"{found.group(1)} {found.group(2)}"


@dataclass(frozen=True)
class _Draws:
    """The default world and the namesake groups drawn on top of it; ``rng`` goes on to draw the rest."""

    base: WorldRows
    graph: FactGraph
    rng: random.Random
    groups: list[NamesakeGroup]


def _draw(seed: int, config: NamesakeConfig) -> _Draws:
    base = build_world(seed, WorldConfig())
    graph = build_facts(random.Random(seed), WorldConfig())  # the same draws build_world starts with
    rng = random.Random(f"{VARIANT}-{seed}")
    names = NameGenerator(rng)
    names.reserve(row["title"] for row in base.corpus)
    names.reserve(
        [c.name for c in graph.countries]
        + [c.name for c in graph.cities]
        + graph.rivers
        + [p.name for p in graph.people]
        + [c.name for c in graph.companies]
    )
    groups = _groups(rng, names, graph.cities, config.groups)
    # New names from a generator of their own: every other draw stays as ``rng`` makes it.
    recombined = RecombinedNames(random.Random(f"{VARIANT}-names-{seed}"), names, *name_words(base, graph))
    groups = _recombine(groups, recombined)
    return _Draws(base, graph, rng, groups)


def name_words(base: WorldRows, graph: FactGraph) -> tuple[list[str], list[str]]:
    """The words the groups' names recombine: ``trained_name_words`` of the default world's train and test questions
    (its training questions before the dev split, which name the same people)."""
    return trained_name_words(graph, base.train + base.test)


def build_namesake_world(seed: int = DEFAULT_SEED, config: NamesakeConfig | None = None) -> WorldRows:
    """The namesake world for ``seed`` (pure; writes nothing)."""
    config = config or NamesakeConfig()
    draws = _draw(seed, config)
    base, graph, rng, groups = draws.base, draws.graph, draws.rng, draws.groups

    # (title, text) of every passage: the default world's first (their old ids are their positions here).
    passages = [(row["title"], row["text"]) for row in base.corpus]
    questions: list[tuple[NamesakeGroup, dict[str, Any]]] = []
    countries = {c.name: c.country for c in graph.cities}
    for group in groups:
        about_known, other = presence_passages(group)
        known_id, other_id = len(passages), len(passages) + len(about_known)
        passages += [*about_known, other]
        if rng.random() < config.distractor_rate:
            avoid = {countries[group.known_city], countries[group.other_city]}
            elsewhere = rng.choice([c.name for c in graph.cities if c.country not in avoid])
            passages.append(
                (f"Travels of {group.name}", f"{group.name} travelled to {elsewhere} one winter to visit a cousin.")
            )
        retry = {
            "question": f"Where was the {group.other_profession} {group.name} born?",
            "golden_answers": [group.other_city],
            "gold_doc_ids": [known_id, other_id],
            "data_source": RETRY_SOURCE,
            "relation": RETRY_RELATION,
        }
        control = {
            "question": f"Where was the {group.known_profession} {group.name} born?",
            "golden_answers": [group.known_city],
            "gold_doc_ids": [known_id],
            "data_source": CONTROL_SOURCE,
            "relation": CONTROL_RELATION,
        }
        questions += [(group, retry), (group, control)]

    # Ids must not reveal the kind of passage: shuffled by a generator of their own, after ``rng`` made the draws of a
    # shuffle of the passages without the extras (a shuffle's draws depend on the length alone; the module docstring
    # says why), from which it goes on to draw the split and the question order.
    order = list(range(len(passages)))
    rng.shuffle(list(range(len(passages) - len(groups) * len(PRESENCE_EXTRAS))))
    random.Random(f"{VARIANT}-passages-{seed}").shuffle(order)
    new_id = {old: new for new, old in enumerate(order)}
    corpus = [corpus_row(new, *passages[old]) for new, old in enumerate(order)]

    def remap(row: dict[str, Any]) -> dict[str, Any]:
        return {**row, "gold_doc_ids": [str(new_id[int(i)]) for i in row["gold_doc_ids"]]}

    count = max(1, round(config.test_fraction * len(groups)))
    dev_groups = [g.name for g in rng.sample(groups, count)]
    rest = [q for g, q in questions if g.name not in dev_groups]
    new_dev = [q for g, q in questions if g.name in dev_groups]
    rng.shuffle(rest)  # the draws made before there was a dev split: the dev questions keep their order
    rng.shuffle(new_dev)
    free = [g.name for g in groups if g.name not in dev_groups]
    test_groups = random.Random(f"{VARIANT}-test-{seed}").sample(free, count)
    group_of = {id(q): g.name for g, q in questions}
    new_test = [q for q in rest if group_of[id(q)] in test_groups]
    new_train = [q for q in rest if group_of[id(q)] not in test_groups]
    train = [remap(r) for r in base.train] + [remap(_row("train", i, q)) for i, q in enumerate(new_train)]
    rng.shuffle(train)
    # The default world's dev and test questions first and in their order: the control is the same question list.
    dev = [remap(r) for r in base.dev] + [remap(_row("dev", i, q)) for i, q in enumerate(new_dev)]
    test = [remap(r) for r in base.test] + [remap(_row("test", i, q)) for i, q in enumerate(new_test)]
    held_out = HeldOut(base.held_out.dev + tuple(dev_groups), base.held_out.test + tuple(test_groups))
    return WorldRows(corpus, train, dev, test, held_out)


def _row(split: str, index: int, q: dict[str, Any]) -> dict[str, Any]:
    return {
        "id": f"namesake-{split}-{index:05d}",
        "question": q["question"],
        "golden_answers": q["golden_answers"],
        "gold_doc_ids": q["gold_doc_ids"],
        "hops": len(q["gold_doc_ids"]),
        "data_source": q["data_source"],
        "relation": q["relation"],
    }


def write_namesake_world(
    out_dir: Path | str, *, seed: int = DEFAULT_SEED, config: NamesakeConfig | None = None
) -> WorldPaths:
    """Builds the namesake world for ``seed`` and writes it (``world.write_rows``) to ``out_dir``."""
    config = config or NamesakeConfig()
    meta = {"version": WORLD_VERSION, "seed": seed, "config": asdict(WorldConfig()), **namesake_meta(config)}
    return write_rows(out_dir, build_namesake_world(seed, config), meta)
