"""The warm start's batches: length buckets, and the window stage's short slices of the transcripts' bodies."""

from __future__ import annotations

import random

import pytest

from mr_search.warmstart.batches import body_window, bucketed_batches, first_trained_position, window_batch
from mr_search.warmstart.lookup import LexicalIndex
from mr_search.warmstart.render import encode
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
        self.pick, self.starts, self.bounds = pick, [], []

    def randint(self, a: int, b: int) -> int:
        start = {"random": lambda: super(Recording, self).randint(a, b), "low": lambda: a, "high": lambda: b}[
            self.pick
        ]()
        self.starts.append(start)
        self.bounds.append((a, b))
        return start


def test_a_window_is_a_slice_of_the_body_with_its_labels(examples):
    rng = Recording(0)
    for example in examples:
        first = first_trained_position(example)
        assert 0 < first < len(example.input_ids)
        assert not any(example.loss_mask[:first]) and not any(example.env_mask[:first]), "the instruction: no label"
        for _ in range(5):
            window = body_window(example, 32, rng)
            s = rng.starts[-1]
            assert first - 1 <= s, "windows start at the last instruction token or later"
            assert window.input_ids == example.input_ids[s : s + 32]
            assert window.loss_mask == example.loss_mask[s : s + 32]
            assert window.env_mask == example.env_mask[s : s + 32]
            assert len(window.input_ids) == min(32, len(example.input_ids) - s)


def test_windows_reach_both_ends_of_the_body_and_a_short_body_comes_whole(examples):
    example = max(examples, key=lambda e: len(e.input_ids))
    first = first_trained_position(example)
    lowest = body_window(example, 16, Recording(pick="low"))
    highest = body_window(example, 16, Recording(pick="high"))
    assert lowest.input_ids == example.input_ids[first - 1 : first + 15], "the first label's predecessor opens it"
    assert highest.input_ids == example.input_ids[-16:], "the last window ends with the transcript"
    whole = body_window(example, 10_000, Recording(pick="high"))
    assert whole.input_ids == example.input_ids[first - 1 :], "a window longer than the body is the whole body"


def test_a_window_batch_is_padded_to_the_window_length_and_deterministic(examples):
    first = window_batch(examples, 6, 24, 0, random.Random(3))
    again = window_batch(examples, 6, 24, 0, random.Random(3))
    assert first.ids.shape == (6, 24)
    assert (first.ids == again.ids).all() and (first.labels == again.labels).all()
    assert ((first.labels != -100) | (first.env_labels != -100)).any(dim=1).all(), "every window holds labels"


def test_length_buckets_are_one_epoch_of_similar_lengths(examples):
    batches = bucketed_batches(examples, 4, random.Random(0))
    assert sorted(i for b in batches for i in b) == list(range(len(examples)))
    assert all(len(b) <= 4 for b in batches)
