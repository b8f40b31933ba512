"""The namesake world's warm-start recipe 5: a decision stage of windows that end right after the thought that follows
the name's article, namesake and control questions in equal numbers, each profession equally often."""

from __future__ import annotations

import random
from collections import Counter
from dataclasses import replace

import pytest

from mr_search_embedded.tiny_model import policy_shape
from mr_search_embedded.warmstart.decision import (
    balanced_rows,
    decision_transcript,
    decision_transcripts,
    question_profession,
)
from mr_search_embedded.warmstart.lookup import LexicalIndex
from mr_search_embedded.warmstart.render import encode, encode_all
from mr_search_embedded.warmstart.train import (
    NAMESAKE_DECISION_RECIPE,
    NAMESAKE_DECISION_STEPS,
    WarmStartConfig,
    decision_windows,
    policy_config,
    supervised_pass,
    warmstart_config,
)
from mr_search_embedded.warmstart.transcripts import TranscriptBuilder, TranscriptConfig
from mr_search_embedded.world.world import corpus_row

# Three groups: (name, known profession, city, other profession, alias, alias's city).
GROUPS = [
    ("Aldo Venn", "painter", "Kumholt", "sailor", "Drelo Kam", "Tarport"),
    ("Bepo Sar", "sailor", "Ristead", "painter", "Mulo Fen", "Vaford"),
    ("Cira Dol", "baker", "Zusholt", "sailor", "Pia Rum", "Brekport"),
]


def _world() -> tuple[LexicalIndex, list[dict]]:
    passages, rows = [], []
    for name, known, city, other, alias, alias_city in GROUPS:
        article = len(passages)
        passages.append(
            (name, f"The {known} {name} was born in {city}. The {other} {name} is better known as {alias}.")
        )
        passages.append((alias, f"{alias} was a {other} born in {alias_city}."))
        rows.append(
            {
                "question": f"Where was the {other} {name} born?",
                "golden_answers": [alias_city],
                "gold_doc_ids": [str(article), str(article + 1)],
                "relation": "namesake_birthplace",
            }
        )
        rows.append(
            {
                "question": f"Where was the {known} {name} born?",
                "golden_answers": [city],
                "gold_doc_ids": [str(article)],
                "relation": "namesake_control",
            }
        )
    rows.append({"question": "Where was Alda Venn born?", "golden_answers": ["X"], "gold_doc_ids": ["0"]})
    docs = [corpus_row(i, t, x) for i, (t, x) in enumerate(passages)]
    return LexicalIndex(docs), rows


def test_the_profession_is_the_word_the_question_puts_before_the_name():
    assert question_profession("Where was the sailor Aldo Venn born?", "Aldo Venn") == "sailor"
    assert question_profession("Where was The Painter Aldo Venn born?", "Aldo Venn") == "painter"
    with pytest.raises(ValueError, match="does not say 'the <profession> Aldo Venn'"):
        question_profession("Where was Aldo Venn born?", "Aldo Venn")


def test_a_window_ends_right_after_the_thought_that_follows_the_names_article(tokenizer):
    index, rows = _world()
    builder = TranscriptBuilder(index, rows, TranscriptConfig(attempts=1, namesake_copy=True))
    namesake, control = rows[0], rows[1]
    (window,) = decision_transcript(builder, namesake).attempts
    assert [t.role for t in window] == ["model", "information", "model"]
    assert window[0].text.endswith("<search> Aldo Venn </search>") and '(Title: "Aldo Venn")' in window[1].text
    assert window[2].text == (
        "<think> The sailor Aldo Venn is better known as Drelo Kam. I need to search for it. </think>"
    )
    (window,) = decision_transcript(builder, control).attempts
    assert window[2].text == "<think> The painter Aldo Venn was born in Kumholt. I found the answer. </think>"
    # Token for token a prefix of the whole attempt the transcripts train on (the thought's tokens do not merge with
    # the action after it), with the thought's tokens trained.
    for row in (namesake, control):
        cut = encode(decision_transcript(builder, row), tokenizer)
        whole = encode(builder.build(row, random.Random(0)), tokenizer)
        assert whole.input_ids[: len(cut.input_ids)] == cut.input_ids
        assert cut.loss_mask == whole.loss_mask[: len(cut.loss_mask)] and cut.loss_mask[-1] == 1
    with pytest.raises(ValueError, match="namesake_copy=True"):
        decision_transcript(TranscriptBuilder(index, rows, TranscriptConfig(attempts=1)), namesake)


