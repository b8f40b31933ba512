"""The meta-episode with Qwen3's tokenizer layout and chat template: ``<think>`` is one (non-special) token, the
protocol's tags are Qwen3's own thinking tokens, and the tokens trained are the sampled ids with unchanged masks
(docs/qwen3.md#thinking-tokens)."""

from __future__ import annotations

import inspect
from typing import Any

import pytest
from omegaconf import OmegaConf
from verl.experimental.agent_loop.agent_loop import AgentLoopBase, DictConfigWrap
from verl.utils.dataset.rl_dataset import RLHFDataset

from mr_search import prompts
from mr_search.agent.loop import MRSearchAgentLoop
from mr_search.agent.parsing import STOP_STRINGS
from mr_search.ops.qwen3_tokenizer import THINK_END_ID, THINK_ID, protocol_tokenizer

from .conftest import SAMPLING, FakeRetriever, ScriptedServer, row


@pytest.fixture(scope="module")
def qwen3_tokenizer(tmp_path_factory: pytest.TempPathFactory) -> Any:
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(protocol_tokenizer(tmp_path_factory.mktemp("qwen3_tok")))


def make_qwen3_loop(tokenizer: Any, script: list[Any], **template_kwargs: Any) -> tuple[MRSearchAgentLoop, Any]:
    config = OmegaConf.create(
        {
            "actor_rollout_ref": {"rollout": {"prompt_length": 512, "response_length": 4096, "name": "sglang"}},
            "data": {"apply_chat_template_kwargs": dict(template_kwargs)},
            "mr_search": {"episode": {}},
        }
    )
    server = ScriptedServer(tokenizer, script)
    extra = {}
    if "hf_model_type" in inspect.signature(AgentLoopBase.__init__).parameters:
        extra["hf_model_type"] = "qwen3"  # verl picks its Qwen3 Continuous Token builder, as for a Qwen3 download
    loop = MRSearchAgentLoop(
        trainer_config=DictConfigWrap(config),
        server_manager=server,
        tokenizer=tokenizer,
        processor=None,
        dataset_cls=RLHFDataset,
        data_config=DictConfigWrap(config.data),
        retrieval_client=FakeRetriever(),
        **extra,
    )
    return loop, server


def runs(values: list[int], mask: list[int]) -> list[tuple[int, list[int]]]:
    """(mask value, ids) of each maximal run of equal mask values."""
    out: list[tuple[int, list[int]]] = []
    for value, m in zip(values, mask, strict=True):
        if out and out[-1][0] == m:
            out[-1][1].append(value)
        else:
            out.append((m, [value]))
    return out


def test_the_qwen3_layout_makes_think_one_added_token_that_is_not_special(qwen3_tokenizer: Any) -> None:
    tok = qwen3_tokenizer
    assert len(tok) == 151669
    assert tok.convert_tokens_to_ids(["<think>", "</think>"]) == [THINK_ID, THINK_END_ID] == [151667, 151668]
    assert (tok.eos_token, tok.eos_token_id, tok.pad_token_id) == ("<|im_end|>", 151645, 151643)
    assert tok.encode("<think> x </think>", add_special_tokens=False)[0] == THINK_ID
    assert THINK_ID not in tok.all_special_ids and THINK_END_ID not in tok.all_special_ids
    assert tok.decode([THINK_ID], skip_special_tokens=True) == "<think>"
    # The tags the loop stops at stay multi-token, as in Qwen3's real tokenizer: stop strings, not ids.
    assert all(len(tok.encode(tag, add_special_tokens=False)) > 1 for tag in STOP_STRINGS)


def test_qwen3_template_semantics(qwen3_tokenizer: Any) -> None:
    tok = qwen3_tokenizer
    user = [{"role": "user", "content": "hi"}]
    assert tok.apply_chat_template(user, tokenize=False, add_generation_prompt=True).endswith("<|im_start|>assistant\n")
    closed = tok.apply_chat_template(user, tokenize=False, add_generation_prompt=True, enable_thinking=False)
    assert closed.endswith("<|im_start|>assistant\n<think>\n\n</think>\n\n")
    # Re-rendering a conversation drops the reasoning of turns before the last query (Qwen3's template); the agent
    # loop never re-renders, so the model keeps seeing its own earlier <think> blocks.
    history = [*user, {"role": "assistant", "content": "<think>r</think>\n\nans"}, {"role": "user", "content": "u"}]
    assert "<think>" not in tok.apply_chat_template(history, tokenize=False)


@pytest.mark.parametrize("enable_thinking", [None, False])
async def test_a_qwen3_meta_episode_trains_exactly_the_sampled_ids(
    qwen3_tokenizer: Any, enable_thinking: bool | None
) -> None:
    tok = qwen3_tokenizer
    script = [
        "<think> I need the capital. </think> <search> Freedonia capital </search>",
        "<think> The passage says Paris. </think> <answer> Lyon </answer>",
        "<think> Reflect: check again. </think> <answer> Paris </answer>",
        ("<think> only thinking </think>", {"eos": True}),
        "<answer> Paris </answer>",
    ]
    kwargs = {} if enable_thinking is None else {"enable_thinking": enable_thinking}
    loop, server = make_qwen3_loop(tok, script, **kwargs)
    assert "stop" in loop.stop_params and set(loop.stop_params["stop"]) == set(STOP_STRINGS)
    assert THINK_ID not in loop.env.end_ids and THINK_END_ID not in loop.env.end_ids
    data = row(["Paris"])
    output = await loop.run(dict(SAMPLING), **data)

    # The prompt is the chat template's own rendering (verl's Continuous Token builder), thinking switch included.
    expected_prompt = tok.apply_chat_template(data["raw_prompt"], add_generation_prompt=True, tokenize=False, **kwargs)
    assert tok.decode(output.prompt_ids) == expected_prompt
    # Token by token: every mask-1 run is one engine output, unchanged (<think> stays the one sampled id); every
    # mask-0 run is environment text (passages, the corrective note, the reflection turn).
    model_runs = [ids for m, ids in runs(output.response_ids, output.response_mask) if m == 1]
    assert model_runs == [ids for ids in server.outputs if ids]
    assert sum(ids.count(THINK_ID) for ids in model_runs) == 4
    env_runs = [tok.decode(ids) for m, ids in runs(output.response_ids, output.response_mask) if m == 0]
    assert env_runs[0].startswith("\n\n<information>") and "Freedonia capital" in env_runs[0]
    reflection = prompts.reflection_prompt(None)
    opening_close = "<|im_end|>\n<|im_start|>user\n"
    closing = "<|im_end|>\n<|im_start|>assistant\n" + ("<think>\n\n</think>\n\n" if enable_thinking is False else "")
    assert env_runs[1] == env_runs[2] == opening_close + reflection + closing  # the template's turn boundaries
    assert prompts.INVALID_ACTION_MESSAGE in env_runs[3]  # a turn of thinking only is an invalid action
    assert model_runs[3][-1] == tok.eos_token_id  # ... and keeps its eos (a model turn is never re-tokenized)
    # The reward is unchanged: EM of each attempt's last <answer>, thinking tokens or not.
    assert output.attempt_rewards == [0.0, 1.0, 1.0]
    assert sorted(set(output.attempt_ids)) == [0, 1, 2]
