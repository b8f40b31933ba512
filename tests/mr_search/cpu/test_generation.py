"""Batched sampling of the mr_hf rollout: batching must not change results, log-probs must be the model's."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from mr_search.cpu.generation import SamplingParams, generate_batch


@pytest.fixture(scope="module")
def model_and_tokenizer(tiny_model_dir: Path):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(tiny_model_dir)
    model = AutoModelForCausalLM.from_pretrained(tiny_model_dir, dtype=torch.float32).eval()
    return model, tokenizer


def _run(model, tokenizer, prompts, params, **kwargs):
    return generate_batch(
        model,
        prompts,
        params,
        eos_token_ids=[tokenizer.eos_token_id],
        pad_token_id=tokenizer.pad_token_id,
        decode=lambda ids: tokenizer.decode(ids, skip_special_tokens=False),
        **kwargs,
    )


def test_batched_greedy_equals_one_at_a_time_with_different_prompt_lengths(model_and_tokenizer) -> None:
    model, tokenizer = model_and_tokenizer
    prompts = [tokenizer.encode(t) for t in ("hello world", "<search> the quick brown fox jumps", "0")]
    params = [SamplingParams(max_new_tokens=n, temperature=0.0) for n in (12, 7, 12)]
    batched = _run(model, tokenizer, prompts, params)
    for prompt, p, got in zip(prompts, params, batched, strict=True):
        (alone,) = _run(model, tokenizer, [prompt], [p])
        assert got.token_ids == alone.token_ids
        assert got.log_probs == pytest.approx(alone.log_probs, abs=1e-4)
    assert [len(g.token_ids) for g in batched] == [12, 7, 12]
    assert all(g.finish_reason == "length" for g in batched)


@pytest.mark.parametrize("temperature", [1.0, 0.7])
def test_log_probs_are_the_models_at_the_sampling_temperature(model_and_tokenizer, temperature: float) -> None:
    model, tokenizer = model_and_tokenizer
    prompt = tokenizer.encode("hello world")
    (got,) = _run(model, tokenizer, [prompt], [SamplingParams(max_new_tokens=10, temperature=temperature, seed=3)])
    with torch.no_grad():
        logits = model(torch.tensor([prompt + got.token_ids])).logits[0].float()
    reference = torch.log_softmax(logits / temperature, dim=-1)
    expected = [float(reference[len(prompt) - 1 + i, t]) for i, t in enumerate(got.token_ids)]
    assert got.log_probs == pytest.approx(expected, abs=1e-4)


def test_seeded_sampling_repeats_and_top_k_one_is_greedy(model_and_tokenizer) -> None:
    model, tokenizer = model_and_tokenizer
    prompt = tokenizer.encode("the lazy dog")
    sampled = [SamplingParams(max_new_tokens=10, temperature=1.0, top_p=0.9, seed=11)] * 2
    first, second = _run(model, tokenizer, [prompt, prompt], sampled)
    assert first.token_ids == second.token_ids
    (greedy,) = _run(model, tokenizer, [prompt], [SamplingParams(max_new_tokens=10, temperature=0.0)])
    (top1,) = _run(model, tokenizer, [prompt], [SamplingParams(max_new_tokens=10, temperature=1.0, top_k=1)])
    assert top1.token_ids == greedy.token_ids


def test_stop_string_ends_right_after_the_token_that_completes_it(model_and_tokenizer) -> None:
    model, tokenizer = model_and_tokenizer
    prompt = tokenizer.encode("hello world")
    (free,) = _run(model, tokenizer, [prompt], [SamplingParams(max_new_tokens=16, temperature=1.0, seed=5)])
    decode = tokenizer.decode
    # A stop string the model will produce: the text of tokens 3-4 of its unconstrained output.
    stop = decode(free.token_ids[3:5])
    assert stop
    (stopped,) = _run(
        model, tokenizer, [prompt], [SamplingParams(max_new_tokens=16, temperature=1.0, seed=5, stop=(stop,))]
    )
    assert stopped.finish_reason == "stop"
    assert stopped.token_ids == free.token_ids[: len(stopped.token_ids)]
    assert stop in decode(stopped.token_ids)
    assert stop not in decode(stopped.token_ids[:-1])


def test_eos_and_abort_end_requests(model_and_tokenizer) -> None:
    model, tokenizer = model_and_tokenizer
    prompt = tokenizer.encode("hello")
    (free,) = _run(model, tokenizer, [prompt], [SamplingParams(max_new_tokens=8, temperature=0.0)])
    first = free.token_ids[0]
    (stopped,) = _run(
        model, tokenizer, [prompt], [SamplingParams(max_new_tokens=8, temperature=0.0, stop_token_ids=(first,))]
    )
    assert stopped.token_ids == [first] and stopped.finish_reason == "stop"
    (aborted,) = _run(model, tokenizer, [prompt], [SamplingParams(max_new_tokens=8)], should_abort=lambda: True)
    assert aborted.finish_reason == "abort" and aborted.token_ids == []


def test_request_parameters_are_checked_with_the_valid_choices_named() -> None:
    params = SamplingParams.from_request(
        {
            "max_tokens": 5,
            "temperature": 0,
            "top_p": 1.0,
            "top_k": -1,
            "repetition_penalty": 1.0,
            "logprobs": True,
            "stop": "</search>",
        },
        default_max_new_tokens=99,
    )
    assert params.max_new_tokens == 5 and params.greedy and params.stop == ("</search>",)
    assert SamplingParams.from_request({}, default_max_new_tokens=99).max_new_tokens == 99
    with pytest.raises(ValueError, match=r"unsupported sampling parameter\(s\) \['beam_width'\]; supported: .*top_p"):
        SamplingParams.from_request({"beam_width": 2}, default_max_new_tokens=8)
    with pytest.raises(ValueError, match=r"repetition_penalty=1\.2 is not supported; use 1\.0"):
        SamplingParams.from_request({"repetition_penalty": 1.2}, default_max_new_tokens=8)
    with pytest.raises(ValueError, match=r"top_p=0.0: must lie in \(0, 1\]"):
        SamplingParams(max_new_tokens=1, top_p=0.0)
