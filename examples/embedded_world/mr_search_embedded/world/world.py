"""The embedded default world: a deterministic synthetic mini-wiki with single-hop and two-hop questions.

DESIGN

The world is small enough for a tiny policy trained on CPU, and built so that a first search often
misses and a second, better one can succeed -- the situation MR-Search's reflection is meant for.

* Entities. ~12 countries, ~150 cities (each in one country, some on one of ~40 rivers), ~900 people
  (born in a city, with one of 12 professions) and ~200 companies (founded by a person,
  headquartered in a city). All names are built from a small syllable inventory (``names.py``), so
  they are pronounceable and a small BPE vocabulary covers them: "Drelo Vas", "Kumholt", "Tenaria".
* Passages (2,285 for seed 0, 1-2 sentences each, wiki-18 layout ``"Title"\\ntext``): one article per
  entity with its facts, worded with a few templates.
* Near-duplicate names. ~40% of people and companies and ~20% of cities have a one-letter twin
  (Aldo Venn / Aldo Wenn / Alda Venn) whose facts differ (born in a city of another country, another
  profession). A search for one usually also returns the twin's passage, whose answer is wrong.
* Distractors. ~80% of entities also appear in a passage with unrelated facts that name another city
  or country ("At the Kumholt festival, Aldo Venn gave a short speech."). The distractor's place is
  always in another country than the true one, so copying it gives a wrong answer for both hops.
* Questions. Single-hop: birthplace, profession, a city's country and river, a company's founder
  and headquarters. Two-hop: a person's birth country (person passage -> city passage), a company
  founder's birthplace (company -> person), a company's headquarters country (company -> city).
  Every question has exactly one answer and lists its gold passages in hop order; the answer string
  appears in the last one. Two-hop questions need two different passages, so one search with the
  question as query rarely suffices.
* What a search finds (seed 0, dev questions, the question text as query, top 3, the default
  dense MiniLM service; ``python -m mr_search_embedded.world.stats --url .../retrieve``): the
  first-hop gold passage ranks first for 97% of single-hop and 95% of two-hop questions and is in the
  top 3 for 100% (BM25: 100% too), but both passages of a two-hop question are in the top 3 for 0%:
  a second search naming the bridge entity (the city, the founder) is needed. For 76% of single-hop
  questions the top 3 also holds a twin's or a distractor's passage naming another candidate answer.
* Splits (``splits.py``), by entity, all over the one corpus (every entity keeps its passages):
  ``dev``: every question about 10% of the people and 10% of the companies, the ones held out before there was a
  dev split (seed 0: 350 questions, 37% two-hop). Every warm start, recipe and probe so far was chosen on them; they
  stay the split to choose on. ``test``: every question about a fresh draw from the other entities (its own
  generator, ``draw_components``: 20 companies with their founders and 70 more people; 350 questions, 37%
  two-hop), which no probe or choice has read: evaluate on it once, when everything is chosen. ``train``: the
  questions about the rest whose gold passages name no dev or test entity (2,960; the 68 about companies whose
  founder is held out are dropped).
* Determinism. One ``random.Random(seed)`` drives everything; entities live in lists (never sets or
  hash-ordered containers); files are written with fixed key order and ``\\n`` line endings, so two
  builds with the same seed are byte-identical on any machine. ``meta.json`` records the sha256 of
  each file; a file whose bytes a rebuild does not change is left as it is (the retrieval indexes, keyed by the
  corpus file's size and time, stay valid).
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import logging
import os
import random
from collections import Counter
from collections.abc import Iterable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Final

from mr_search_embedded.world.facts import FactGraph, WorldConfig, build_facts
from mr_search_embedded.world.questions import Question, make_questions
from mr_search_embedded.world.splits import HeldOut, Partition, draw_components, draw_independent, partition
from mr_search_embedded.world.variant import DEFAULT_VARIANT, WORLD_ENV, variant_cache_dir, world_variant

logger = logging.getLogger(__name__)

# Bump when the generator changes: cached worlds of another version are rebuilt.
# 2: train / dev / test (dev: the questions held out in version 1; test: a fresh draw; held_out.json).
WORLD_VERSION: Final = 2
DEFAULT_SEED: Final = 0
CORPUS_FILE: Final = "corpus.jsonl"
TRAIN_FILE: Final = "train.jsonl"
DEV_FILE: Final = "dev.jsonl"
TEST_FILE: Final = "test.jsonl"
HELD_OUT_FILE: Final = "held_out.json"
META_FILE: Final = "meta.json"


def corpus_row(doc_id: int, title: str, text: str) -> dict[str, Any]:
    """One corpus line in the Search-R1/FlashRAG layout the service and the warm start read: ``contents`` is the
    quoted title, a newline, then the text."""
    return {"id": str(doc_id), "contents": f'"{title}"\n{text}', "title": title, "text": text}


@dataclass(frozen=True)
class WorldPaths:
    """Where a built world lies: the corpus and the three question splits (JSON lines), the held-out names
    (``splits.HeldOut``) and its metadata."""

    root: Path
    corpus: Path
    train: Path
    dev: Path
    test: Path
    held_out: Path
    meta: Path

    @classmethod
    def under(cls, root: Path) -> WorldPaths:
        return cls(
            root,
            root / CORPUS_FILE,
            root / TRAIN_FILE,
            root / DEV_FILE,
            root / TEST_FILE,
            root / HELD_OUT_FILE,
            root / META_FILE,
        )

    def split(self, name: str) -> Path:
        """The question file of split ``name`` (train, dev or test)."""
        if name not in ("train", "dev", "test"):
            raise ValueError(f"unknown split {name!r}; use train, dev or test")
        return getattr(self, name)


@dataclass(frozen=True)
class WorldRows:
    """A world's rows: its passages, its questions per split (dicts as written) and the held-out names."""

    corpus: list[dict[str, Any]]
    train: list[dict[str, Any]]
    dev: list[dict[str, Any]]
    test: list[dict[str, Any]]
    held_out: HeldOut


