"""Fixtures for the agent-loop tests: real local tokenizers with a chat template, a scripted fake
server manager (verl's own test pattern) and a fake retrieval client."""

from __future__ import annotations

import math
from collections.abc import Callable
from types import SimpleNamespace
from typing import Any

import pytest
from omegaconf import OmegaConf
from verl.experimental.agent_loop.agent_loop import DictConfigWrap
from verl.utils.dataset.rl_dataset import RLHFDataset
from verl.workers.rollout.replica import TokenOutput

from mr_search import prompts
from mr_search.agent.config import EpisodeConfig
from mr_search.agent.loop import MRSearchAgentLoop
from mr_search.agent.retrieval_client import SearchOutcome
from mr_search.contract import AttemptStatus
from mr_search_embedded.tiny_model import build_tokenizer

QUESTION = "What is the capital of Freedonia?"
CORPUS_WORDS = (
    "Paris Lyon Freedonia capital city of the country river Marx brothers Doc Title think search answer "
    "information reflect try again query unclosed trailing junk fake only thinking Zoë café 東京 multi line"
)


def _texts() -> list[str]:
    return [
        prompts.question_prompt(QUESTION),
        prompts.reflection_prompt(True),
        prompts.reflection_prompt(False),
        prompts.INVALID_ACTION_MESSAGE,
        prompts.SEARCH_FAILED_MESSAGE,
        CORPUS_WORDS,
        "<think> a </think> <search> q </search> <answer> x </answer> <information> Doc 1(Title: P) </information>",
    ] * 4


@pytest.fixture(scope="session")
def tokenizer(tmp_path_factory: pytest.TempPathFactory) -> Any:
    """Tags are single tokens (the tiny policy's tokenizer)."""
    return build_tokenizer(_texts(), tmp_path_factory.mktemp("tok_tags"), vocab_size=700, tag_tokens=True)


@pytest.fixture(scope="session")
def split_tokenizer(tmp_path_factory: pytest.TempPathFactory) -> Any:
    """Tags are split into several byte-level pieces, as real tokenizers do."""
    return build_tokenizer(_texts(), tmp_path_factory.mktemp("tok_split"), vocab_size=700, tag_tokens=False)


class ScriptedServer:
    """Fake server manager: answers each ``generate`` call with the next scripted text.

    Each scripted item is a text, or (text, extra) where extra may set ``eos`` (append eos),
    ``pad_to`` (repeat the last token up to that many tokens), ``stop_reason`` (verl's field; default
    "completed", as verl's vLLM server reports) and ``finish_reason`` (the CPU backend's extra field).
    Log-probs are -(position+1)/100 so tests can check they stay aligned with their tokens.
    """

    def __init__(self, tokenizer: Any, script: list[Any], global_steps: int | None = 7) -> None:
        self.tokenizer = tokenizer
        self.script = list(script)
        self.calls: list[dict[str, Any]] = []
        self.outputs: list[list[int]] = []
        self.global_steps = global_steps

    async def generate(self, request_id: str, *, prompt_ids: list[int], sampling_params: dict[str, Any], **kw: Any):
        self.calls.append({"request_id": request_id, "prompt_ids": list(prompt_ids), "params": dict(sampling_params)})
        item = self.script.pop(0) if self.script else "<answer>fallback</answer>"
        text, extra = (item, {}) if isinstance(item, str) else item
        ids = list(self.tokenizer(text, add_special_tokens=False)["input_ids"]) if text else []
        if extra.get("eos"):
            ids.append(self.tokenizer.eos_token_id)
        if "pad_to" in extra:
            ids = (ids + ids[-1:] * extra["pad_to"])[: extra["pad_to"]]
        ids = ids[: sampling_params["max_tokens"]]
        self.outputs.append(ids)
        fields = {} if self.global_steps is None else {"global_steps": self.global_steps}
        if "finish_reason" in extra:
            fields["finish_reason"] = extra["finish_reason"]
        logprobs = [-(i + 1) / 100 for i in range(len(ids))]
        stop_reason = extra.get("stop_reason", "completed")
        return TokenOutput(token_ids=ids, log_probs=logprobs, stop_reason=stop_reason, extra_fields=fields)


