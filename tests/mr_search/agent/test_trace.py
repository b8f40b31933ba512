"""The agent loop's trace: what a GPU run's checks read (token-in/token-out, stops at the tags)."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest

from mr_search.agent import loop as loop_module
from mr_search.agent.trace import Tracer, read_traces
from mr_search.ops.run_checks import check_stops, check_token_in_token_out


@pytest.fixture
def traced(tmp_path, monkeypatch) -> Any:
    monkeypatch.setattr(loop_module, "_TRACER", Tracer(tmp_path / "trace"))
    return tmp_path / "trace"


def _decode(tokenizer: Any):
    return lambda ids: tokenizer.decode(ids, skip_special_tokens=False)


async def test_a_traced_episode_proves_token_in_token_out_and_stops(kit: SimpleNamespace, traced, tokenizer) -> None:
    script = ["<think>x</think><search>capital</search>", "<answer>Paris</answer>", "<answer>Paris</answer>"]
    loop, server, _ = kit.make_loop(script + ["<answer>Lyon</answer>"] * 3)
    output = await loop.run(dict(kit.sampling), **kit.row())
    [record] = read_traces(traced)
    assert [turn["sampled"] for turn in record["turns"]] == server.outputs  # exactly what the engine returned
    assert record["response_ids"] == output.response_ids and record["mask"] == output.response_mask
    assert all(turn["stop_reason"] == "completed" for turn in record["turns"])
    eos = set(tokenizer.all_special_ids)
    assert check_token_in_token_out([record]).passed
    stops = check_stops([record], _decode(tokenizer), eos)
    assert stops.passed, stops.seen


async def test_an_engine_that_runs_past_the_tag_fails_the_stop_check(kit: SimpleNamespace, traced, tokenizer) -> None:
    # The loop cuts the turn (nothing after the tag is trained), but the engine did not stop there: reported.
    loop, _, _ = kit.make_loop(["<answer>Paris</answer> and more words"] * 3)
    output = await loop.run(dict(kit.sampling), **kit.row())
    [record] = read_traces(traced)
    assert check_token_in_token_out([record]).passed
    stops = check_stops([record], _decode(tokenizer), set(tokenizer.all_special_ids))
    assert not stops.passed and "engine ran past the tag in 3" in stops.seen
    assert "more" not in tokenizer.decode(
        [t for t, m in zip(output.response_ids, output.response_mask, strict=True) if m]
    )


async def test_no_trace_without_the_variable(kit: SimpleNamespace, tmp_path, monkeypatch) -> None:
    monkeypatch.delenv("MR_SEARCH_TRACE_DIR", raising=False)
    monkeypatch.setattr(loop_module, "_TRACER", None)
    loop, _, _ = kit.make_loop(["<answer>Paris</answer>"] * 3)
    await loop.run(dict(kit.sampling), **kit.row())
    assert not loop_module._tracer().enabled
