"""Namesake recipe 11 (world version 4): every retry and check searches the whole question and reads the passage the
agent's dense index ranks first for it; the first attempt is recipe 8's."""

from __future__ import annotations

import random
import re
from dataclasses import replace

import pytest

from mr_search_embedded.warmstart.train import (
    NAMESAKE_QUESTION_RETRY_RECIPE,
    NAMESAKE_SHUFFLED_RECIPE,
    warmstart_config,
)
from mr_search_embedded.warmstart.transcripts import (
    THINK_RETRY_QUESTION,
    TranscriptBuilder,
    TranscriptConfig,
    search_turn,
)
from mr_search_embedded.world.namesake import CONTROL_RELATION, RETRY_RELATION

_FIRST_TITLE = re.compile(r'Doc 1\(Title: "([^"]+)"\)')


def test_recipe_11_is_recipe_8_with_question_retries_and_earlier_keys_stay(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MR_SEARCH_NAMESAKE_VERSION", "4")
    keys = {r: warmstart_config(world="namesake", namesake_recipe=r).key() for r in (7, 8, 10)}
    assert keys == {7: "5a35f173d0c2", 8: "0b25ef7fe162", 10: "3bad8e788d83"}, "built recipes keep their keys"
    eight = warmstart_config(world="namesake", namesake_recipe=NAMESAKE_SHUFFLED_RECIPE)
    eleven = warmstart_config(world="namesake", namesake_recipe=NAMESAKE_QUESTION_RETRY_RECIPE)
    assert eleven == replace(eight, transcripts=replace(eight.transcripts, retry_question=True))
    assert eleven.key() not in set(keys.values())
    monkeypatch.setenv("MR_SEARCH_NAMESAKE_VERSION", "3")
    with pytest.raises(ValueError, match="recipe 11 does not fit the namesake world's version 3"):
        warmstart_config(world="namesake", namesake_recipe=NAMESAKE_QUESTION_RETRY_RECIPE)


def _answer_doc(row: dict) -> str:
    """The passage that answers ``row``'s question when the whole question is searched: B's article for a namesake
    question, else the first hop's."""
    gold = [str(d) for d in row["gold_doc_ids"]]
    return gold[-1] if row["relation"] == RETRY_RELATION else gold[0]


def test_every_retry_and_check_searches_the_question_and_reads_its_first_passage(small_v4) -> None:
    index, train = small_v4
    config = TranscriptConfig(namesake_presence=True, presence_gold_shuffled=True, retry_question=True, p_wrong=0.9)
    builder = TranscriptBuilder(index, train, config)
    rows = [r for r in train if r["relation"] in (RETRY_RELATION, CONTROL_RELATION)]
    rows += [r for r in train if r["relation"] == "birthplace"][:20] + [r for r in train if r["hops"] == 2][:40]
    searched = {"slip": 0, "check": 0, "two_hop": 0}
    for seed, row in enumerate(rows):
        transcript = builder.build(row, random.Random(seed))
        question = row["question"].strip()
        for number, attempt in enumerate(transcript.attempts[1:], start=1):
            texts = [turn.text for turn in attempt]
            if "<search>" not in texts[0]:  # a kept answer: no search
                assert len(attempt) == 1 and transcript.correct[number - 1]
                continue
            assert texts[0] == search_turn(THINK_RETRY_QUESTION, question), "the retry copies the question"
            first = _FIRST_TITLE.search(texts[1]).group(1)
            assert first == index.doc(_answer_doc(row))["title"], "the passage that answers it comes first"
            shown = texts[1].count("Doc ")
            gold_text = index.doc(_answer_doc(row))["text"]
            assert 1 <= shown <= config.topk and texts[1].count(gold_text) == 1, "first, once, its neighbours after it"
            assert texts[-1].endswith(f"<answer> {row['golden_answers'][0]} </answer>") and attempt[-1].trained
            if row["hops"] == 2 and row["relation"] != RETRY_RELATION:
                bridge = index.doc(str(row["gold_doc_ids"][1]))["title"]
                assert f"<search> {bridge} </search>" in texts[2], "a two-hop retry goes on with the bridge entity"
                searched["two_hop"] += 1
            else:
                assert len(attempt) == 3, "one search, then the answer"
            searched["slip" if not transcript.correct[number - 1] else "check"] += 1
        assert "<search> " + question not in transcript.attempts[0][0].text, "the first attempt searches the name"
    assert all(count > 5 for count in searched.values()), searched


def test_without_the_option_no_retry_searches_the_question(small_v4) -> None:
    index, train = small_v4
    builder = TranscriptBuilder(index, train, TranscriptConfig(namesake_presence=True, p_wrong=0.9))
    for seed, row in enumerate(train[:200]):
        transcript = builder.build(row, random.Random(seed))
        model = "".join(turn.text for attempt in transcript.attempts for turn in attempt if turn.role == "model")
        assert f"<search> {row['question'].strip()} </search>" not in model


def test_recipe_12_is_recipe_11_whose_reflection_turns_restate_the_question(
    monkeypatch: pytest.MonkeyPatch, small_v4, tokenizer, tmp_path
) -> None:
    import json

    from mr_search.prompts import reflection_prompt
    from mr_search_embedded.warmstart.probe import trained_restating
    from mr_search_embedded.warmstart.render import encode_all
    from mr_search_embedded.warmstart.train import NAMESAKE_RESTATED_RECIPE

    monkeypatch.setenv("MR_SEARCH_NAMESAKE_VERSION", "4")
    eleven = warmstart_config(world="namesake", namesake_recipe=NAMESAKE_QUESTION_RETRY_RECIPE)
    twelve = warmstart_config(world="namesake", namesake_recipe=NAMESAKE_RESTATED_RECIPE)
    assert twelve == replace(eleven, transcripts=replace(eleven.transcripts, reflection_question=True))
    assert eleven.key() == "7927a66c1644", "recipe 11 keeps the key of its build"
    index, train = small_v4
    rows = [r for r in train if r["relation"] == RETRY_RELATION][:4]
    restated = replace(twelve.transcripts, p_wrong=0.9)
    built = [TranscriptBuilder(index, train, restated).build(row, random.Random(n)) for n, row in enumerate(rows)]
    plain = [replace(t, reflection_question=False) for t in built]
    for transcript, with_line, without in zip(
        built, encode_all(built, tokenizer), encode_all(plain, tokenizer), strict=True
    ):
        assert transcript.reflection_question and len(transcript.attempts) == 3
        text = tokenizer.decode(with_line.input_ids)
        line = reflection_prompt(None, question=transcript.question).removeprefix(reflection_prompt(None))
        assert text.count(line.strip()) == 3, "the first turn's line and both reflection turns'"
        assert tokenizer.decode(without.input_ids).count(line.strip()) == 1
        assert sum(with_line.loss_mask) == sum(without.loss_mask), "environment text only: no loss on it"
    (tmp_path / "warmstart.json").write_text(json.dumps({"settings": {"transcripts": {"reflection_question": True}}}))
    assert trained_restating(tmp_path) and not trained_restating(tmp_path / "absent")


def test_recipe_13_is_recipe_12_trained_three_times_as_long(monkeypatch: pytest.MonkeyPatch) -> None:
    from mr_search_embedded.warmstart.train import NAMESAKE_LONG_RECIPE, NAMESAKE_LONG_SCALE, NAMESAKE_RESTATED_RECIPE

    monkeypatch.setenv("MR_SEARCH_NAMESAKE_VERSION", "4")
    twelve = warmstart_config(world="namesake", namesake_recipe=NAMESAKE_RESTATED_RECIPE)
    thirteen = warmstart_config(world="namesake", namesake_recipe=NAMESAKE_LONG_RECIPE)
    assert NAMESAKE_LONG_SCALE == 3
    assert thirteen == replace(
        twelve, window_steps=3 * twelve.window_steps, steps=3 * twelve.steps, num_transcripts=3 * twelve.num_transcripts
    )
    assert thirteen.total_steps == 3 * twelve.total_steps and thirteen.decision_count == 3 * twelve.decision_count
    assert (twelve.key(), thirteen.key()) == ("8b3ce7386990", "685bf941da55"), "the keys of the builds probed"