@dataclass(frozen=True)
class Passage:
    title: str
    text: str
    # (kind, subject): ("fact", name) for an entity's own article, ("distractor", name) otherwise.
    kind: str
    subject: str


def _person_passage(rng: random.Random, name: str, profession: str, city: str) -> str:
    first = name.split()[0]
    article = "an" if profession[0] in "aeiou" else "a"
    templates = (
        f"{name} was {article} {profession} born in {city}.",
        f"{name} is {article} {profession}. {first} was born in the city of {city}.",
        f"Born in {city}, {name} worked as {article} {profession}.",
    )
    return rng.choice(templates)


def _passages(rng: random.Random, graph: FactGraph, config: WorldConfig) -> list[Passage]:
    out: list[Passage] = []
    adjectives = ("clear", "cold", "muddy", "green", "slow", "wide")
    for country in graph.countries:
        out.append(
            Passage(
                country.name, f"{country.name} is a country. Its capital is {country.capital}.", "fact", country.name
            )
        )
    for river in graph.rivers:
        out.append(Passage(river, f"The {river} is a long river with {rng.choice(adjectives)} water.", "fact", river))
    for city in graph.cities:
        text = f"{city.name} is a city in {city.country}."
        if city.river is not None:
            text += f" The {city.river} river flows through {city.name}."
        out.append(Passage(city.name, text, "fact", city.name))
    for person in graph.people:
        out.append(
            Passage(
                person.name,
                _person_passage(rng, person.name, person.profession, person.birth_city),
                "fact",
                person.name,
            )
        )
    for company in graph.companies:
        text = rng.choice(
            (
                f"{company.name} is a company founded by {company.founder}. Its headquarters are in {company.hq_city}.",
                f"{company.founder} founded the company {company.name}, which is based in {company.hq_city}.",
            )
        )
        out.append(Passage(company.name, text, "fact", company.name))

    countries = [c.name for c in graph.countries]
    for person in graph.people:
        if rng.random() >= config.distractor_rate:
            continue
        other = _elsewhere(rng, graph, graph.city(person.birth_city).country)
        title, text = rng.choice(
            (
                (f"{other} festival", f"At the {other} festival, {person.name} gave a short speech about the harvest."),
                (f"Letters from {other}", f"{person.name} once wrote letters from {other} to an old friend."),
                (f"Travels of {person.name}", f"{person.name} travelled to {other} one winter to visit a cousin."),
            )
        )
        out.append(Passage(title, text, "distractor", person.name))
    for city in graph.cities:
        if rng.random() >= config.distractor_rate:
            continue
        other = rng.choice([c for c in countries if c != city.country])
        out.append(
            Passage(
                f"Trade in {city.name}",
                f"Merchants from {other} sell wool and salt in {city.name}.",
                "distractor",
                city.name,
            )
        )
    for company in graph.companies:
        if rng.random() >= config.distractor_rate:
            continue
        other = _elsewhere(rng, graph, graph.city(company.hq_city).country)
        out.append(
            Passage(
                f"{company.name} shop",
                f"{company.name} opened a small shop in {other} that closed after a year.",
                "distractor",
                company.name,
            )
        )
    return out


