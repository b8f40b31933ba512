"""The embedded world: deterministic, consistent gold passages, real two-hop questions, three splits
(``test_splits.py`` checks how they are drawn)."""

from __future__ import annotations

import json
import os
import string
import subprocess
import sys
from pathlib import Path

import pytest

from mr_search_embedded.world.facts import WorldConfig
from mr_search_embedded.world.world import WORLD_VERSION, WorldPaths, ensure_world, write_world


def _rows(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> WorldPaths:
    return write_world(tmp_path_factory.mktemp("world"), seed=0)


@pytest.fixture(scope="module")
def corpus(world: WorldPaths) -> dict[str, dict]:
    return {row["id"]: row for row in _rows(world.corpus)}


def test_two_builds_are_byte_identical_even_across_hash_seeds(world: WorldPaths, tmp_path: Path) -> None:
    # A second build in a fresh interpreter with another PYTHONHASHSEED: set/dict-hash ordering must not leak.
    code = "import sys; from mr_search_embedded.world.world import write_world; write_world(sys.argv[1], seed=0)"
    env = {**os.environ, "PYTHONHASHSEED": "12345"}
    subprocess.run([sys.executable, "-c", code, str(tmp_path)], check=True, env=env)
    other = WorldPaths.under(tmp_path)
    for name in ("corpus", "train", "dev", "test", "held_out"):
        mine, theirs = getattr(world, name), getattr(other, name)
        assert mine.read_bytes() == theirs.read_bytes(), f"{mine.name} differs between two builds with seed 0"


def test_another_seed_gives_another_world(world: WorldPaths, tmp_path: Path) -> None:
    other = write_world(tmp_path, seed=1, config=WorldConfig(n_people=200, n_companies=40, n_cities=40))
    assert other.corpus.read_bytes() != world.corpus.read_bytes()


def test_sizes_fit_a_tiny_model(world: WorldPaths, corpus: dict[str, dict]) -> None:
    train, dev, test = _rows(world.train), _rows(world.dev), _rows(world.test)
    assert 2000 <= len(corpus) <= 4000
    assert len(train) >= 2000
    assert 200 <= len(dev) <= 600 and 200 <= len(test) <= 600
    assert all(len(row["text"].split()) <= 40 for row in corpus.values()), "passages must stay short"


def test_corpus_rows_follow_the_wiki18_layout(corpus: dict[str, dict]) -> None:
    assert list(corpus) == [str(i) for i in range(len(corpus))]
    for row in corpus.values():
        assert row["contents"] == f'"{row["title"]}"\n{row["text"]}'


def test_every_gold_doc_exists_and_holds_the_answer(world: WorldPaths, corpus: dict[str, dict]) -> None:
    for row in _rows(world.train) + _rows(world.dev) + _rows(world.test):
        assert row["gold_doc_ids"], row
        for doc_id in row["gold_doc_ids"]:
            assert doc_id in corpus, f"{row['id']}: gold doc {doc_id} is not in the corpus"
        last = corpus[row["gold_doc_ids"][-1]]["contents"]
        assert any(answer in last for answer in row["golden_answers"]), f"{row['id']}: answer not in {last!r}"


def test_two_hop_questions_need_two_different_passages(world: WorldPaths, corpus: dict[str, dict]) -> None:
    two_hop = [row for row in _rows(world.train) + _rows(world.dev) + _rows(world.test) if row["hops"] == 2]
    assert len(two_hop) >= 500
    for row in two_hop:
        first, second = row["gold_doc_ids"]
        assert first != second
        assert row["data_source"] == "embedded_2hop"
        # The first passage does not give the answer away; it names the bridge entity that titles the second.
        assert not any(answer in corpus[first]["contents"] for answer in row["golden_answers"]), row
        assert corpus[second]["title"] in corpus[first]["contents"], row


def test_questions_have_the_shared_schema(world: WorldPaths) -> None:
    for row in _rows(world.train) + _rows(world.dev) + _rows(world.test):
        assert {"id", "question", "golden_answers", "gold_doc_ids", "hops", "data_source"} <= set(row)
        assert row["data_source"] == f"embedded_{row['hops']}hop"
        assert row["question"].endswith("?")


def test_the_three_splits_are_disjoint(world: WorldPaths) -> None:
    splits = {name: _rows(world.split(name)) for name in ("train", "dev", "test")}
    for a, b in (("train", "dev"), ("train", "test"), ("dev", "test")):
        assert not {r["question"] for r in splits[a]} & {r["question"] for r in splits[b]}, (a, b)
        assert not {r["id"] for r in splits[a]} & {r["id"] for r in splits[b]}, (a, b)
    for name in ("dev", "test"):
        assert {r["hops"] for r in splits[name]} == {1, 2}, f"the {name} split must hold both kinds of questions"
        assert all(r["id"].startswith(f"embedded-{name}-") for r in splits[name])


def test_names_have_near_duplicates_and_distractors(corpus: dict[str, dict]) -> None:
    titles = [row["title"] for row in corpus.values()]
    people = [t for t in titles if len(t.split()) == 2 and t[0].isupper() and " " in t and t.split()[1][0].isupper()]
    keys = set(people)
    twins = 0
    for name in people:
        for i in range(len(name)):
            if any(name[:i] + ch + name[i + 1 :] in keys for ch in string.ascii_letters if ch != name[i]):
                twins += 1
                break
    assert twins >= 0.3 * len(people), f"only {twins} of {len(people)} people have a one-letter twin"
    distractors = [t for t in titles if t.startswith(("Letters from", "Travels of", "Trade in")) or " festival" in t]
    assert len(distractors) >= 500


def test_each_question_has_one_answer(world: WorldPaths) -> None:
    seen: dict[str, list[str]] = {}
    for row in _rows(world.train) + _rows(world.dev) + _rows(world.test):
        assert seen.setdefault(row["question"], row["golden_answers"]) == row["golden_answers"], row["question"]


def test_ensure_world_builds_once_then_reuses(tmp_path: Path) -> None:
    paths = ensure_world(tmp_path)
    assert paths.root == tmp_path / "world"
    meta = json.loads(paths.meta.read_text())
    assert meta["version"] == WORLD_VERSION and meta["seed"] == 0
    stamp = paths.corpus.stat().st_mtime_ns
    again = ensure_world(tmp_path)
    assert again == paths and paths.corpus.stat().st_mtime_ns == stamp


def test_ensure_world_rebuilds_a_stale_cache(tmp_path: Path) -> None:
    paths = ensure_world(tmp_path)
    meta = json.loads(paths.meta.read_text())
    meta["version"] = -1
    paths.meta.write_text(json.dumps(meta))
    paths.corpus.write_text("stale\n")
    ensure_world(tmp_path)
    assert paths.corpus.read_text().startswith('{"id": "0"')


def test_ensure_world_honours_the_cache_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MR_SEARCH_CACHE", str(tmp_path))
    assert ensure_world().root == tmp_path / "world"


def test_config_rejects_bad_values() -> None:
    with pytest.raises(ValueError, match="n_people"):
        WorldConfig(n_people=1)
    with pytest.raises(ValueError, match="test_fraction"):
        WorldConfig(test_fraction=0.9)
