"""A real tiny transformers model generating through the loop, against the real embedded retrieval service."""

from __future__ import annotations

import json
from types import SimpleNamespace
from typing import Any

import pytest
import torch
from omegaconf import OmegaConf
from verl.experimental.agent_loop.agent_loop import DictConfigWrap
from verl.utils.dataset.rl_dataset import RLHFDataset

from mr_search import prompts
from mr_search.agent.loop import MRSearchAgentLoop
from mr_search.agent.retrieval_client import RetrievalClient, RetrieverConfig
from mr_search.cpu.hf_generate import LocalServerManager
from mr_search_embedded.tiny_model import ensure_tiny_model

pytestmark = pytest.mark.slow


async def test_tiny_model_meta_episode_against_the_embedded_service(
    kit: SimpleNamespace, forced_tokens: Any, retrieval_service: Any
) -> None:
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from mr_search_embedded.world.world import ensure_world

    world = ensure_world()
    with open(world.dev, encoding="utf-8") as handle:
        question = json.loads(handle.readline())
    model_dir = ensure_tiny_model()
    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32).eval()

    client = RetrievalClient(RetrieverConfig(url=retrieval_service(world.corpus), timeout_s=60))
    try:
        first_turn = f"<think> I should search. </think><search> {question['question']} </search>"
        forced = tokenizer(first_turn, add_special_tokens=False)["input_ids"]
        manager = LocalServerManager(forced_tokens(model, forced), tokenizer)  # first turn: a search
        trainer_config = OmegaConf.create(
            {
                "actor_rollout_ref": {"rollout": {"prompt_length": 512, "response_length": 2048, "name": "mr_hf"}},
                "data": {"apply_chat_template_kwargs": {}},
                # room for the forced first turn, whatever the question's length
                "mr_search": {"episode": {"max_new_tokens_per_turn": max(24, len(forced) + 4)}},
            }
        )
        loop = MRSearchAgentLoop(
            trainer_config=DictConfigWrap(trainer_config),
            server_manager=manager,
            tokenizer=tokenizer,
            processor=None,
            dataset_cls=RLHFDataset,
            data_config=DictConfigWrap(trainer_config.data),
            retrieval_client=client,
        )
        row = {
            "raw_prompt": [{"role": "user", "content": prompts.question_prompt(question["question"])}],
            "reward_model": {"ground_truth": {"target": question["golden_answers"]}},
        }
        sampling = {"temperature": 0, "top_p": 1.0, "top_k": -1, "repetition_penalty": 1.0, "logprobs": True}
        output = await loop.run(sampling, **row)

        expected_docs = (await client.retrieve([question["question"]], 3))[0]
        manager.close()
    finally:
        await client.close()

    kit.check(output, 2048)
    assert output.attempt_status == [1, 1, 1]  # all K attempts ran and completed
    assert client.failures == 0
    text = tokenizer.decode(output.response_ids)
    assert text.startswith(first_turn)
    # The passages in the context are exactly what the service returns for the query.
    assert f"<information>{prompts.format_passages(expected_docs)}</information>" in text
    assert output.extra_fields["reward_extra_info"]["searches_at_1"] >= 1.0

    # Token-in/token-out: every freely generated token's log-prob is the model's on the trained sequence.
    sequence = torch.tensor([output.prompt_ids + output.response_ids])
    with torch.no_grad():
        logits = model(input_ids=sequence).logits[0].float()
    prompt_len = len(output.prompt_ids)
    log_probs = torch.log_softmax(logits[prompt_len - 1 : -1], dim=-1)
    recomputed = log_probs[torch.arange(len(output.response_ids)), torch.tensor(output.response_ids)]
    free = [i for i, m in enumerate(output.response_mask) if m == 1 and i >= len(forced)]
    assert len(free) > 24
    recorded = torch.tensor([output.response_logprobs[i] for i in free])
    assert torch.allclose(recorded, recomputed[free], atol=1e-3)
