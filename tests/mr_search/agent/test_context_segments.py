"""Short-context options train on-policy: each training row is exactly what the engine was given and sampled."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest
import torch

from mr_search import contract
from mr_search.agent.output import training_rows
from mr_search.agent.segments import ContextSegment
from mr_search.contract import SEARCH_RECORD, SEGMENT

# Two model turns in attempts 1 and 2 (a search, then the answer), one in attempt 3.
SCRIPT = [
    "<search>Freedonia capital</search>",
    "<answer>Lyon</answer>",
    "<search>capital of Freedonia</search>",
    "<answer>Paris</answer>",
    "<answer>Paris</answer>",
]


def turns_of(row: Any) -> list[tuple[int, int]]:
    """(start, end) of each maximal run of trained tokens in the row's response: one model turn each."""
    runs, start = [], None
    for i, mask in enumerate([*row.response_mask, 0]):
        if mask and start is None:
            start = i
        elif not mask and start is not None:
            runs.append((start, i))
            start = None
    return runs


def assert_rows_are_what_the_engine_saw(rows: list[Any], server: Any) -> None:
    """Every engine call, in order, is one model turn of a row: the row's prompt plus its response before the turn
    is the exact context the engine was given, and the turn's tokens and log-probs are what it sampled."""
    calls = iter(zip(server.calls, server.outputs, strict=True))
    for row in rows:
        for start, end in turns_of(row):
            call, sampled = next(calls)
            assert row.prompt_ids + row.response_ids[:start] == call["prompt_ids"]
            assert row.response_ids[start:end] == sampled
            assert row.response_logprobs[start:end] == [-(i + 1) / 100 for i in range(len(sampled))]
    assert next(calls, None) is None, "every sampled turn is trained in some row"


async def test_previous_attempt_trains_one_row_per_context_with_the_ids_it_saw(kit: SimpleNamespace) -> None:
    loop, server, _ = kit.make_loop(list(SCRIPT), {"context": "previous_attempt"})
    rows = await loop.run(dict(kit.sampling), **kit.row())
    # Attempts 1 and 2 both saw the whole meta-episode so far (attempt 2's previous attempt is attempt 1): one row;
    # attempt 3 saw the question and attempt 2 only: a row of its own.
    assert isinstance(rows, list) and len(rows) == 2
    assert_rows_are_what_the_engine_saw(rows, server)

    loop, _, _ = kit.make_loop(list(SCRIPT), {"context": "previous_attempt"})
    whole = await loop.play(dict(kit.sampling), **kit.row())
    prompt_len = len(whole.prompt_ids)
    trained = [{row.attempt_ids[i] for i, m in enumerate(row.response_mask) if m} for row in rows]
    assert trained == [{0, 1}, {2}]
    # Row 2's prompt: the question, attempt 2 (from its reflection turn on) and attempt 3's reflection turn.
    attempt_2 = whole.attempt_ids.index(1)
    attempt_3_first_sampled = next(
        i for i, (a, m) in enumerate(zip(whole.attempt_ids, whole.response_mask, strict=True)) if a == 2 and m
    )
    assert rows[0].prompt_ids == whole.prompt_ids
    assert rows[1].prompt_ids == whole.prompt_ids + whole.response_ids[attempt_2:attempt_3_first_sampled]
    assert rows[1].prompt_ids[:prompt_len] == whole.prompt_ids
    # Together the rows hold the meta-episode's response exactly once, with its masks and attempt ids.
    assert [t for row in rows for t in row.response_ids] == whole.response_ids
    assert [m for row in rows for m in row.response_mask] == whole.response_mask
    assert [a for row in rows for a in row.attempt_ids] == whole.attempt_ids
    # Each row carries the meta-episode's per-attempt columns and id; its records sit on the last row only.
    assert len({row.episode_id for row in rows}) == 1
    assert all(row.attempt_rewards == [0.0, 1.0, 1.0] for row in rows)
    assert all(row.attempt_status == whole.attempt_status for row in rows)
    assert [row.extra_fields[SEGMENT] for row in rows] == [{"index": i, "count": 2} for i in range(2)]
    assert [row.extra_fields[SEARCH_RECORD]["run"] for row in rows] == [0, 2]
    columns = rows[1].as_dict()
    assert columns[contract.EPISODE_ID].tolist() == [rows[1].episode_id]
    assert columns[contract.ATTEMPT_IDS].shape == columns["responses"].shape


