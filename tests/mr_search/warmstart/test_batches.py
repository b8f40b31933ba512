"""The warm start's batches: length buckets, and the window stage's short slices of the transcripts."""

from __future__ import annotations

import random

import pytest

from mr_search.warmstart.batches import WindowSampler, bucketed_batches, instruction_length
from mr_search.warmstart.lookup import LexicalIndex
from mr_search.warmstart.render import Encoded, encode
from mr_search.warmstart.transcripts import TranscriptConfig, build_transcripts


@pytest.fixture(scope="module")
def examples(mini_corpus, mini_questions, tiny_policy):
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(tiny_policy)
    transcripts = build_transcripts(mini_questions, LexicalIndex(mini_corpus), 12, TranscriptConfig(seed=5))
    return [encode(t, tokenizer) for t in transcripts]


class Recording(random.Random):
    """A seeded RNG that remembers the window starts it drew, or draws the lowest / highest start if told to."""

    def __init__(self, seed: int = 0, pick: str = "random") -> None:
        super().__init__(seed)
        self.pick, self.starts = pick, []

    def randint(self, a: int, b: int) -> int:
        start = {"low": a, "high": b}.get(self.pick)
        start = super().randint(a, b) if start is None else start
        self.starts.append(start)
        return start


def test_the_instruction_is_what_every_transcript_shares_and_ends_before_the_question(examples):
    length = instruction_length(examples)
    assert length > 20
    assert all(e.input_ids[:length] == examples[0].input_ids[:length] for e in examples)
    assert len({tuple(e.input_ids[: length + 1]) for e in examples}) > 1, "the next token differs: the question"
    assert all(not any(e.loss_mask[:length]) and not any(e.env_mask[:length]) for e in examples)
    assert instruction_length([Encoded([1, 2, 3], [0] * 3, 0, [0] * 3), Encoded([1, 2, 4], [0] * 3, 0, [0] * 3)]) == 2
    assert instruction_length([]) == 0


def test_a_window_is_a_slice_after_the_instruction_with_its_labels(examples):
    rng = Recording(0)
    sampler = WindowSampler(examples, 32, question_share=0.0, rng=rng)
    for example in examples:
        for _ in range(5):
            window = sampler.window(example)
            s = rng.starts[-1]
            assert s >= sampler.start, "windows start at the question or later, never inside the instruction"
            assert window.input_ids == example.input_ids[s : s + 32]
            assert window.loss_mask == example.loss_mask[s : s + 32]
            assert window.env_mask == example.env_mask[s : s + 32]


def test_windows_reach_both_ends_and_a_question_share_starts_at_the_question(examples):
    example = max(examples, key=lambda e: len(e.input_ids))
    start = instruction_length(examples)
    lowest = WindowSampler(examples, 16, 0.0, Recording(pick="low")).window(example)
    highest = WindowSampler(examples, 16, 0.0, Recording(pick="high")).window(example)
    assert lowest.input_ids == example.input_ids[start : start + 16], "the question opens the lowest window"
    assert highest.input_ids == example.input_ids[-16:], "the last window ends with the transcript"
    whole = WindowSampler(examples, 10_000, 0.0, Recording(pick="high")).window(example)
    assert whole.input_ids == example.input_ids[start:], "a window longer than the transcript is all after the start"
    rng = Recording(3)
    sampler = WindowSampler(examples, 16, 1.0, rng)
    assert all(sampler.window(e).input_ids == e.input_ids[start : start + 16] for e in examples)
    assert rng.starts == [], "share 1: every window starts at the question, no random start is drawn"


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
