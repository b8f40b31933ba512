"""The warm start's batches: whole transcripts grouped by length, and short windows of them for the copying stage."""

from __future__ import annotations

import random
from collections.abc import Sequence
from typing import Any, NamedTuple

from mr_search_embedded.warmstart.render import Encoded


class Batch(NamedTuple):
    """Right-padded rows: token ids, attention (1 on real tokens), labels on model-written tokens, and labels on
    the environment's text after the question (passages, reflection turns); -100 where there is none."""

    ids: Any
    attention: Any
    labels: Any
    env_labels: Any


def pad_batch(examples: Sequence[Encoded], pad_id: int, max_length: int) -> Batch:
    """The examples as one right-padded batch, cut to ``max_length`` tokens."""
    import torch

    length = min(max_length, max(len(e.input_ids) for e in examples))
    ids = torch.full((len(examples), length), pad_id, dtype=torch.long)
    labels = torch.full((len(examples), length), -100, dtype=torch.long)
    env_labels = torch.full((len(examples), length), -100, dtype=torch.long)
    attention = torch.zeros((len(examples), length), dtype=torch.long)
    for row, example in enumerate(examples):
        n = min(length, len(example.input_ids))
        ids[row, :n] = torch.tensor(example.input_ids[:n])
        attention[row, :n] = 1
        mask = torch.tensor(example.loss_mask[:n], dtype=torch.bool)
        labels[row, :n] = torch.where(mask, ids[row, :n], -100)
        env = torch.tensor(example.env_mask[:n], dtype=torch.bool)
        env_labels[row, :n] = torch.where(env, ids[row, :n], -100)
    return Batch(ids, attention, labels, env_labels)


def bucketed_batches(examples: Sequence[Encoded], batch_size: int, order: random.Random) -> list[list[int]]:
    """One epoch of batches in random order, each of transcripts of similar length (less padding to compute)."""
    fresh = list(range(len(examples)))
    order.shuffle(fresh)
    span = batch_size * 8
    batches = []
    for start in range(0, len(fresh), span):
        group = sorted(fresh[start : start + span], key=lambda i: len(examples[i].input_ids))
        batches += [group[i : i + batch_size] for i in range(0, len(group), batch_size)]
    order.shuffle(batches)
    return batches


def instruction_length(examples: Sequence[Encoded]) -> int:
    """How many leading tokens every example shares (the instruction in front of each question)."""
    if not examples:
        return 0
    first = examples[0].input_ids
    length = min(len(e.input_ids) for e in examples)
    for example in examples[1:]:
        ids = example.input_ids
        while length and ids[:length] != first[:length]:
            length = next(i for i in range(length) if ids[i] != first[i])
    return length


class WindowSampler:
    """Draws the window stage's batches: slices of ``length`` tokens of the transcripts after the shared
    instruction. An ``anchor_share`` of them start at the question (its copy into the first search is then in
    view); the rest start anywhere after the instruction (passages, answers, later attempts)."""

    def __init__(self, examples: Sequence[Encoded], length: int, anchor_share: float, rng: random.Random) -> None:
        if not examples:
            raise ValueError("WindowSampler: no examples to draw windows from")
        self.examples = examples
        self.length = length
        self.anchor_share = anchor_share
        self.rng = rng
        self.start = instruction_length(examples)

    def draw(self) -> tuple[int, int]:
        """A window's example (its index) and first position."""
        anchored = self.rng.random() < self.anchor_share
        index = self.rng.randrange(len(self.examples))
        if anchored:
            return index, self.start
        last = max(self.start, len(self.examples[index].input_ids) - self.length)
        return index, self.rng.randint(self.start, last)

    def window(self) -> Encoded:
        index, start = self.draw()
        example, cut = self.examples[index], slice(start, start + self.length)
        return Encoded(example.input_ids[cut], example.loss_mask[cut], 0, example.env_mask[cut])

    def batch(self, count: int, pad_id: int) -> Batch:
        return pad_batch([self.window() for _ in range(count)], pad_id, self.length)
