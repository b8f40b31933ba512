"""The agent loop's token path through verl's agent-loop base, token by token: what any verl the plugin runs on must
keep (docs/verl-next.md). The trained tokens are the sampled ids, the environment's are the encoder's, the masks say
which is which, and ``as_dict()`` hands verl exactly those."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from verl.experimental.agent_loop.agent_loop import AgentLoopBase

from mr_search import prompts


def test_the_base_class_gives_the_hooks_the_loop_uses() -> None:
    # verl 0.9's Continuous Token path: the prompt comes from the builder, the chat-template arguments from the data
    # config. A verl without them fails here first, with the name of what is missing.
    assert callable(getattr(AgentLoopBase, "ct_build_initial_tokens", None)), "verl has no ct_build_initial_tokens"
    assert "system_prompt" not in vars(AgentLoopBase)  # the pre-0.9 prompt-splicing attribute is gone


async def test_each_token_is_the_sampled_id_or_the_encoders_with_its_mask(
    kit: SimpleNamespace, split_tokenizer: Any
) -> None:
    script = [
        "<think> a </think> <search> Freedonia </search>",
        "<answer> Lyon </answer>",
        "junk",
        "<answer>Paris</answer>",
    ]
    loop, server, retriever = kit.make_loop(script, episode={"attempts": 2}, tok=split_tokenizer)
    data = kit.row(["Paris"])
    output = await loop.run(dict(kit.sampling), **data)
    env = loop.env

    passages = prompts.format_passages([kit.passage(q, i)["document"] for q, k in retriever.queries for i in range(k)])
    reflection = env.user_turn(prompts.reflection_prompt(None), after_eos=False)
    expected: list[tuple[list[int], int]] = [
        (server.outputs[0], 1),
        (env.observation(passages, loop.episode.max_information_tokens), 0),
        (server.outputs[1], 1),
        (reflection, 0),
        (server.outputs[2], 1),
        (env.note(prompts.INVALID_ACTION_MESSAGE), 0),
        (server.outputs[3], 1),
    ]
    ids = [i for piece, _ in expected for i in piece]
    mask = [m for piece, m in expected for _ in piece]
    assert output.response_ids == ids
    assert output.response_mask == mask
    assert output.prompt_ids == split_tokenizer.apply_chat_template(
        data["raw_prompt"], add_generation_prompt=True, tokenize=True, return_dict=False
    )
    row = output.as_dict()  # what verl's worker stores: the same ids and the mask as its loss mask
    assert row["responses"].tolist() == ids and row["response_mask"].tolist() == mask
    assert row["prompts"].tolist() == output.prompt_ids
    assert output.attempt_rewards == [0.0, 1.0]