async def test_max_context_tokens_opens_a_row_whenever_the_cut_moves(kit: SimpleNamespace) -> None:
    script = ["<search>a</search>", "<search>b</search>", "<answer>Paris</answer>"]
    episode = {"attempts": 1, "max_new_tokens_per_turn": 16}
    loop, _, _ = kit.make_loop(list(script), episode)
    prompt_len = len((await loop.play(dict(kit.sampling), **kit.row())).prompt_ids)
    loop, server, _ = kit.make_loop(list(script), {**episode, "max_context_tokens": prompt_len + 16 + 40})
    rows = await loop.run(dict(kit.sampling), **kit.row())
    assert isinstance(rows, list) and len(rows) >= 2, "the limit bites: later turns saw a cut context"
    assert_rows_are_what_the_engine_saw(rows, server)
    assert all(len(row.prompt_ids) + len(row.response_ids) > 0 for row in rows)


async def test_the_full_context_stays_one_sequence(kit: SimpleNamespace) -> None:
    loop, server, _ = kit.make_loop(list(SCRIPT))
    output = await loop.run(dict(kit.sampling), **kit.row())
    assert not isinstance(output, list)
    assert SEGMENT not in output.extra_fields
    assert_rows_are_what_the_engine_saw([output], server)


def test_training_rows_split_at_each_new_cut() -> None:
    from verl.experimental.agent_loop.agent_loop import AgentLoopMetrics

    from mr_search.agent.output import MRSearchAgentLoopOutput

    whole = MRSearchAgentLoopOutput(
        prompt_ids=[100, 101],
        response_ids=[1, 2, 3, 4, 5, 6, 7],
        response_mask=[1, 1, 0, 1, 0, 1, 1],
        response_logprobs=[-0.1, -0.2, 0.0, -0.4, 0.0, -0.6, -0.7],
        attempt_ids=[0, 0, 0, 0, 1, 1, 1],
        attempt_rewards=[0.0, 1.0],
        attempt_status=[1, 1],
        episode_id=5,
        reward_score=1.0,
        metrics=AgentLoopMetrics(),
        extra_fields={SEARCH_RECORD: {"run": 1, "failed": 0, "last_error": None}},
    )
    # Turns at 0 and 3 saw the whole context; the turn at 5 saw the question plus positions 4 onwards.
    rows = training_rows(whole, [ContextSegment(0, 0), ContextSegment(4, 5)])
    assert [(r.prompt_ids, r.response_ids) for r in rows] == [([100, 101], [1, 2, 3, 4, 5]), ([100, 101, 5], [6, 7])]
    assert rows[1].response_logprobs == [-0.6, -0.7] and rows[1].attempt_ids == [1, 1]
    assert rows[0].extra_fields[SEARCH_RECORD]["run"] == 0 and rows[1].extra_fields[SEARCH_RECORD]["run"] == 1
    assert whole.extra_fields[SEARCH_RECORD]["run"] == 1, "the whole output is left as it was"
    assert training_rows(whole, [ContextSegment(0, 0)]) is whole


@pytest.mark.parametrize("context", ["full", "previous_attempt"])
async def test_rows_keep_the_loop_invariants(kit: SimpleNamespace, context: str) -> None:
    loop, _, _ = kit.make_loop(list(SCRIPT), {"context": context})
    output = await loop.run(dict(kit.sampling), **kit.row())
    for row in output if isinstance(output, list) else [output]:
        assert len(row.response_mask) == len(row.response_ids) == len(row.attempt_ids) == len(row.response_logprobs)
        assert row.response_mask[0] == 1, "a row starts at a sampled turn"
        assert torch.tensor(row.attempt_ids).diff().ge(0).all()