class FakeRetriever:
    """Returns one passage per rank naming the query; ``fail`` makes every search fail."""

    def __init__(self, fail: bool = False) -> None:
        self.fail = fail
        self.queries: list[tuple[str, int]] = []
        self.failures = 0

    async def search(self, query: str, topk: int) -> SearchOutcome:
        self.queries.append((query, topk))
        if self.fail:
            self.failures += 1
            return SearchOutcome(documents=[], error="HTTP 500")
        return SearchOutcome(documents=[passage(query, i) for i in range(topk)])


def passage(query: str, rank: int) -> dict[str, Any]:
    return {"document": {"id": str(rank), "contents": f'"Paris"\nParis is the capital of {query}.'}}


def make_config(episode: dict[str, Any] | None = None, **rollout: Any) -> Any:
    settings = {"prompt_length": 512, "response_length": 4096, "name": "vllm", "max_model_len": None}
    settings.update(rollout)
    return OmegaConf.create(
        {
            "actor_rollout_ref": {"rollout": settings},
            "data": {"apply_chat_template_kwargs": {}},
            "mr_search": {"episode": episode or {}},
        }
    )


LoopFactory = Callable[..., tuple[MRSearchAgentLoop, ScriptedServer, FakeRetriever]]


@pytest.fixture
def make_loop(tokenizer: Any) -> LoopFactory:
    def factory(
        script: list[Any],
        episode: dict[str, Any] | None = None,
        tok: Any = None,
        retriever: FakeRetriever | None = None,
        **rollout: Any,
    ) -> tuple[MRSearchAgentLoop, ScriptedServer, FakeRetriever]:
        tok = tok or tokenizer
        config = make_config(episode, **rollout)
        server = ScriptedServer(tok, script)
        retriever = retriever or FakeRetriever()
        loop = MRSearchAgentLoop(
            trainer_config=DictConfigWrap(config),
            server_manager=server,
            tokenizer=tok,
            processor=None,
            dataset_cls=RLHFDataset,
            data_config=DictConfigWrap(config.data),
            retrieval_client=retriever,
        )
        assert loop.episode == EpisodeConfig.from_config(episode)
        return loop, server, retriever

    return factory


def row(golds: list[str] | None = None) -> dict[str, Any]:
    """A dataset row as verl hands it to ``run`` (the prompt already formatted by question_prompt)."""
    return {
        "raw_prompt": [{"role": "user", "content": prompts.question_prompt(QUESTION)}],
        "reward_model": {"ground_truth": {"target": golds or ["Paris"]}, "style": "rule"},
        "data_source": "embedded_1hop",
    }


SAMPLING = {"temperature": 1.0, "top_p": 1.0, "top_k": -1, "repetition_penalty": 1.0, "logprobs": True}


def assert_consistent(output: Any, response_length: int) -> None:
    """The invariants every output must keep, whatever the model wrote."""
    n = len(output.response_ids)
    assert n <= response_length
    assert len(output.response_mask) == n
    assert len(output.attempt_ids) == n
    assert output.response_logprobs is None or len(output.response_logprobs) == n
    assert all(m in (0, 1) for m in output.response_mask)
    assert output.attempt_ids == sorted(output.attempt_ids)  # attempts are contiguous, in order
    started = set(output.attempt_ids)
    for k, status in enumerate(output.attempt_status):
        if k in started:  # an attempt with tokens either completed or was cut
            assert status in (AttemptStatus.COMPLETE, AttemptStatus.TRUNCATED)
        else:  # one without: never started for lack of budget, skipped by the early stop, or absent
            assert status != AttemptStatus.COMPLETE
            assert output.attempt_rewards[k] == 0.0
    # Once the budget ends the meta-episode, every later attempt is truncated too.
    cut = [k for k, status in enumerate(output.attempt_status) if status == AttemptStatus.TRUNCATED]
    assert cut == list(range(cut[0], len(output.attempt_status))) if cut else True
    if output.response_logprobs is not None:
        assert all(not math.isnan(x) for x in output.response_logprobs)


@pytest.fixture
def kit(make_loop: LoopFactory) -> SimpleNamespace:
    """The helpers above, for test modules (which must not import conftest)."""
    return SimpleNamespace(
        make_loop=make_loop,
        row=row,
        check=assert_consistent,
        sampling=SAMPLING,
        question=QUESTION,
        passage=passage,
        FakeRetriever=FakeRetriever,
    )
