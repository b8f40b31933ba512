"""Local transformers generation behind verl's server-manager ``generate`` signature, off the event loop."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Sequence
from concurrent.futures import Executor, ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import torch
from verl.workers.rollout.replica import TokenOutput

from mr_search.agent.tokens import single_token_stops
from mr_search.cpu.generation import Generation, SamplingParams, generate_batch

logger = logging.getLogger(__name__)


def sampling_from_request(tokenizer: Any, params: dict[str, Any], default_max_new_tokens: int) -> SamplingParams:
    """vLLM/SGLang-style request params -> ``SamplingParams``; one-token stop strings become stop ids."""
    sampling = SamplingParams.from_request(params, default_max_new_tokens)
    extra = single_token_stops(tokenizer, sampling.stop)
    if not extra:
        return sampling
    return replace(sampling, stop_token_ids=tuple(dict.fromkeys(sampling.stop_token_ids + extra)))


def generate_turn(
    model: torch.nn.Module, tokenizer: Any, prompt_ids: Sequence[int], sampling_params: dict[str, Any]
) -> Generation:
    """Generates one turn synchronously from token ids, with vLLM/SGLang-style ``sampling_params``."""
    sampling = sampling_from_request(tokenizer, dict(sampling_params), default_max_new_tokens=1024)
    (generation,) = generate_batch(
        model,
        [list(prompt_ids)],
        [sampling],
        eos_token_ids=(eos := eos_token_ids(tokenizer, getattr(model, "generation_config", None))),
        pad_token_id=pad_token_id(tokenizer, eos),
        decode=lambda ids: tokenizer.decode(ids, skip_special_tokens=False),
    )
    return generation


def eos_token_ids(tokenizer: Any, generation_config: Any) -> list[int]:
    """Every end-of-sequence id: the tokenizer's and the model's generation config's (an int or a list)."""
    ids: set[int] = set()
    for source in (getattr(generation_config, "eos_token_id", None), tokenizer.eos_token_id):
        if isinstance(source, int):
            ids.add(source)
        elif source:
            ids.update(int(i) for i in source)
    return sorted(ids)


def pad_token_id(tokenizer: Any, eos_ids: Sequence[int]) -> int:
    """The tokenizer's pad id, else the first end-of-sequence id (0 when there is none)."""
    pad = tokenizer.pad_token_id
    return int(pad if pad is not None else (list(eos_ids) or [0])[0])


@dataclass
class PendingTurn:
    """One queued generation request and the future its caller awaits."""

    prompt_ids: list[int]
    params: SamplingParams
    future: asyncio.Future[Generation] = field(repr=False)


async def resolve_batch(
    batch: list[PendingTurn], executor: Executor, generate: Callable[[list[PendingTurn]], list[Generation]]
) -> BaseException | None:
    """Decodes ``batch`` on ``executor``; each caller gets its result or the error, which is returned."""
    try:
        results = await asyncio.get_running_loop().run_in_executor(executor, generate, batch)
    except Exception as error:
        for request in batch:
            if not request.future.done():
                request.future.set_exception(error)
        return error
    for request, result in zip(batch, results, strict=True):
        if not request.future.done():
            request.future.set_result(result)
    return None


class LocalServerManager:
    """A server manager with verl's ``generate`` signature, backed by a local transformers model."""

    def __init__(
        self,
        model: torch.nn.Module,
        tokenizer: Any,
        *,
        max_batch_size: int = 32,
        default_max_new_tokens: int = 1024,
        global_steps: int = 0,
    ) -> None:
        if max_batch_size < 1:
            raise ValueError(f"LocalServerManager.max_batch_size={max_batch_size} must be >= 1")
        self.model = model.eval()
        self.tokenizer = tokenizer
        self.max_batch_size = max_batch_size
        self.default_max_new_tokens = default_max_new_tokens
        self.global_steps = global_steps
        self._queue: list[PendingTurn] = []
        self._drainer: asyncio.Task[None] | None = None
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="mr-search-hf")
        self._eos = eos_token_ids(tokenizer, getattr(model, "generation_config", None))
        self._pad = pad_token_id(tokenizer, self._eos)
        self.batches: list[int] = []  # size of each decoded batch, for inspection

    @classmethod
    def from_pretrained(cls, path: str | Path, **kwargs: Any) -> LocalServerManager:
        """Loads a model directory (float32, CPU) and its tokenizer."""
        from transformers import AutoModelForCausalLM, AutoTokenizer

        tokenizer = AutoTokenizer.from_pretrained(str(path))
        model = AutoModelForCausalLM.from_pretrained(str(path), dtype=torch.float32)
        return cls(model, tokenizer, **kwargs)

    async def generate(
        self,
        request_id: str,
        *,
        prompt_ids: list[int],
        sampling_params: dict[str, Any],
        image_data: Any = None,
        video_data: Any = None,
        audio_data: Any = None,
        mm_processor_kwargs: Any = None,
        **kwargs: Any,
    ) -> TokenOutput:
        if image_data or video_data or audio_data:
            raise ValueError("LocalServerManager generates text only; got image, video or audio data")
        sampling = sampling_from_request(self.tokenizer, dict(sampling_params), self.default_max_new_tokens)
        loop = asyncio.get_running_loop()
        request = PendingTurn(list(prompt_ids), sampling, loop.create_future())
        self._queue.append(request)
        if self._drainer is None or self._drainer.done():
            self._drainer = loop.create_task(self._drain())
        generation = await request.future
        return TokenOutput(
            token_ids=generation.token_ids,
            log_probs=generation.log_probs,
            stop_reason="aborted" if generation.finish_reason == "abort" else "completed",
            extra_fields={"global_steps": self.global_steps, "finish_reason": generation.finish_reason},
        )

    async def _drain(self) -> None:
        while self._queue:
            await asyncio.sleep(0)  # let the other meta-episodes queue their turns
            batch, self._queue = self._queue[: self.max_batch_size], self._queue[self.max_batch_size :]
            self.batches.append(len(batch))
            await resolve_batch(batch, self._executor, self._run)

    def _run(self, batch: list[PendingTurn]) -> list[Generation]:
        return generate_batch(
            self.model,
            [r.prompt_ids for r in batch],
            [r.params for r in batch],
            eos_token_ids=self._eos,
            pad_token_id=self._pad,
            decode=lambda ids: self.tokenizer.decode(ids, skip_special_tokens=False),
        )

    def close(self) -> None:
        self._executor.shutdown(wait=False)
