"""The warm start reads the train split only: no transcript, decision window or renamed entity shows a dev or test
entity, and the threehop world's shows no three-hop question."""

from __future__ import annotations

import json
from dataclasses import asdict, replace
from pathlib import Path

import pytest

from mr_search_embedded.warmstart.decision import presence_windows, world_name_words
from mr_search_embedded.warmstart.inputs import warmstart_inputs
from mr_search_embedded.warmstart.train import transcript_mix, warmstart_config, warmstart_key
from mr_search_embedded.warmstart.transcripts import ScriptedTranscript
from mr_search_embedded.world.facts import WorldConfig
from mr_search_embedded.world.namesake import build_namesake_world
from mr_search_embedded.world.splits import naming
from mr_search_embedded.world.threehop import THREE_HOP_RELATIONS, build_threehop_world
from mr_search_embedded.world.world import WorldPaths, build_world, write_rows

BUILDERS = {"default": build_world, "namesake": build_namesake_world, "threehop": build_threehop_world}


@pytest.fixture(scope="module", params=list(BUILDERS))
def written(request, tmp_path_factory) -> tuple[str, WorldPaths]:
    name = request.param
    return name, write_rows(tmp_path_factory.mktemp(name), BUILDERS[name](0), {"variant": name})


def _texts(transcript: ScriptedTranscript) -> list[str]:
    return [transcript.question, *transcript.golden_answers, *(t.text for a in transcript.attempts for t in a)]


def test_no_transcript_shows_a_held_out_entity(written) -> None:
    name, world = written
    index, questions = warmstart_inputs(world)
    train = [json.loads(line) for line in world.train.read_text().splitlines()]
    assert questions == train, "the warm start's questions are the train split's"
    held = json.loads(world.held_out.read_text())
    pattern = naming(held["dev"] + held["test"])
    assert len(index.hidden) > 100, "passages that name held-out entities are hidden from the transcripts' search"
    config = warmstart_config(False, name)
    transcripts = transcript_mix(questions, index, replace(config, single_attempt_share=0.5), count=600)
    shown = [text for t in transcripts for text in _texts(t) if pattern.search(text)]
    assert not shown, f"a transcript names a held-out entity: {shown[0]!r}"
    if config.transcripts.p_rename:
        titles = {str(doc["title"]) for doc in index.docs}
        asked = {t.question for t in transcripts} - {q["question"] for q in questions}
        assert asked, "some transcripts are renamed"
        assert not any(title in question for question in asked for title in titles if " " in title), (
            "a renamed question names no entity of the corpus (no held-out one either)"
        )
    if config.decision_windows_per_step:
        name_words = world_name_words({"seed": 0, "config": asdict(WorldConfig())})
        windows = presence_windows(questions, index, 200, name_words, seed=2)
        assert not [text for w in windows for text in _texts(w) if pattern.search(text)]


def test_the_threehop_warm_start_holds_no_three_hop_question(written) -> None:
    name, world = written
    if name != "threehop":
        pytest.skip("the threehop world's warm start only")
    index, questions = warmstart_inputs(world)
    three = {q["question"] for q in questions if q["relation"] in THREE_HOP_RELATIONS}
    assert len(three) > 500, "RL trains on the train split's three-hop questions"
    transcripts = transcript_mix(questions, index, warmstart_config(False, "threehop"), count=2000)
    assert not {t.question for t in transcripts} & three
    assert not [
        t for t in transcripts if "founder of" in t.question and "born" in t.question and "country" in t.question
    ]
    renamed = {t.question for t in transcripts} - {q["question"] for q in questions}
    titles = {str(doc["title"]) for doc in index.docs if " " in str(doc["title"])}
    assert not [q for q in renamed if any(title in q for title in titles)], (
        "a question outside the train split is a renamed one: it names no entity of the corpus"
    )


def test_the_cache_key_follows_the_held_out_names(written, tmp_path: Path, tiny_policy) -> None:
    name, world = written
    if name != "default":
        pytest.skip("one world is enough")
    key, payload = warmstart_key(warmstart_config(), tiny_policy, world)
    moved = tmp_path / "world"
    moved.mkdir()
    for path in (world.corpus, world.train, world.meta):
        (moved / path.name).write_bytes(path.read_bytes())
    held = json.loads(world.held_out.read_text())
    (moved / world.held_out.name).write_text(json.dumps({"dev": held["dev"], "test": held["test"][1:]}))
    assert warmstart_key(warmstart_config(), tiny_policy, WorldPaths.under(moved))[0] != key
    assert "world" in payload
