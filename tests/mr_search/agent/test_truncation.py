"""The response budget (rollout.response_length) ends a meta-episode cleanly at any point."""

from __future__ import annotations

from types import SimpleNamespace

from mr_search.contract import AttemptStatus

C, T = AttemptStatus.COMPLETE, AttemptStatus.TRUNCATED

SCRIPT = [
    "<think>need facts</think><search>Freedonia capital</search>",
    "<answer>Lyon</answer>",
    "<search>Freedonia</search>",
    "<answer>Paris</answer>",
    "<answer>Paris</answer>",
]


async def _full_length(kit: SimpleNamespace) -> int:
    loop, _, _ = kit.make_loop(list(SCRIPT))
    output = await loop.run(dict(kit.sampling), **kit.row(["Paris"]))
    assert output.attempt_status == [C, C, C]
    return len(output.response_ids)


async def test_every_budget_gives_consistent_outputs(kit: SimpleNamespace) -> None:
    full = await _full_length(kit)
    for budget in [1, 2, 5, *range(10, full + 10, 7)]:
        loop, server, _ = kit.make_loop(list(SCRIPT), response_length=budget)
        output = await loop.run(dict(kit.sampling), **kit.row(["Paris"]))
        kit.check(output, budget)
        for call in server.calls:  # a turn never asks for more tokens than the budget has left
            assert len(call["prompt_ids"]) - len(output.prompt_ids) + call["params"]["max_tokens"] <= budget
        status = output.attempt_status
        # Complete attempts, then truncated ones: cut mid-way or never started, one status for both.
        assert status == [C] * status.count(C) + [T] * status.count(T), budget
        truncated = output.extra_fields["reward_extra_info"]["truncated"]
        assert truncated == (0.0 if budget >= full else 1.0), budget
        assert (T in status) == (budget < full), budget


async def test_no_room_for_the_last_attempt_leaves_it_absent(kit: SimpleNamespace) -> None:
    loop, _, _ = kit.make_loop(["<answer>Lyon</answer>", "<answer>Paris</answer>", "<answer>Paris</answer>"])
    full = await loop.run(dict(kit.sampling), **kit.row(["Paris"]))
    end_of_attempt_2 = len(full.attempt_ids) - full.attempt_ids[::-1].index(1)
    loop, _, _ = kit.make_loop(
        ["<answer>Lyon</answer>", "<answer>Paris</answer>", "<answer>Paris</answer>"],
        response_length=end_of_attempt_2 + 3,
    )
    output = await loop.run(dict(kit.sampling), **kit.row(["Paris"]))
    assert output.attempt_status == [C, C, T]  # never started: truncated, the same as cut mid-way
    assert output.attempt_rewards == [0.0, 1.0, 0.0]
    assert output.response_ids == full.response_ids[:end_of_attempt_2]  # no dangling reflection turn
    assert output.reward_score == 1.0  # the last present attempt's reward
    assert output.extra_fields["reward_extra_info"]["truncated"] == 1.0


async def test_passages_are_cut_to_the_budget(kit: SimpleNamespace) -> None:
    loop, _, _ = kit.make_loop(["<search>Freedonia capital</search>", "<answer>Paris</answer>"], {"attempts": 1})
    full = await loop.run(dict(kit.sampling), **kit.row(["Paris"]))
    first_turn = full.response_mask.index(0)
    budget = first_turn + 10
    loop, server, _ = kit.make_loop(
        ["<search>Freedonia capital</search>", "<answer>Paris</answer>"], {"attempts": 1}, response_length=budget
    )
    output = await loop.run(dict(kit.sampling), **kit.row(["Paris"]))
    assert output.response_ids == full.response_ids[:budget]
    assert output.response_mask[first_turn:] == [0] * 10
    assert len(server.calls) == 1
    assert output.attempt_status == [T] and output.attempt_rewards == [0.0]


async def test_information_block_is_cut_to_its_token_limit(kit: SimpleNamespace) -> None:
    loop, _, _ = kit.make_loop(
        ["<search>Freedonia capital</search>", "<answer>Paris</answer>"],
        {"attempts": 1, "max_information_tokens": 5, "topk": 3},
    )
    output = await loop.run(dict(kit.sampling), **kit.row(["Paris"]))
    env = [t for t, m in zip(output.response_ids, output.response_mask, strict=True) if m == 0]
    enc = loop.env
    assert (
        env
        == enc.information_open + env[len(enc.information_open) : len(enc.information_open) + 5] + enc.information_close
    )
    assert len(env) == len(enc.information_open) + 5 + len(enc.information_close)


async def test_an_attempt_cut_mid_way_gets_the_status_of_one_that_never_started(kit: SimpleNamespace) -> None:
    script = ["<answer>Lyon</answer>", "<search>Freedonia</search>", "<answer>Paris</answer>", "<answer>Paris</answer>"]
    loop, _, _ = kit.make_loop(list(script))
    full = await loop.run(dict(kit.sampling), **kit.row(["Paris"]))
    first_model_token = next(
        i for i, (k, m) in enumerate(zip(full.attempt_ids, full.response_mask, strict=True)) if k == 1 and m == 1
    )
    loop, _, _ = kit.make_loop(list(script), response_length=first_model_token + 1)  # inside attempt 2's first turn
    output = await loop.run(dict(kit.sampling), **kit.row(["Paris"]))
    assert 1 in output.attempt_ids  # attempt 2 started and was cut
    assert output.attempt_status == [C, T, T]
    assert output.reward_score == 0.0  # the last complete attempt's reward
