"""Benchmark: the meta-episode loop's own cost grows linearly with the tokens it handles.

With zero-latency fakes (a server manager that returns pre-tokenized turns at once and a retriever that
answers at once), it times meta-episodes of a baseline length and 10x longer ones, in two ways: 10x more
attempts (the history grows, which is where re-tokenizing it would be quadratic) and 10x longer turns.
The claim: 10x longer costs at most 11x (for a token ratio r, the limit is 1.1 r). For
reference it also times a deliberately quadratic variant that re-encodes the whole history every
turn, to show the benchmark can tell.

Usage: python scripts/bench/bench_agent_loop.py [--repeats 7]
"""

from __future__ import annotations

import argparse
import asyncio
import platform
import sys
import time
from typing import Any

from omegaconf import OmegaConf
from verl.experimental.agent_loop.agent_loop import DictConfigWrap
from verl.utils.dataset.rl_dataset import RLHFDataset
from verl.workers.rollout.replica import TokenOutput

from mr_search import prompts
from mr_search.agent.loop import MRSearchAgentLoop
from mr_search.agent.retrieval_client import SearchOutcome
from mr_search_embedded.tiny_model import ensure_tiny_model

LIMIT = 11.0


class InstantServer:
    """Replays pre-tokenized turns: search, then answer, per attempt."""

    def __init__(self, turns: list[list[int]], rehash: Any = None) -> None:
        self.turns = turns
        self.position = 0
        self.rehash = rehash

    async def generate(self, request_id: str, *, prompt_ids: list[int], sampling_params: dict[str, Any], **_: Any):
        if self.rehash is not None:  # the quadratic reference: touch the whole history as text
            self.rehash(prompt_ids)
        ids = self.turns[self.position % len(self.turns)]
        self.position += 1
        return TokenOutput(token_ids=ids, log_probs=[-0.5] * len(ids), extra_fields={"global_steps": 0})


class InstantRetriever:
    def __init__(self, words: int) -> None:
        body = " ".join(["Freedonia is a country whose capital is Paris."] * max(1, words // 8))
        self.docs = [{"document": {"id": str(i), "contents": f'"Doc {i}"\n{body}'}} for i in range(3)]

    async def search(self, query: str, topk: int) -> SearchOutcome:
        return SearchOutcome(documents=self.docs[:topk])


def _loop(tokenizer: Any, attempts: int, words: int, rehash: bool = False) -> tuple[MRSearchAgentLoop, InstantServer]:
    think = " ".join(["reasoning"] * words)
    texts = (
        f"<think>{think}</think><search>capital of Freedonia</search>",
        f"<think>{think}</think><answer>Paris</answer>",
    )
    turns = [tokenizer(text, add_special_tokens=False)["input_ids"] for text in texts]
    config = OmegaConf.create(
        {
            "actor_rollout_ref": {"rollout": {"prompt_length": 1024, "response_length": 10_000_000, "name": "vllm"}},
            "data": {"apply_chat_template_kwargs": {}},
            "mr_search": {"episode": {"attempts": attempts, "max_information_tokens": 100_000}},
        }
    )
    reencode = (lambda ids: tokenizer(tokenizer.decode(ids))["input_ids"]) if rehash else None
    server = InstantServer(turns, reencode)
    loop = MRSearchAgentLoop(
        trainer_config=DictConfigWrap(config),
        server_manager=server,
        tokenizer=tokenizer,
        processor=None,
        dataset_cls=RLHFDataset,
        data_config=DictConfigWrap(config.data),
        retrieval_client=InstantRetriever(words),
    )
    return loop, server


ROW = {
    "raw_prompt": [{"role": "user", "content": prompts.question_prompt("What is the capital of Freedonia?")}],
    "reward_model": {"ground_truth": {"target": ["Paris"]}},
}
SAMPLING = {"temperature": 1.0, "top_p": 1.0, "logprobs": True}


async def _per_episode(loop: MRSearchAgentLoop, episodes: int) -> float:
    started = time.perf_counter()
    for _ in range(episodes):
        await loop.run(dict(SAMPLING), **ROW)
    return (time.perf_counter() - started) / episodes


async def _compare(short: MRSearchAgentLoop, long: MRSearchAgentLoop, repeats: int, long_episodes: int) -> dict:
    """Interleaves short and long measurements (each window about as long) and keeps the best of each:
    on a shared machine, load spikes only ever add time."""
    short_tokens = len((await short.run(dict(SAMPLING), **ROW)).response_ids)  # warm-up
    long_tokens = len((await long.run(dict(SAMPLING), **ROW)).response_ids)
    short_times, long_times = [], []
    for _ in range(repeats):
        short_times.append(await _per_episode(short, 10 * long_episodes))
        long_times.append(await _per_episode(long, long_episodes))
    return {
        "short_ms": min(short_times) * 1e3,
        "long_ms": min(long_times) * 1e3,
        "ratio": min(long_times) / min(short_times),
        "token_ratio": long_tokens / short_tokens,
        "short_tokens": short_tokens,
        "long_tokens": long_tokens,
    }


async def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=7)
    args = parser.parse_args()
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(ensure_tiny_model())
    print(f"machine: {platform.machine()} {platform.processor() or ''}, python {sys.version.split()[0]}")
    print("baseline: K=3 attempts, 20-word turns; each case is timed against it in the same run (best of repeats)")
    ok = True
    for label, attempts, words, rehash in (
        ("10x attempts (K=30)", 30, 20, False),
        ("~10x longer turns and passages", 3, 270, False),
        ("reference, re-tokenizes the history every turn, K=30", 30, 20, True),
    ):
        short, _ = _loop(tokenizer, 3, 20, rehash)
        long, _ = _loop(tokenizer, attempts, words, rehash)
        result = await _compare(short, long, args.repeats if not rehash else 2, long_episodes=4 if not rehash else 1)
        # 10x the tokens may cost 11x the time: the time ratio may exceed the token ratio by 10%.
        limit = LIMIT / 10 * result["token_ratio"]
        verdict = "" if rehash else ("PASS" if result["ratio"] <= limit else "FAIL")
        ok &= rehash or result["ratio"] <= limit
        print(
            f"{label}: {result['long_tokens']} vs {result['short_tokens']} tokens ({result['token_ratio']:.1f}x), "
            f"{result['long_ms']:.2f} vs {result['short_ms']:.2f} ms per meta-episode, "
            f"time ratio {result['ratio']:.2f}x (limit {limit:.1f}x) {verdict}"
        )
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
