"""Exact token / mask / attempt layouts of whole meta-episodes, driven by a scripted fake server."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest
import torch

from mr_search import contract, prompts
from mr_search.contract import AttemptStatus

IM_OPEN_USER = "<|im_end|>\n<|im_start|>user\n"
IM_OPEN_ASSISTANT = "<|im_end|>\n<|im_start|>assistant\n"


def enc(tokenizer: Any, text: str) -> list[int]:
    return list(tokenizer(text, add_special_tokens=False)["input_ids"])


def information(tokenizer: Any, kit: SimpleNamespace, query: str, topk: int = 3) -> tuple[list[int], str]:
    passages = prompts.format_passages([kit.passage(query, i) for i in range(topk)])
    text = f"\n\n<information>{passages}</information>\n\n"
    ids = enc(tokenizer, "\n\n<information>") + enc(tokenizer, passages) + enc(tokenizer, "</information>\n\n")
    return ids, text


def reflection(tokenizer: Any, body: str = prompts.REFLECTION_PROMPT) -> tuple[list[int], str]:
    ids = enc(tokenizer, IM_OPEN_USER) + enc(tokenizer, body) + enc(tokenizer, "<|im_end|>\n<|im_start|>assistant\n")
    return ids, IM_OPEN_USER + body + IM_OPEN_ASSISTANT


async def test_full_k3_meta_episode_layout(kit: SimpleNamespace, tokenizer: Any) -> None:
    turns = [
        "<think>need facts</think>\n<search>Freedonia capital</search>",
        "<answer>Lyon</answer>",
        "<think>check again</think><answer>Paris</answer>",
        "<answer>the Paris</answer>",
    ]
    loop, server, retriever = kit.make_loop(list(turns))
    output = await loop.run(dict(kit.sampling), **kit.row(["Paris"]))

    info_ids, info_text = information(tokenizer, kit, "Freedonia capital")
    refl_ids, refl_text = reflection(tokenizer)
    m = [enc(tokenizer, t) for t in turns]
    pieces = [  # (ids, mask, attempt)
        (m[0], 1, 0),
        (info_ids, 0, 0),
        (m[1], 1, 0),
        (refl_ids, 0, 1),
        (m[2], 1, 1),
        (refl_ids, 0, 2),
        (m[3], 1, 2),
    ]
    assert output.response_ids == [t for ids, _, _ in pieces for t in ids]
    assert output.response_mask == [mask for ids, mask, _ in pieces for _ in ids]
    assert output.attempt_ids == [attempt for ids, _, attempt in pieces for _ in ids]
    assert output.attempt_rewards == [0.0, 1.0, 1.0]
    assert output.attempt_status == [AttemptStatus.COMPLETE] * 3
    assert output.reward_score == 1.0

    prompt_text = tokenizer.apply_chat_template(kit.row()["raw_prompt"], tokenize=False, add_generation_prompt=True)
    expected_text = prompt_text + turns[0] + info_text + turns[1] + refl_text + turns[2] + refl_text + turns[3]
    assert tokenizer.decode(output.prompt_ids + output.response_ids) == expected_text

    # Model log-probs are kept exactly, aligned with their tokens; environment tokens get 0.
    expected_lp = []
    for ids, mask, _ in pieces:
        expected_lp += [-(i + 1) / 100 for i in range(len(ids))] if mask else [0.0] * len(ids)
    assert output.response_logprobs == expected_lp

    # Each call saw exactly the context so far (token-in/token-out, nothing re-tokenized).
    full = output.prompt_ids + output.response_ids
    starts = [0, len(m[0]) + len(info_ids), None, None]
    starts[2] = starts[1] + len(m[1]) + len(refl_ids)
    starts[3] = starts[2] + len(m[2]) + len(refl_ids)
    for call, start in zip(server.calls, starts, strict=True):
        assert call["prompt_ids"] == full[: len(output.prompt_ids) + start]
        assert call["params"]["stop_token_ids"] == tokenizer.convert_tokens_to_ids(["</search>", "</answer>"])
        assert call["params"]["include_stop_str_in_output"] is True
        assert call["params"]["max_tokens"] == 1024
        assert call["params"]["temperature"] == 1.0
    assert len({call["request_id"] for call in server.calls}) == 1  # sticky session
    assert retriever.queries == [("Freedonia capital", 3)]

    info = output.extra_fields["reward_extra_info"]
    assert info["em_at_1"] == 0.0 and info["em_at_2"] == 1.0 and info["em_at_3"] == 1.0
    assert info["reflection_gain"] == 1.0
    assert info["searches_at_1"] == 1.0 and info["searches_at_2"] == 0.0
    assert info["invalid_turns"] == 0.0 and info["truncated"] == 0.0
    assert output.extra_fields["min_global_steps"] == 7 and output.extra_fields["max_global_steps"] == 7
    assert [a["answer"] for a in output.extra_fields["mr_search_attempts"]] == ["Lyon", "Paris", "the Paris"]
    kit.check(output, 4096)


async def test_as_dict_carries_the_contract_columns(kit: SimpleNamespace) -> None:
    loop, _, _ = kit.make_loop(["<answer>Lyon</answer>", "<answer>Paris</answer>", "<search>x</search>"])
    output = await loop.run(dict(kit.sampling), **kit.row(["Paris"]))
    columns = output.as_dict()
    ids = columns[contract.ATTEMPT_IDS]
    assert ids.dtype == torch.int64 and ids.shape == columns["responses"].shape == columns["response_mask"].shape
    assert columns["rollout_log_probs"].shape == ids.shape
    assert columns[contract.ATTEMPT_REWARDS].tolist() == [0.0, 1.0, 0.0]
    assert columns[contract.ATTEMPT_REWARDS].dtype == torch.float32
    assert columns[contract.ATTEMPT_STATUS].tolist() == [1, 1, 1]
    assert columns["rm_scores"][-1].item() == 0.0  # verl's slot holds the final attempt's reward
    assert set(ids.tolist()) == {0, 1, 2}
    assert "attempt_ids" not in columns and columns["extra_fields"]["max_global_steps"] == 7


async def test_k1_is_a_single_search_r1_episode(kit: SimpleNamespace, tokenizer: Any) -> None:
    turns = ["<search>Freedonia</search>", "<answer>Paris</answer>"]
    loop, server, _ = kit.make_loop(list(turns), {"attempts": 1})
    output = await loop.run(dict(kit.sampling), **kit.row(["Paris"]))
    info_ids, _ = information(tokenizer, kit, "Freedonia")
    assert output.response_ids == enc(tokenizer, turns[0]) + info_ids + enc(tokenizer, turns[1])
    assert set(output.attempt_ids) == {0}
    assert output.attempt_rewards == [1.0] and output.attempt_status == [AttemptStatus.COMPLETE]
    assert output.reward_score == 1.0
    assert len(server.calls) == 2
    assert "user" not in tokenizer.decode(output.response_ids)  # no reflection turn anywhere
    assert output.extra_fields["reward_extra_info"]["reflection_gain"] == 0.0


async def test_all_attempts_run_after_a_correct_answer_by_default(kit: SimpleNamespace) -> None:
    loop, server, _ = kit.make_loop(["<answer>Paris</answer>"] * 3)
    output = await loop.run(dict(kit.sampling), **kit.row(["Paris"]))
    assert len(server.calls) == 3
    assert output.attempt_rewards == [1.0, 1.0, 1.0]
    assert prompts.FEEDBACK_RIGHT not in loop.tokenizer.decode(output.response_ids)


async def test_early_stop_and_outcome_feedback_options(kit: SimpleNamespace, tokenizer: Any) -> None:
    loop, server, _ = kit.make_loop(
        ["<answer>Lyon</answer>", "<answer>Paris</answer>", "<answer>x</answer>"],
        {"early_stop_when_correct": True, "outcome_feedback": True},
    )
    output = await loop.run(dict(kit.sampling), **kit.row(["Paris"]))
    assert len(server.calls) == 2
    # The skipped attempt carries the solved outcome: its status says so, and EM at 3 is the standing answer's.
    assert output.attempt_status == [AttemptStatus.COMPLETE, AttemptStatus.COMPLETE, AttemptStatus.CARRIED]
    assert output.attempt_rewards == [0.0, 1.0, 0.0]
    assert output.extra_fields["reward_extra_info"]["em_at_3"] == 1.0
    text = tokenizer.decode(output.response_ids)
    assert prompts.FEEDBACK_WRONG + prompts.REFLECTION_PROMPT in text
    assert output.reward_score == 1.0


async def test_custom_reflection_template(kit: SimpleNamespace, tokenizer: Any) -> None:
    template = "Think again about Freedonia."
    loop, _, _ = kit.make_loop(
        ["<answer>a</answer>", "<answer>b</answer>"], {"attempts": 2, "reflection_template": template}
    )
    output = await loop.run(dict(kit.sampling), **kit.row())
    assert reflection(tokenizer, template)[1] in tokenizer.decode(output.response_ids)
    assert prompts.REFLECTION_PROMPT not in tokenizer.decode(output.response_ids)


async def test_the_reflection_turn_restates_the_question_when_asked(kit: SimpleNamespace, tokenizer: Any) -> None:
    loop, _, _ = kit.make_loop(
        ["<answer>a</answer>", "<answer>b</answer>", "<answer>c</answer>"], {"reflection_restates_question": True}
    )
    output = await loop.run(dict(kit.sampling), **kit.row())
    text = tokenizer.decode(output.response_ids)
    restated = (
        prompts.REFLECTION_PROMPT
        + prompts.QUESTION_LINE
        + prompts.question_of_prompt(kit.row()["raw_prompt"][0]["content"])
    )
    assert text.count(restated) == 2, "both reflection turns end with the question's line"
    assert output.attempt_rewards == [0.0, 0.0, 0.0]
    bad = {**kit.row(), "raw_prompt": [{"role": "user", "content": "Where is Paris?"}]}
    with pytest.raises(ValueError, match=r"no 'Question: \.\.\.' line"):
        await loop.run(dict(kit.sampling), **bad)


async def test_more_turns_per_attempt_and_turn_limit(kit: SimpleNamespace) -> None:
    searches = [f"<search>q{i}</search>" for i in range(6)]
    loop, server, retriever = kit.make_loop(
        [*searches, "<answer>Paris</answer>"], {"attempts": 1, "max_turns_per_attempt": 5}
    )
    output = await loop.run(dict(kit.sampling), **kit.row())
    assert len(server.calls) == 5  # the attempt ends after its 5th turn
    assert [q for q, _ in retriever.queries] == ["q0", "q1", "q2", "q3"]  # the last search is never read
    assert output.attempt_rewards == [0.0]
    assert output.extra_fields["reward_extra_info"]["searches_at_1"] == 5.0


async def test_last_turn_search_is_not_run_even_when_another_attempt_follows(kit: SimpleNamespace) -> None:
    script = ["<search>a</search>", "<search>b</search>", "<search>c</search>", "<answer>Paris</answer>"]
    loop, server, retriever = kit.make_loop(script, {"attempts": 2})
    output = await loop.run(dict(kit.sampling), **kit.row())
    assert [q for q, _ in retriever.queries] == ["a", "b"]  # attempt 1 has no turn left to read c's passages
    assert output.attempt_rewards == [0.0, 1.0]
    assert len(server.calls) == 4


async def test_failed_search_says_so_and_counts(kit: SimpleNamespace, tokenizer: Any) -> None:
    loop, _, _ = kit.make_loop(
        ["<search>q</search>", "<answer>Paris</answer>"], {"attempts": 1}, retriever=kit.FakeRetriever(fail=True)
    )
    output = await loop.run(dict(kit.sampling), **kit.row())
    assert f"<information>{prompts.SEARCH_FAILED_MESSAGE}</information>" in tokenizer.decode(output.response_ids)
    assert output.extra_fields["reward_extra_info"]["search_failures"] == 1.0
    assert output.attempt_rewards == [1.0]


async def test_previous_attempt_context_hides_older_attempts(kit: SimpleNamespace) -> None:
    loop, server, _ = kit.make_loop(
        ["<answer>one</answer>", "<answer>two</answer>", "<answer>three</answer>"], {"context": "previous_attempt"}
    )
    output = await loop.play(dict(kit.sampling), **kit.row())
    prompt_len = len(output.prompt_ids)
    third = server.calls[2]["prompt_ids"]
    assert third[:prompt_len] == output.prompt_ids  # the question stays
    first_turn = server.outputs[0]
    assert third[prompt_len : prompt_len + len(first_turn)] != first_turn
    start_attempt_2 = output.attempt_ids.index(1)
    assert third[prompt_len:] == output.response_ids[start_attempt_2 : len(third) - prompt_len + start_attempt_2]
    assert len(output.response_ids) == len(output.attempt_ids)  # the whole meta-episode, as evaluation reads it


async def test_context_limit_drops_oldest_tokens_never_the_question(kit: SimpleNamespace) -> None:
    script = ["<search>a</search>", "<search>b</search>", "<answer>Paris</answer>"]
    episode = {"attempts": 1, "max_new_tokens_per_turn": 16}
    loop, full_server, _ = kit.make_loop(list(script), episode)
    output_full = await loop.run(dict(kit.sampling), **kit.row())
    prompt_len = len(output_full.prompt_ids)
    room = 40
    limit = prompt_len + 16 + room
    loop, server, _ = kit.make_loop(list(script), {**episode, "max_context_tokens": limit})
    output = await loop.play(dict(kit.sampling), **kit.row())
    assert output.response_ids == output_full.response_ids  # the whole meta-episode
    assert len(output_full.response_ids) > room  # the limit really bites
    for call, full_call in zip(server.calls, full_server.calls, strict=True):
        seen = full_call["prompt_ids"][prompt_len:]
        assert call["prompt_ids"] == output.prompt_ids + (seen[-room:] if seen else [])
        assert len(call["prompt_ids"]) + call["params"]["max_tokens"] <= limit


async def test_stop_params_per_backend(kit: SimpleNamespace, tokenizer: Any, split_tokenizer: Any) -> None:
    # One-token tags (the tiny policy's tokenizer): stop token ids only, the tag's token kept in the output.
    tag_ids = [tokenizer.convert_tokens_to_ids(t) for t in ("</search>", "</answer>")]
    for name, skip in (("sglang", False), ("sglang", True)):
        loop, server, _ = kit.make_loop(["<answer>x</answer>"], {"attempts": 1}, name=name, skip_tokenizer_init=skip)
        await loop.run(dict(kit.sampling), **kit.row())
        assert (
            server.calls[0]["params"]
            == {
                **server.calls[0]["params"],
                "stop_token_ids": tag_ids,
                "no_stop_trim": True,
            }
            and "stop" not in server.calls[0]["params"]
        )
    loop, server, _ = kit.make_loop(["<answer>x</answer>"], {"attempts": 1}, name="vllm")
    await loop.run(dict(kit.sampling), **kit.row())
    assert server.calls[0]["params"]["stop_token_ids"] == tag_ids and "stop" not in server.calls[0]["params"]
    # The knob off: strings, as for a tokenizer that splits the tags.
    for episode, tok in (({"attempts": 1, "stop_token_ids": False}, tokenizer), ({"attempts": 1}, split_tokenizer)):
        for name, keep in (("vllm", "include_stop_str_in_output"), ("sglang", "no_stop_trim")):
            loop, server, _ = kit.make_loop(["<answer>x</answer>"], episode, tok=tok, name=name)
            await loop.run(dict(kit.sampling), **kit.row())
            params = server.calls[0]["params"]
            assert params["stop"] == ["</search>", "</answer>"] and params[keep] is True
            assert "stop_token_ids" not in params
    # Split tags and SGLang without a tokenizer: nothing to stop at; the loop cuts the turn itself.
    loop, server, _ = kit.make_loop(
        ["<answer>x</answer> junk after"], {"attempts": 1}, tok=split_tokenizer, name="sglang", skip_tokenizer_init=True
    )
    output = await loop.run(dict(kit.sampling), **kit.row())
    assert not {"stop", "stop_token_ids"} & set(server.calls[0]["params"])
    assert loop.tokenizer.decode(output.response_ids) == "<answer>x</answer>"


async def test_a_raising_search_client_does_not_end_the_meta_episode(kit: SimpleNamespace, tokenizer: Any) -> None:
    class Broken:
        async def search(self, query: str, topk: int) -> Any:
            raise ConnectionError("retriever gone")

    loop, _, _ = kit.make_loop(["<search>q</search>", "<answer>Paris</answer>"], {"attempts": 1}, retriever=Broken())
    output = await loop.run(dict(kit.sampling), **kit.row())
    assert prompts.SEARCH_FAILED_MESSAGE in tokenizer.decode(output.response_ids)
    assert output.attempt_rewards == [1.0]
    assert output.extra_fields["reward_extra_info"]["search_failures"] == 1.0


async def test_k1_reward_equals_verls_custom_reward_function(kit: SimpleNamespace, tokenizer: Any) -> None:
    """The K = 1 baseline scored by verl's reward manager (decoded response) agrees with the loop."""
    from mr_search.reward import compute_score

    scripts = [
        ["<search>Paris</search>", "<answer>Paris</answer>"],  # passages mention Paris; the answer decides
        ["<search>q</search>", "<answer>Lyon</answer>"],
        ["<search>a</search>", "<search>b</search>", "<search>c</search>"],  # no answer at all
        ["nothing", "<answer> the paris </answer>"],
    ]
    for script in scripts:
        loop, _, _ = kit.make_loop(script, {"attempts": 1})
        output = await loop.run(dict(kit.sampling), **kit.row(["Paris"]))
        text = tokenizer.decode(output.response_ids, skip_special_tokens=True)  # as verl's naive manager does
        result = compute_score("embedded_1hop", text, {"target": ["Paris"]}, extra_info={})
        assert result["score"] == output.reward_score == output.attempt_rewards[0], script
