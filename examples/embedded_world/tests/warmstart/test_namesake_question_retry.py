"""Retries that search the whole question (``TranscriptConfig.retry_question``, on in the namesake world's warm start):
every retry and check searches the question and reads the passage the agent's dense index ranks first for it; the
reflection turns can restate the question just before (``reflection_question``)."""

from __future__ import annotations

import random
import re
from dataclasses import replace

from mr_search_embedded.warmstart.train import warmstart_config
from mr_search_embedded.warmstart.transcripts import (
    THINK_RETRY_QUESTION,
    TranscriptBuilder,
    TranscriptConfig,
    search_turn,
)
from mr_search_embedded.world.namesake import CONTROL_RELATION, RETRY_RELATION

_FIRST_TITLE = re.compile(r'Doc 1\(Title: "([^"]+)"\)')


def _answer_doc(row: dict) -> str:
    """The passage that answers ``row``'s question when the whole question is searched: B's article for a namesake
    question, else the first hop's."""
    gold = [str(d) for d in row["gold_doc_ids"]]
    return gold[-1] if row["relation"] == RETRY_RELATION else gold[0]


def test_every_retry_and_check_searches_the_question_and_reads_its_first_passage(small_namesake) -> None:
    index, train = small_namesake
    config = TranscriptConfig(retry_question=True, p_wrong=0.9)
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


def test_without_the_option_no_retry_searches_the_question(small_namesake) -> None:
    index, train = small_namesake
    builder = TranscriptBuilder(index, train, TranscriptConfig(p_wrong=0.9))
    for seed, row in enumerate(train[:200]):
        transcript = builder.build(row, random.Random(seed))
        model = "".join(turn.text for attempt in transcript.attempts for turn in attempt if turn.role == "model")
        assert f"<search> {row['question'].strip()} </search>" not in model


def test_reflection_turns_restate_the_question_as_environment_text(small_namesake, tokenizer, tmp_path) -> None:
    import json

    from mr_search.prompts import reflection_prompt
    from mr_search_embedded.warmstart.probe import trained_restating
    from mr_search_embedded.warmstart.render import encode_all

    namesake = warmstart_config(world="namesake")
    assert namesake.transcripts.retry_question and namesake.transcripts.reflection_question
    index, train = small_namesake
    rows = [r for r in train if r["relation"] == RETRY_RELATION][:4]
    restated = replace(namesake.transcripts, p_wrong=0.9)
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
