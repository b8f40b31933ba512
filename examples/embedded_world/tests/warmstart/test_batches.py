"""The warm start's batches: length buckets, and the window stage's short slices of the transcripts."""

from __future__ import annotations

import random

import pytest

from mr_search_embedded.warmstart.batches import WindowSampler, bucketed_batches, instruction_length
from mr_search_embedded.warmstart.lookup import LexicalIndex
from mr_search_embedded.warmstart.render import Encoded, encode
from mr_search_embedded.warmstart.transcripts import TranscriptConfig, build_transcripts


@pytest.fixture(scope="module")
def examples(mini_corpus, mini_questions, tiny_policy):
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(tiny_policy)
    transcripts = build_transcripts(mini_questions, LexicalIndex(mini_corpus), 12, TranscriptConfig(seed=5))
    return [encode(t, tokenizer) for t in transcripts]


def test_the_instruction_is_what_every_transcript_shares_and_ends_before_the_question(examples):
    length = instruction_length(examples)
    assert length > 20
    assert all(e.input_ids[:length] == examples[0].input_ids[:length] for e in examples)
    assert len({tuple(e.input_ids[: length + 1]) for e in examples}) > 1, "the next token differs: the question"
    assert all(not any(e.loss_mask[:length]) and not any(e.env_mask[:length]) for e in examples)
    assert instruction_length([Encoded([1, 2, 3], [0] * 3, 0, [0] * 3), Encoded([1, 2, 4], [0] * 3, 0, [0] * 3)]) == 2
    assert instruction_length([]) == 0


def test_windows_are_slices_after_the_instruction_with_their_labels(examples):
    sampler = WindowSampler(examples, 32, 0.0, random.Random(0))
    for _ in range(50):
        state = sampler.rng.getstate()
        index, start = sampler.draw()
        sampler.rng.setstate(state)
        window, example = sampler.window(), examples[index]
        assert start >= sampler.start, "windows start at the question or later, never inside the instruction"
        assert start <= max(sampler.start, len(example.input_ids) - 32), "a window ends inside its transcript"
        assert window.input_ids == example.input_ids[start : start + 32]
        assert window.loss_mask == example.loss_mask[start : start + 32]
        assert window.env_mask == example.env_mask[start : start + 32]


def test_anchored_windows_start_at_the_question(examples):
    sampler = WindowSampler(examples, 16, 1.0, random.Random(0))
    drawn = [sampler.draw() for _ in range(200)]
    assert all(start == sampler.start for _, start in drawn), "share 1: every window opens with its question"
    assert len({index for index, _ in drawn}) == len(examples), "drawn over all transcripts"
    question = sampler.window()
    assert any(question.input_ids == e.input_ids[sampler.start : sampler.start + 16] for e in examples)


def test_a_window_batch_is_padded_to_the_window_length_and_deterministic(examples):
    first = WindowSampler(examples, 24, 0.5, random.Random(3)).batch(6, 0)
    again = WindowSampler(examples, 24, 0.5, random.Random(3)).batch(6, 0)
    assert first.ids.shape == (6, 24)
    assert (first.ids == again.ids).all() and (first.labels == again.labels).all()
    with pytest.raises(ValueError, match="no examples"):
        WindowSampler([], 24, 0.5, random.Random(0))


def test_length_buckets_are_one_epoch_of_similar_lengths(examples):
    batches = bucketed_batches(examples, 4, random.Random(0))
    assert sorted(i for b in batches for i in b) == list(range(len(examples)))
    assert all(len(b) <= 4 for b in batches)
    lengths = [len(e.input_ids) for e in examples]
    for batch in batches:  # 12 examples fit one sorting span: each batch is a run of neighbouring lengths
        low, high = min(lengths[i] for i in batch), max(lengths[i] for i in batch)
        assert not any(low < lengths[i] < high for i in range(len(examples)) if i not in batch)
