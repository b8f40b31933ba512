"""The train / dev / test splits of every world: by entity, dev as held out before, test a fresh draw nobody read,
the corpus unchanged, no training question naming a held-out entity."""

from __future__ import annotations

import hashlib
import json
import os
import random
from collections import Counter

import pytest

from mr_search_embedded.world.facts import WorldConfig, build_facts
from mr_search_embedded.world.namesake import build_namesake_world
from mr_search_embedded.world.splits import HeldOut, draw_components, naming, naming_passages
from mr_search_embedded.world.threehop import build_threehop_world
from mr_search_embedded.world.world import WorldRows, build_world, write_world

# sha256 of json.dumps(corpus, sort_keys=True) and of the held-out questions' (question, golden answers, gold doc ids,
# data source, relation) as version 1 of the generator wrote them, before there was a dev split: the corpus (so the
# indexes) is unchanged, and the dev split is that held-out set, in its order.
BEFORE = {
    "default": (
        "e40289a71a1924d9c0d52ea529f48935e51a9fb21067835d1737db2646180230",
        "0488dc1bc34ee754ec6db1da8dd4b7085acde10fbc3c3bec22d77fa6a9c56913",
    ),
    "namesake": (
        "7c0880b6f13188c850b8d58308da0dfce4870faa959a2438699d25e634599047",
        "3b0bf94ccaf4771b8259693cfe4f136c69e0a73fbdbd827fbdef82c06dfd45b0",
    ),
}
# Questions per split and hops (seed 0).
SIZES = {
    "default": {"train": {1: 1954, 2: 1006}, "dev": {1: 220, 2: 130}, "test": {1: 220, 2: 130}},
    "namesake": {"train": {1: 2274, 2: 1326}, "dev": {1: 260, 2: 170}, "test": {1: 260, 2: 170}},
    "threehop": {
        "train": {1: 2268, 2: 1440, 3: 654},
        "dev": {1: 680, 2: 480, 3: 211},
        "test": {1: 680, 2: 480, 3: 217},
    },
}
BUILDERS = {"default": build_world, "namesake": build_namesake_world, "threehop": build_threehop_world}


@pytest.fixture(scope="module", params=list(BUILDERS))
def world(request) -> tuple[str, WorldRows]:
    return request.param, BUILDERS[request.param](0)


def _content(rows: list[dict]) -> str:
    keys = ("question", "golden_answers", "gold_doc_ids", "data_source", "relation")
    return hashlib.sha256(json.dumps([[r[k] for k in keys] for r in rows]).encode()).hexdigest()


def _named(rows: list[dict], corpus: list[dict], names) -> list[dict]:
    """The rows one of whose gold passages names one of ``names``."""
    pattern = naming(names)
    return [r for r in rows if any(pattern.search(corpus[int(d)]["contents"]) for d in r["gold_doc_ids"])]


def test_the_corpus_is_unchanged_and_dev_is_the_old_held_out_set(world) -> None:
    name, rows = world
    if name not in BEFORE:
        pytest.skip("the threehop world is new: no earlier held-out set")
    corpus_sha, dev_sha = BEFORE[name]
    assert hashlib.sha256(json.dumps(rows.corpus, sort_keys=True).encode()).hexdigest() == corpus_sha
    assert _content(rows.dev) == dev_sha


def test_sizes_per_split_and_hops(world) -> None:
    name, rows = world
    for split, expected in SIZES[name].items():
        assert dict(sorted(Counter(r["hops"] for r in getattr(rows, split)).items())) == expected, (name, split)


def test_splits_are_disjoint_by_entity(world) -> None:
    """Each held-out question is about an entity of its split; no training question's gold passages name a dev or
    test entity; no dev question's names a test entity, nor a test question's a dev one."""
    _, rows = world
    held = rows.held_out
    assert held.dev and held.test and not set(held.dev) & set(held.test)
    for split, names in (("dev", held.dev), ("test", held.test)):
        pattern = naming(names)
        assert all(pattern.search(r["question"]) for r in getattr(rows, split)), f"a {split} question is not theirs"
    assert not _named(rows.train, rows.corpus, held.names), "a training question names a held-out entity"
    assert not _named(rows.dev, rows.corpus, held.test), "a dev question names a test entity"
    assert not _named(rows.test, rows.corpus, held.dev), "a test question names a dev entity"
    questions = {split: {r["question"] for r in getattr(rows, split)} for split in ("train", "dev", "test")}
    assert not questions["train"] & questions["dev"] and not questions["train"] & questions["test"]
    assert not questions["dev"] & questions["test"]


def test_test_is_a_fresh_draw_whose_companies_bring_their_founders() -> None:
    rows = build_world(0)
    graph = build_facts(random.Random(0), WorldConfig())
    founders = {c.name: c.founder for c in graph.companies}
    test = set(rows.held_out.test)
    companies = [n for n in rows.held_out.test if n in founders]
    assert len(companies) == 20 and len(test) == 110
    assert all(founders[c] in test for c in companies), "a test company's founder is a test person"
    # Its own generator: another seed of it draws other entities, the dev draw stays.
    other = draw_components(random.Random("test-1"), graph, 0.1, avoid=rows.held_out.dev)
    assert set(other) != test and not set(other) & set(rows.held_out.dev)


def test_a_rebuild_leaves_an_unchanged_corpus_file_alone(tmp_path) -> None:
    """The retrieval indexes are keyed by the corpus file's size and time: a rebuild that writes the same bytes must
    not touch it."""
    paths = write_world(tmp_path, seed=0)
    os.utime(paths.corpus, ns=(1_000_000_000, 1_000_000_000))
    write_world(tmp_path, seed=0)
    assert paths.corpus.stat().st_mtime_ns == 1_000_000_000
    assert HeldOut.read(paths.held_out) == build_world(0).held_out


def test_the_warm_start_hides_every_passage_that_names_a_held_out_entity() -> None:
    rows = build_world(0)
    hidden = set(naming_passages(rows.corpus, rows.held_out.names))
    name = rows.held_out.test[0]
    about = [r["id"] for r in rows.corpus if name in r["contents"]]
    assert about and set(about) <= hidden
    assert len(hidden) < len(rows.corpus) / 2


def test_missing_or_too_large_splits_say_how_to_fix_them(tmp_path) -> None:
    with pytest.raises(FileNotFoundError, match="predates its dev and test splits"):
        HeldOut.read(tmp_path / "held_out.json")
    with pytest.raises(ValueError, match="in both dev and test"):
        HeldOut(("Aldo Venn",), ("Aldo Venn",))
    graph = build_facts(random.Random(0), WorldConfig(n_people=200, n_companies=40, n_cities=40))
    with pytest.raises(ValueError, match="lower the held-out share"):
        draw_components(random.Random(0), graph, 0.45, avoid=[c.name for c in graph.companies[:30]])
