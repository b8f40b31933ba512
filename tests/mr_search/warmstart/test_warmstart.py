"""The warm start: realistic synthetic meta-episodes, masks on model tokens only, a loss that falls, a cached model."""

from __future__ import annotations

import random

import pytest

from mr_search.warmstart.lookup import LexicalIndex
from mr_search.warmstart.render import encode
from mr_search.warmstart.train import WarmStartConfig, ensure_warmstart, supervised_pass
from mr_search.warmstart.transcripts import TranscriptBuilder, TranscriptConfig, build_transcripts


@pytest.fixture(scope="module")
def index(mini_corpus) -> LexicalIndex:
    return LexicalIndex(mini_corpus)


@pytest.fixture(scope="module")
def tokenizer(tiny_policy):
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(tiny_policy)


def test_lookup_ranks_the_asked_entity_first(index):
    assert index.search("Where was Alda Venn born", 3)[0]["title"] == "Alda Venn"
    assert index.search("Kumholt", 1)[0]["title"] == "Kumholt"  # the title counts double


def test_transcripts_are_deterministic_and_mix_wrong_then_right(index, mini_questions):
    config = TranscriptConfig(attempts=3, seed=7)
    first = build_transcripts(mini_questions, index, 40, config)
    assert first == build_transcripts(mini_questions, index, 40, config)
    patterns = {t.correct for t in first}
    # Each transcript: some leading wrong attempts, then right ones; the last attempt is always right.
    assert patterns <= {(True, True, True), (False, True, True), (False, False, True)}
    assert len(patterns) >= 2, "the warm start must show both first-try successes and corrections"


def test_right_attempts_search_and_answer_from_the_passages(index, mini_questions):
    builder = TranscriptBuilder(index, mini_questions, TranscriptConfig(attempts=2, p_wrong=0.9))
    two_hop = next(q for q in mini_questions if q["hops"] == 2)
    transcript = builder.build(two_hop, random.Random(0))
    assert transcript.correct == (False, True)
    wrong, right = transcript.attempts
    answer = two_hop["golden_answers"][0]
    # The right attempt searches the asked-about entity, then the bridge entity, and copies an answer it has read.
    assert [t.role for t in right] == ["model", "information", "model", "information", "model"]
    assert right[0].text.endswith("<search> Aldo Venn </search>")
    assert right[2].text.endswith("<search> Kumholt </search>")
    assert "<search> In which country was Aldo Venn born </search>" in wrong[0].text
    assert answer in right[3].text
    assert right[-1].text.endswith(f"<answer> {answer} </answer>")
    assert f"<answer> {answer} </answer>" not in wrong[-1].text


def test_mask_covers_exactly_the_model_written_tokens(index, mini_questions, tokenizer):
    from mr_search.agent.tokens import EnvEncoder

    env = EnvEncoder(tokenizer)
    for transcript in build_transcripts(mini_questions, index, 6, TranscriptConfig(attempts=3, seed=1)):
        encoded = encode(transcript, tokenizer, env)
        assert len(encoded.input_ids) == len(encoded.loss_mask)
        assert not any(encoded.loss_mask[: encoded.prompt_length]), "the question prompt must not be trained"
        runs, current = [], []
        for token, trained in zip(encoded.input_ids, encoded.loss_mask, strict=True):
            if trained:
                current.append(token)
            elif current:
                runs.append(current)
                current = []
        if current:
            runs.append(current)
        model_turns = [turn.text for attempt in transcript.attempts for turn in attempt if turn.role == "model"]
        assert [tokenizer.decode(run) for run in runs] == model_turns
        # Everything else (passages, reflection turns) is environment text, as the agent loop renders it.
        text = tokenizer.decode(encoded.input_ids[encoded.prompt_length :])
        assert text.count("<information>") == sum(t.role == "information" for a in transcript.attempts for t in a)
        assert text.count("Reflect on your previous attempt") == len(transcript.attempts) - 1


def test_supervised_pass_lowers_the_loss(index, mini_questions, tokenizer, tiny_policy):
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(tiny_policy)
    examples = [encode(t, tokenizer) for t in build_transcripts(mini_questions, index, 8, TranscriptConfig())]
    config = WarmStartConfig(steps=30, batch_size=4, lr=1e-2, warmup_steps=2)
    losses = supervised_pass(model, examples, config, tokenizer.pad_token_id)
    assert len(losses) == 30
    assert sum(losses[-5:]) / 5 < 0.6 * sum(losses[:5]) / 5


def test_ensure_warmstart_saves_a_loadable_policy_once(tmp_path, tiny_policy, mini_world):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    config = WarmStartConfig(num_transcripts=8, steps=3, batch_size=4, warmup_steps=1)
    out = ensure_warmstart(base_model=tiny_policy, out_dir=tmp_path / "ws", config=config, world=mini_world)
    assert (out / ".complete").is_file()
    model = AutoModelForCausalLM.from_pretrained(out)
    assert AutoTokenizer.from_pretrained(out).chat_template
    stamp = (out / "model.safetensors").stat().st_mtime_ns
    again = ensure_warmstart(base_model=tiny_policy, out_dir=tmp_path / "ws", config=config, world=mini_world)
    assert again == out and (out / "model.safetensors").stat().st_mtime_ns == stamp, "cached: not retrained"
    assert model.config.vocab_size > 0


def test_invalid_settings_are_rejected_with_the_reason():
    with pytest.raises(ValueError, match="steps"):
        WarmStartConfig(steps=0)
    with pytest.raises(ValueError, match="p_wrong"):
        TranscriptConfig(p_wrong=1.0)