def _elsewhere(rng: random.Random, graph: FactGraph, country: str) -> str:
    return rng.choice([c.name for c in graph.cities if c.country != country])


def _jsonl(rows: Iterable[dict[str, Any]]) -> bytes:
    return b"".join(json.dumps(row, ensure_ascii=False).encode("utf-8") + b"\n" for row in rows)


def _write_atomic(path: Path, data: bytes) -> None:
    """Writes ``data`` to ``path`` unless it already holds exactly that (its time stays: indexes keyed by it too)."""
    try:
        if path.read_bytes() == data:
            return
    except OSError:
        pass
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_bytes(data)
    os.replace(tmp, path)


def corpus_and_ids(rng: random.Random, graph: FactGraph, config: WorldConfig) -> tuple[list[dict[str, Any]], dict]:
    """``(corpus rows, {entity name: its article's doc id})``: the passages drawn from ``rng``, shuffled."""
    passages = _passages(rng, graph, config)
    rng.shuffle(passages)  # ids must not reveal the kind of passage
    corpus = [corpus_row(i, p.title, p.text) for i, p in enumerate(passages)]
    fact_ids = {p.subject: str(i) for i, p in enumerate(passages) if p.kind == "fact"}
    return corpus, fact_ids


def build_world(seed: int = DEFAULT_SEED, config: WorldConfig | None = None) -> WorldRows:
    """The default world for ``seed`` (pure; writes nothing). Dev: the held-out questions of version 1, in their
    order; test: a fresh draw (``splits.draw_components``, generator ``test-<seed>``) from the rest."""
    config = config or WorldConfig()
    rng = random.Random(seed)
    graph = build_facts(rng, config)
    corpus, fact_ids = corpus_and_ids(rng, graph, config)
    questions = make_questions(graph, fact_ids)
    dev_names = draw_independent(rng, graph, config.test_fraction)
    held = set(dev_names)
    rest = [q for q in questions if q.subject not in held]
    dev = [q for q in questions if q.subject in held]
    rng.shuffle(rest)  # the draws version 1 made: the dev questions keep their order
    rng.shuffle(dev)
    test_names = draw_components(random.Random(f"test-{seed}"), graph, config.test_fraction, avoid=dev_names)
    held_out = HeldOut(tuple(dev_names), tuple(test_names))
    return world_rows(corpus, partition(rest + dev, held_out), held_out)


def world_rows(
    corpus: list[dict[str, Any]], split: Partition, held_out: HeldOut, prefix: str = "embedded"
) -> WorldRows:
    """The rows of a world whose questions ``split`` holds (ids ``<prefix>-<split>-<index>``)."""
    return WorldRows(
        corpus,
        [question_row(prefix, "train", i, q) for i, q in enumerate(split.train)],
        [question_row(prefix, "dev", i, q) for i, q in enumerate(split.dev)],
        [question_row(prefix, "test", i, q) for i, q in enumerate(split.test)],
        held_out,
    )


def question_row(prefix: str, split: str, index: int, q: Question) -> dict[str, Any]:
    """One question line: ``data_source`` ``embedded_<hops>hop``, ``hops`` the number of gold passages."""
    return {
        "id": f"{prefix}-{split}-{index:05d}",
        "question": q.question,
        "golden_answers": [q.answer],
        "gold_doc_ids": list(q.gold_doc_ids),
        "hops": len(q.gold_doc_ids),
        "data_source": f"embedded_{len(q.gold_doc_ids)}hop",
        "relation": q.relation,
    }


def write_world(out_dir: Path | str, *, seed: int = DEFAULT_SEED, config: WorldConfig | None = None) -> WorldPaths:
    """Builds the default world for ``seed`` and writes it (``write_rows``) to ``out_dir``."""
    config = config or WorldConfig()
    meta = {"version": WORLD_VERSION, "seed": seed, "config": asdict(config)}
    return write_rows(out_dir, build_world(seed, config), meta)


