"""A turn aborted mid-generation and resumed on newer weights (verl's partial rollout under
``trainer.v1.trainer_mode=separate_async``) keeps the meta-episode whole: verl's ``FullyAsyncLLMServerClient``
resumes inside one ``generate`` call, so the loop sees one turn of the concatenated ids (docs/async.md)."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from omegaconf import OmegaConf
from verl.workers.rollout import llm_server
from verl.workers.rollout.replica import TokenOutput


async def test_an_aborted_turn_resumed_on_newer_weights_keeps_tokens_masks_attempts_and_rewards(
    kit: SimpleNamespace, monkeypatch: Any, tokenizer: Any
) -> None:
    loop, scripted, _ = kit.make_loop(["<search> Freedonia </search>", "<answer> Paris </answer>"])
    calls: list[list[int]] = []
    pending: dict[str, list[int]] = {}

    async def engine(self: Any, request_id: str, *, prompt_ids: list[int], sampling_params: dict[str, Any], **kw: Any):
        """The engine: the first request of each turn is aborted after half its tokens (a weight sync at step 3);
        the resumed request (prompt + those tokens) finishes on step 4's weights."""
        calls.append(list(prompt_ids))
        if request_id not in pending:
            full = await scripted.generate(request_id, prompt_ids=prompt_ids, sampling_params=sampling_params)
            half = len(full.token_ids) // 2
            pending[request_id] = list(full.token_ids[half:])
            return TokenOutput(
                token_ids=full.token_ids[:half],
                log_probs=full.log_probs[:half],
                stop_reason="aborted",
                extra_fields={"global_steps": 3},
            )
        rest = pending.pop(request_id)
        return TokenOutput(
            token_ids=rest, log_probs=[-0.5] * len(rest), stop_reason="completed", extra_fields={"global_steps": 4}
        )

    monkeypatch.setattr(llm_server.LLMServerClient, "generate", engine)
    monkeypatch.setattr(llm_server.asyncio, "sleep", _no_sleep)
    client = object.__new__(llm_server.FullyAsyncLLMServerClient)
    client.config = OmegaConf.create({})  # the V1 trainer's config: no async_training section, always resume
    loop.server_manager = client
    loop.episode = type(loop.episode)(attempts=1)
    output = await loop.run(dict(kit.sampling), **kit.row(["Paris"]))

    assert len(calls) == 4  # two turns, each aborted once and resumed
    assert calls[1][len(calls[0]) :] == scripted.outputs[0][: len(scripted.outputs[0]) // 2]  # resumed with its tokens
    trained = [t for t, m in zip(output.response_ids, output.response_mask, strict=True) if m == 1]
    assert trained == scripted.outputs[0] + scripted.outputs[1]  # the sampled ids, across the abort
    assert output.attempt_ids == [0] * len(output.response_ids)
    assert output.attempt_rewards == [1.0]
    assert (output.extra_fields["min_global_steps"], output.extra_fields["max_global_steps"]) == (3, 4)
    kit.check(output, 4096)


async def _no_sleep(_: float) -> None:
    return None
