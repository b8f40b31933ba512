"""The mr_hf rollout server and its in-worker adapter: verl's generate contract, stop strings, weight sync."""

from __future__ import annotations

import asyncio
import os

import pytest
import torch

from mr_search.cpu.adapter import HFServerAdapter

GREEDY = {"temperature": 0, "top_p": 1.0, "top_k": -1, "repetition_penalty": 1.0, "logprobs": True}


async def _greedy(server, prompt: list[int], max_tokens: int = 12) -> list[int]:
    return (await server.generate(prompt, {**GREEDY, "max_tokens": max_tokens}, "req")).token_ids


async def test_generate_follows_verls_token_output_contract(make_server) -> None:
    server = make_server()
    await server.launch_server()
    prompt = server.tokenizer.encode("hello world")
    outputs = await asyncio.gather(
        *[
            server.generate(prompt, {**GREEDY, "max_tokens": 6}, f"r{i}", image_data=None, video_data=None)
            for i in range(3)
        ]
    )
    assert list(server.batch_sizes) == [3]  # concurrent requests decoded together
    for output in outputs:
        assert len(output.token_ids) == 6 and len(output.log_probs) == 6
        assert output.stop_reason == "completed" and output.extra_fields["finish_reason"] == "length"
        # verl's trainer calls int() on it (docs/cpu-backend.md, workaround 10): an int before any weight sync.
        assert output.extra_fields["global_steps"] == 0 and isinstance(output.extra_fields["global_steps"], int)
    assert outputs[0].token_ids == outputs[1].token_ids == outputs[2].token_ids
    no_logprobs = await server.generate(prompt, {**GREEDY, "logprobs": False, "max_tokens": 2}, "r")
    assert no_logprobs.log_probs is None


async def test_default_budget_and_stop_strings(make_server) -> None:
    server = make_server(prompt_length=64, response_length=5)
    await server.launch_server()
    tokenizer = server.tokenizer
    prompt = tokenizer.encode("hello world")
    unbounded = await server.generate(prompt, {**GREEDY}, "r")
    assert len(unbounded.token_ids) == 5  # rollout.response_length when the request gives no max_tokens
    free = await server.generate(prompt, {"temperature": 1.0, "seed": 2, "max_tokens": 16}, "r")
    stop = tokenizer.decode(free.token_ids[2:4])
    stopped = await server.generate(prompt, {"temperature": 1.0, "seed": 2, "max_tokens": 16, "stop": [stop]}, "r")
    assert stopped.extra_fields["finish_reason"] == "stop"
    assert stopped.token_ids == free.token_ids[: len(stopped.token_ids)]
    assert stop in tokenizer.decode(stopped.token_ids)


async def test_bad_requests_fail_with_a_clear_message(make_server) -> None:
    server = make_server()
    await server.launch_server()
    with pytest.raises(NotImplementedError, match="text models only"):
        await server.generate([1, 2], {**GREEDY}, "r", image_data=["img"])
    with pytest.raises(ValueError, match="exceeds max_model_len"):
        await server.generate(list(range(5000)), {**GREEDY}, "r")
    with pytest.raises(ValueError, match="unsupported sampling parameter"):
        await server.generate([1, 2], {"best_of": 3}, "r")


async def test_abort_holds_new_requests_until_resume(make_server) -> None:
    server = make_server()
    await server.launch_server()
    prompt = server.tokenizer.encode("hello")
    await server.abort_all_requests()
    waiting = asyncio.ensure_future(server.generate(prompt, {**GREEDY, "max_tokens": 2}, "r"))
    await asyncio.sleep(0.2)
    assert not waiting.done()
    await server.resume_generation()
    assert len((await waiting).token_ids) == 2
    await server.abort_all_requests(reject_request=True)
    with pytest.raises(RuntimeError, match="paused"):
        await server.generate(prompt, {**GREEDY}, "r")
    await server.resume_generation()
    for call in (server.sleep, server.wake_up, server.clear_kv_cache, server.release_kv_cache, server.resume_kv_cache):
        await call()
    await server.start_profile()
    await server.stop_profile()
    assert len(await _greedy(server, prompt, 3)) == 3


def _named_weights(model: torch.nn.Module, noise: float, seed: int = 0):
    generator = torch.Generator().manual_seed(seed)
    for name, tensor in model.state_dict().items():
        yield name, tensor + noise * torch.randn(tensor.shape, generator=generator)


async def test_weight_update_from_the_adapter_changes_generations(make_server, local_handle, monkeypatch) -> None:
    server = make_server()
    await server.launch_server()
    monkeypatch.setenv("RANK", "0")
    adapter = HFServerAdapter(server.config, server.model_config, device_mesh=None)
    handle = local_handle(server)
    adapter._server = handle
    prompt = server.tokenizer.encode("hello world")
    before = await _greedy(server, prompt)
    original = {name: t.clone() for name, t in server.model.state_dict().items()}

    await adapter.resume(["weights"])
    await adapter.update_weights(_named_weights(server.model, noise=0.5), global_steps=7)
    await adapter.resume(["kv_cache"])
    after = await _greedy(server, prompt)
    assert after != before
    output = await server.generate(prompt, {**GREEDY, "max_tokens": 1}, "r")
    assert output.extra_fields["global_steps"] == 7
    assert handle.calls.count("load_weights") >= 1 and handle.calls[-1] == "resume"

    await adapter.update_weights(iter(original.items()), global_steps=8)
    assert await _greedy(server, prompt) == before  # the copy is exact: old weights, old generations


async def test_weight_update_rejects_incomplete_or_foreign_weights(make_server, local_handle, monkeypatch) -> None:
    server = make_server()
    await server.launch_server()
    monkeypatch.setenv("RANK", "0")
    adapter = HFServerAdapter(server.config, server.model_config, device_mesh=None)
    adapter._server = local_handle(server)
    some = list(server.model.state_dict().items())[:2]
    with pytest.raises(RuntimeError, match="sent no values for"):
        await adapter.update_weights(iter(some), global_steps=1)
    with pytest.raises(KeyError, match="no parameter"):
        await adapter.update_weights(iter([("not.a.weight", torch.zeros(1))]), global_steps=1)
    with pytest.raises(NotImplementedError, match=r"lora\.merge=True"):
        await adapter.update_weights(iter(some), peft_config={"r": 8}, base_sync_done=True)


async def test_only_the_replica_leader_ships_weights_but_every_rank_drains(make_server, monkeypatch) -> None:
    server = make_server(tensor_model_parallel_size=2)
    monkeypatch.setenv("RANK", "1")
    adapter = HFServerAdapter(server.config, server.model_config, device_mesh=None)
    assert not adapter.is_leader_rank and adapter.replica_rank == 0
    drained: list[str] = []

    def weights():
        for name, tensor in server.model.state_dict().items():
            drained.append(name)
            yield name, tensor

    await adapter.update_weights(weights(), global_steps=3)  # no server handle is ever looked up
    assert drained == list(server.model.state_dict())
    assert os.environ["RANK"] == "1"