def write_rows(out_dir: Path | str, rows: WorldRows, meta: dict[str, Any]) -> WorldPaths:
    """Writes a world's rows (JSON lines), its ``held_out.json`` and ``meta.json`` (``meta`` plus counts, questions
    per split and hops, and the files' sha256)."""
    paths = WorldPaths.under(Path(out_dir))
    paths.root.mkdir(parents=True, exist_ok=True)
    files = {
        paths.corpus: _jsonl(rows.corpus),
        paths.train: _jsonl(rows.train),
        paths.dev: _jsonl(rows.dev),
        paths.test: _jsonl(rows.test),
        paths.held_out: rows.held_out.to_json().encode("utf-8"),
    }
    digests = {}
    for path, data in files.items():
        digests[path.name] = hashlib.sha256(data).hexdigest()
        _write_atomic(path, data)
    splits = {"train": rows.train, "dev": rows.dev, "test": rows.test}
    meta = {
        **meta,
        "counts": {"passages": len(rows.corpus), **{name: len(split) for name, split in splits.items()}},
        "hops": {name: dict(sorted(Counter(str(r["hops"]) for r in split).items())) for name, split in splits.items()},
        "sha256": digests,
    }
    _write_atomic(paths.meta, (json.dumps(meta, indent=2, sort_keys=True) + "\n").encode("utf-8"))
    logger.info("embedded world %s written to %s: %s", meta.get("variant", "default"), paths.root, meta["counts"])
    return paths


def default_cache_dir() -> Path:
    """The cache root of the world ``$MR_SEARCH_WORLD`` names: ``$MR_SEARCH_CACHE`` (else ``~/.cache/mr_search``) for
    the default world, ``<that>/worlds/<its folder>`` for an opt-in variant (``variant.py``)."""
    return variant_cache_dir()


def _expected_meta(variant: str) -> dict[str, Any]:
    expected: dict[str, Any] = {"version": WORLD_VERSION, "seed": DEFAULT_SEED, "config": asdict(WorldConfig())}
    if variant == "namesake":
        from mr_search_embedded.world.namesake import namesake_meta

        expected.update(namesake_meta())
    elif variant == "threehop":
        from mr_search_embedded.world.threehop import threehop_meta

        expected.update(threehop_meta())
    return expected


def _is_current(paths: WorldPaths, variant: str = DEFAULT_VARIANT) -> bool:
    try:
        meta = json.loads(paths.meta.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    if meta.get("variant", DEFAULT_VARIANT) != variant:
        raise ValueError(
            f"{paths.root} holds the embedded world {meta.get('variant', DEFAULT_VARIANT)!r}, not {variant!r}: "
            f"refusing to replace it; use another cache folder (unset cache_dir to get <cache>/worlds/{variant}) "
            f"or set {WORLD_ENV} to match"
        )
    expected = _expected_meta(variant)
    if any(meta.get(k) != v for k, v in expected.items()):
        return False
    return all(p.is_file() for p in (paths.corpus, paths.train, paths.dev, paths.test, paths.held_out))


def _write_variant(root: Path, variant: str) -> None:
    if variant == "namesake":
        from mr_search_embedded.world.namesake import write_namesake_world

        write_namesake_world(root, seed=DEFAULT_SEED)
    elif variant == "threehop":
        from mr_search_embedded.world.threehop import write_threehop_world

        write_threehop_world(root, seed=DEFAULT_SEED)
    else:
        write_world(root, seed=DEFAULT_SEED)


def ensure_world(cache_dir: Path | None = None) -> WorldPaths:
    """Returns the world ``$MR_SEARCH_WORLD`` names (default: the default world) under ``<cache_dir>/world``, building
    it once (default cache: ``default_cache_dir()``, which keeps each variant's cache apart).

    Safe to call from several processes at once: builders take a file lock, readers see complete files. A folder
    that holds another variant's world is never replaced (``ValueError``).
    """
    variant = world_variant()
    root = Path(cache_dir or default_cache_dir()) / "world"
    paths = WorldPaths.under(root)
    if _is_current(paths, variant):
        return paths
    root.parent.mkdir(parents=True, exist_ok=True)
    with open(root.parent / ".world.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not _is_current(paths, variant):
            _write_variant(root, variant)
    return paths
