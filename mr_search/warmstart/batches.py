"""The warm start's batches: whole transcripts grouped by length, and short windows of them for the copying stage."""

from __future__ import annotations

import random
from collections.abc import Sequence
from typing import Any, NamedTuple

from mr_search.warmstart.render import Encoded


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


def first_trained_position(example: Encoded) -> int:
    """The position of the first token with a label of either kind (the body after the instruction and question)."""
    for position, (trained, is_env) in enumerate(zip(example.loss_mask, example.env_mask, strict=True)):
        if trained or is_env:
            return position
    return len(example.input_ids)


def body_window(example: Encoded, length: int, rng: random.Random) -> Encoded:
    """A window of ``length`` tokens (fewer if the body is shorter) that starts one token before the first label or
    later, at a random place: the searches, passages and answers without the instruction in front of them."""
    start = max(0, first_trained_position(example) - 1)
    start = rng.randint(start, max(start, len(example.input_ids) - length))
    cut = slice(start, start + length)
    return Encoded(example.input_ids[cut], example.loss_mask[cut], 0, example.env_mask[cut])


def window_batch(examples: Sequence[Encoded], count: int, length: int, pad_id: int, rng: random.Random) -> Batch:
    """``count`` body windows of random examples, padded into one batch."""
    chosen = [body_window(examples[rng.randrange(len(examples))], length, rng) for _ in range(count)]
    return pad_batch(chosen, pad_id, length)