def test_kinds_alternate_and_each_profession_is_drawn_equally_often_within_a_kind():
    index, rows = _world()
    drawn = balanced_rows(rows, index, 6000, random.Random(0))
    kinds = Counter(r["relation"] for r in drawn)
    assert kinds == {"namesake_birthplace": 3000, "namesake_control": 3000}
    assert [r["relation"] for r in drawn[:4]] == ["namesake_birthplace", "namesake_control"] * 2
    # Namesake questions: sailor twice among the groups, painter once; drawn per profession, not per question.
    cells = Counter(
        (r["relation"], question_profession(r["question"], index.doc(r["gold_doc_ids"][0])["title"])) for r in drawn
    )
    for cell in [("namesake_birthplace", "sailor"), ("namesake_birthplace", "painter")]:
        assert abs(cells[cell] - 1500) < 100, cells
    for profession in ("painter", "sailor", "baker"):
        assert abs(cells[("namesake_control", profession)] - 1000) < 100, cells
    assert all("relation" in r for r in drawn), "questions of other relations are never drawn"
    with pytest.raises(ValueError, match="needs the namesake world"):
        balanced_rows(rows[-1:], index, 4, random.Random(0))


def test_the_windows_are_deterministic_and_say_the_sentence_of_the_questions_profession(tokenizer):
    index, rows = _world()
    first = decision_transcripts(rows, index, 60, TranscriptConfig(), seed=3)
    assert first == decision_transcripts(rows, index, 60, TranscriptConfig(), seed=3)
    for transcript in first:
        thought = transcript.attempts[0][-1].text
        profession = transcript.question.split()[3]
        assert thought.startswith(f"<think> The {profession} ")
        said = "better known as" if transcript.golden_answers[0] in {g[5] for g in GROUPS} else "was born in"
        assert said in thought
    config = WarmStartConfig(decision_steps=5, decision_batch_size=4)
    encoded = decision_windows(rows, index, config, tokenizer)
    assert len(encoded) == 20 and encoded == encode_all(
        decision_transcripts(rows, index, 20, config.transcripts, seed=config.transcripts.seed + 2), tokenizer
    )
    assert decision_windows(rows, index, WarmStartConfig(), tokenizer) == []


def test_the_decision_stage_runs_between_the_window_stage_and_whole_transcripts(tokenizer, tiny_policy):
    from transformers import AutoModelForCausalLM

    index, rows = _world()
    builder = TranscriptBuilder(index, rows, TranscriptConfig(attempts=1, namesake_copy=True))
    examples = [encode(builder.build(r, random.Random(0)), tokenizer) for r in rows[:6]]
    config = WarmStartConfig(
        window_steps=3,
        window_batch_size=4,
        decision_steps=30,
        decision_batch_size=6,
        steps=2,
        batch_size=3,
        lr=1e-2,
        warmup_steps=1,
    )
    decision = decision_windows(rows, index, config, tokenizer)
    model = AutoModelForCausalLM.from_pretrained(tiny_policy)
    losses = supervised_pass(model, examples, config, tokenizer.pad_token_id, threads=1, decision=decision)
    assert len(losses) == 35 == config.total_steps
    assert sum(losses[28:33]) < 0.7 * sum(losses[3:8]), "the decision windows are learnt (same windows repeat)"
    with pytest.raises(ValueError, match="no decision windows were given"):
        supervised_pass(model, examples, config, tokenizer.pad_token_id, threads=1)


def test_recipe_5_is_recipe_3_with_the_decision_stage_under_its_own_key():
    three, five = (warmstart_config(world="namesake", namesake_recipe=r) for r in (3, NAMESAKE_DECISION_RECIPE))
    assert five == replace(three, decision_steps=NAMESAKE_DECISION_STEPS)
    assert NAMESAKE_DECISION_STEPS * five.decision_batch_size >= 10_000, "the brief's ~10,000 windows"
    assert five.key() == "9c4521cd5137", "the recipe the probe of reports/compare_namesake measured"
    # Earlier recipes and the default world keep their keys (no decision fields in them).
    assert three.key() == "69a2ec909998" and WarmStartConfig().key() == "18f3fe193c67"
    assert warmstart_config(world="default").decision_steps == 0
    assert policy_config("small", "namesake", 5) == policy_shape("small"), "the plain tokenizer, as recipe 3"
    with pytest.raises(ValueError, match="decision_steps=-1"):
        WarmStartConfig(decision_steps=-1)
    with pytest.raises(ValueError, match="decision_batch_size=0"):
        WarmStartConfig(decision_batch_size=0)
