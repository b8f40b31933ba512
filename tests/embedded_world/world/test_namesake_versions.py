"""The namesake world's versions: version 2 stays byte for byte what every earlier run used, and version 3 (its
names recombined from words the policy practises copying) is its own world in its own cache root."""

from __future__ import annotations

import hashlib
import json
import random
import re
from pathlib import Path

import pytest

from mr_search_embedded.world.facts import WorldConfig, build_facts
from mr_search_embedded.world.namesake import (
    RETRY_RELATION,
    build_namesake_world,
    namesake_meta,
    namesake_person_names,
    trained_name_words,
)
from mr_search_embedded.world.variant import namesake_version, variant_cache_dir
from mr_search_embedded.world.world import build_world, ensure_world

# sha256 of json.dumps(build_namesake_world(0, version=v), sort_keys=True): a change to either generator shows here
# (v2's is the world of the first comparison and of recipes 2-4, /work/cache19 on the 2-core box).
WORLD_SHA256 = {
    2: "1dd3d3272fcfe0b5244cec9464707837e7c31bb7a0c3298a9464c85f5146721b",
    3: "ea109ef478657e1b11c3ca01314bac0e57d8b73328852793eae76e9928d18890",
}


def _sha(world) -> str:
    return hashlib.sha256(json.dumps(world, sort_keys=True).encode()).hexdigest()


@pytest.fixture(scope="module")
def v2_v3():
    return build_namesake_world(0, version=2), build_namesake_world(0, version=3)


def test_each_version_is_pinned_and_2_is_the_default(v2_v3, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("MR_SEARCH_NAMESAKE_VERSION", raising=False)
    assert namesake_version() == 2
    assert _sha(v2_v3[0]) == WORLD_SHA256[2]
    assert _sha(v2_v3[1]) == WORLD_SHA256[3]
    assert build_namesake_world(0) == v2_v3[0], "unset, the version is 2"
    monkeypatch.setenv("MR_SEARCH_NAMESAKE_VERSION", "3")
    assert namesake_version() == 3 and build_namesake_world(0) == v2_v3[1]
    assert namesake_meta()["namesake_version"] == 3
    monkeypatch.setenv("MR_SEARCH_NAMESAKE_VERSION", "1")
    with pytest.raises(ValueError, match=r"MR_SEARCH_NAMESAKE_VERSION='1'.*2, 3, 4"):
        namesake_version()
    with pytest.raises(ValueError, match="version 5"):
        build_namesake_world(0, version=5)


def _groups(world) -> list[tuple[str, str]]:
    corpus, train, test = world
    return [
        (corpus[int(q["gold_doc_ids"][0])]["title"], corpus[int(q["gold_doc_ids"][1])]["title"])
        for q in train + test
        if q["relation"] == RETRY_RELATION
    ]


def test_v3_names_are_recombined_from_words_of_training_questions(v2_v3) -> None:
    _, base_train, _ = build_world(0)
    asked = set(re.findall(r"\w+", " ".join(q["question"] for q in base_train)))
    v2, v3 = _groups(v2_v3[0]), _groups(v2_v3[1])
    words = [w for pair in v3 for name in pair for w in name.split()]
    assert all(w in asked for w in words), "every v3 name word occurs in a default-world training question"
    v2_words = [w for pair in v2 for name in pair for w in name.split()]
    assert sum(w in asked for w in v2_words) < 0.5 * len(v2_words), "v2's fresh names mostly do not"
    for name, alias in v3:
        assert len(name.split()) == len(alias.split()) == 2
        assert not set(name.split()) & set(alias.split()), "N and its alias share no word"
    people = namesake_person_names(0, version=3)
    assert len(people) == len(set(people)), "no group's name or alias is anyone else's name"
    # So whole-word name tokens (namesake recipe 4) on v3 add no word the default world's people lack.
    assert {w for n in people for w in n.split()} == {w for n in people[:900] for w in n.split()}
    firsts, lasts = trained_name_words(build_facts(random.Random(0), WorldConfig()), base_train)
    assert {n.split()[0] for pair in v3 for n in pair} <= set(firsts)
    assert {n.split()[1] for pair in v3 for n in pair} <= set(lasts)


def test_v3_keeps_everything_but_the_names(v2_v3) -> None:
    (c2, tr2, te2), (c3, tr3, te3) = v2_v3
    assert len(c2) == len(c3) and len(tr2) == len(tr3) and len(te2) == len(te3)
    names2 = dict.fromkeys(n for pair in _groups(v2_v3[0]) for n in pair)
    names3 = dict.fromkeys(n for pair in _groups(v2_v3[1]) for n in pair)

    def shape(rows, names) -> list[str]:  # the namesake questions with the group's name blanked, and the others
        pattern = re.compile(r"\b(" + "|".join(re.escape(n) for n in names) + r")\b")
        return sorted(f"{pattern.sub('N', q['question'])}|{q['data_source']}|{q['golden_answers'][0]}" for q in rows)

    assert shape(te2, names2) == shape(te3, names3), "the same held-out questions, cities and professions"
    assert shape(tr2, names2) == shape(tr3, names3)
    assert [q["question"] for q in te2[:350]] == [q["question"] for q in te3[:350]], "the default world's first"


def test_v3_has_its_own_cache_root_and_never_replaces_v2(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("MR_SEARCH_CACHE", str(tmp_path))
    monkeypatch.setenv("MR_SEARCH_WORLD", "namesake")
    monkeypatch.delenv("MR_SEARCH_NAMESAKE_VERSION", raising=False)
    assert variant_cache_dir() == tmp_path / "worlds" / "namesake", "v2 keeps the root every earlier build used"
    v2 = ensure_world()
    before = v2.corpus.read_bytes()
    monkeypatch.setenv("MR_SEARCH_NAMESAKE_VERSION", "3")
    assert variant_cache_dir() == tmp_path / "worlds" / "namesake-v3"
    v3 = ensure_world()
    assert v3.root == tmp_path / "worlds" / "namesake-v3" / "world"
    assert json.loads(v3.meta.read_text())["namesake_version"] == 3
    assert v3.corpus.read_bytes() != before and v2.corpus.read_bytes() == before
    with pytest.raises(ValueError, match="version 2, not 3: refusing to replace"):
        ensure_world(tmp_path / "worlds" / "namesake")  # an explicit folder that holds v2
    monkeypatch.delenv("MR_SEARCH_NAMESAKE_VERSION")
    assert ensure_world() == v2 and json.loads(v2.meta.read_text())["namesake_version"] == 2
