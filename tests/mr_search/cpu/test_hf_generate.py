"""Local transformers generation of one turn, and the local server manager that batches concurrent turns."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
import torch

from mr_search import prompts
from mr_search.agent.tokens import single_token_stops
from mr_search.cpu.hf_generate import LocalServerManager, generate_turn
from mr_search_embedded.tiny_model import TinyModelConfig, build_model, build_tokenizer

TEXTS = [
    prompts.question_prompt("What is the capital of Freedonia?"),
    "<search> Paris </search> <answer> Lyon </answer>",
]


def _tiny(root: Path, tag_tokens: bool) -> tuple[Any, Any]:
    tokenizer = build_tokenizer(TEXTS * 3, root, vocab_size=600, tag_tokens=tag_tokens)
    config = TinyModelConfig(hidden_size=64, intermediate_size=128, num_attention_heads=4, num_key_value_heads=2)
    model = build_model(root, tokenizer, config)
    return model.eval(), tokenizer


@pytest.fixture(scope="module")
def tiny(tmp_path_factory: pytest.TempPathFactory) -> tuple[Any, Any]:
    return _tiny(tmp_path_factory.mktemp("tiny_tags"), tag_tokens=True)


@pytest.fixture(scope="module")
def tiny_split(tmp_path_factory: pytest.TempPathFactory) -> tuple[Any, Any]:
    return _tiny(tmp_path_factory.mktemp("tiny_split"), tag_tokens=False)


def _prompt(tokenizer: Any) -> list[int]:
    return tokenizer(prompts.question_prompt("What is the capital of Freedonia?"))["input_ids"]


def test_greedy_turn_is_deterministic_and_logprobs_are_the_models(tiny: tuple[Any, Any]) -> None:
    model, tokenizer = tiny
    prompt = _prompt(tokenizer)
    params = {"max_tokens": 12, "temperature": 0, "top_p": 1.0, "top_k": -1, "logprobs": True, "ignore_eos": True}
    first = generate_turn(model, tokenizer, prompt, params)
    second = generate_turn(model, tokenizer, prompt, params)
    assert first.token_ids == second.token_ids and len(first.token_ids) == 12
    assert first.finish_reason == "length"
    with torch.no_grad():  # teacher-forced recomputation over the whole sequence
        logits = model(input_ids=torch.tensor([prompt + first.token_ids])).logits[0].float()
    recomputed = torch.log_softmax(logits[len(prompt) - 1 : -1], dim=-1)
    expected = recomputed[torch.arange(12), torch.tensor(first.token_ids)]
    assert torch.allclose(torch.tensor(first.log_probs), expected, atol=1e-4)
    assert first.token_ids == recomputed.argmax(-1).tolist()


def test_sampling_respects_max_tokens_and_top_k(tiny: tuple[Any, Any]) -> None:
    model, tokenizer = tiny
    torch.manual_seed(0)
    out = generate_turn(
        model, tokenizer, _prompt(tokenizer), {"max_tokens": 9, "temperature": 1.0, "top_p": 0.9, "ignore_eos": True}
    )
    assert len(out.token_ids) == 9 and all(0 <= t < len(tokenizer) for t in out.token_ids)
    assert all(lp <= 0 for lp in out.log_probs)
    greedy_top1 = generate_turn(model, tokenizer, _prompt(tokenizer), {"max_tokens": 5, "top_k": 1, "ignore_eos": True})
    greedy = generate_turn(
        model, tokenizer, _prompt(tokenizer), {"max_tokens": 5, "temperature": 0, "ignore_eos": True}
    )
    assert greedy_top1.token_ids == greedy.token_ids


def test_stops_at_a_single_token_tag_by_id(tiny: tuple[Any, Any], forced_tokens: Any) -> None:
    model, tokenizer = tiny
    (close,) = single_token_stops(tokenizer, ["</search>"])
    forced = tokenizer("<search> Paris</search> more text", add_special_tokens=False)["input_ids"]
    assert close in forced
    out = generate_turn(
        forced_tokens(model, forced), tokenizer, _prompt(tokenizer), {"max_tokens": 30, "stop": ["</search>"]}
    )
    assert out.token_ids == forced[: forced.index(close) + 1]
    assert out.finish_reason == "stop"
    assert tokenizer.decode(out.token_ids).endswith("</search>")


def test_stops_at_a_multi_token_tag(tiny_split: tuple[Any, Any], forced_tokens: Any) -> None:
    model, tokenizer = tiny_split
    assert single_token_stops(tokenizer, ["</answer>"]) == ()  # several pieces in this tokenizer
    forced = tokenizer("<answer> Lyon</answer> and then more", add_special_tokens=False)["input_ids"]
    out = generate_turn(
        forced_tokens(model, forced),
        tokenizer,
        _prompt(tokenizer),
        {"max_tokens": 40, "stop": ["</search>", "</answer>"]},
    )
    text = tokenizer.decode(out.token_ids)
    assert "</answer>" in text and "</answer>" not in tokenizer.decode(out.token_ids[:-1])
    assert out.token_ids == forced[: len(out.token_ids)]


def test_stops_at_eos_unless_ignored(tiny: tuple[Any, Any], forced_tokens: Any) -> None:
    model, tokenizer = tiny
    forced = [*tokenizer("Paris", add_special_tokens=False)["input_ids"], tokenizer.eos_token_id, 5, 6]
    out = generate_turn(forced_tokens(model, forced), tokenizer, _prompt(tokenizer), {"max_tokens": 10})
    assert out.token_ids[-1] == tokenizer.eos_token_id and out.finish_reason == "stop"


async def test_local_server_manager_batches_concurrent_turns(tiny: tuple[Any, Any]) -> None:
    model, tokenizer = tiny
    manager = LocalServerManager(model, tokenizer, max_batch_size=8, global_steps=3)
    prompt = _prompt(tokenizer)
    prompts_ = [prompt, prompt[:-3], prompt + prompt[:5], prompt[5:]]
    params = {"max_tokens": 6, "temperature": 0, "ignore_eos": True, "logprobs": True}
    outputs = await asyncio.gather(
        *(manager.generate(f"r{i}", prompt_ids=p, sampling_params=dict(params)) for i, p in enumerate(prompts_))
    )
    manager.close()
    assert max(manager.batches) > 1  # decoded together
    for p, output in zip(prompts_, outputs, strict=True):
        alone = generate_turn(model, tokenizer, p, params)
        assert output.token_ids == alone.token_ids  # left padding does not change greedy results
        assert torch.allclose(torch.tensor(output.log_probs), torch.tensor(alone.log_probs), atol=1e-4)
        assert output.extra_fields["global_steps"] == 3 and output.stop_reason == "completed"


async def test_local_server_manager_rejects_what_it_cannot_do(tiny: tuple[Any, Any]) -> None:
    model, tokenizer = tiny
    manager = LocalServerManager(model, tokenizer)
    with pytest.raises(ValueError, match="text only"):
        await manager.generate("r", prompt_ids=[1, 2], sampling_params={}, image_data=[object()])
    with pytest.raises(ValueError, match="unsupported sampling parameter"):
        await manager.generate("r", prompt_ids=[1, 2], sampling_params={"beam_width": 4})
    manager.close()


async def test_a_failing_batch_fails_its_own_callers_and_the_next_batch_is_served(tiny: tuple[Any, Any]) -> None:
    model, tokenizer = tiny
    manager = LocalServerManager(model, tokenizer, max_batch_size=4)
    real_run = manager._run
    calls = 0

    def flaky(batch: list[Any]) -> list[Any]:
        nonlocal calls
        calls += 1
        if calls == 1:
            raise RuntimeError("out of memory while decoding")
        return real_run(batch)

    manager._run = flaky  # type: ignore[method-assign]
    params = {"max_tokens": 3, "temperature": 0}
    try:
        first = await asyncio.gather(
            *(manager.generate(f"r{i}", prompt_ids=_prompt(tokenizer), sampling_params=params) for i in range(2)),
            return_exceptions=True,
        )
        assert all(isinstance(e, RuntimeError) and "out of memory" in str(e) for e in first)
        again = await manager.generate("r2", prompt_ids=_prompt(tokenizer), sampling_params=params)
        assert len(again.token_ids) == 3
    finally:
        manager.close()
