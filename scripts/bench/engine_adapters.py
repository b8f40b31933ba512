"""Rollout engines behind verl's server-manager contract, in one process, for the engine benchmark.

Each adapter starts one engine on the visible GPU (or the CPU, for ``hf``) and answers
``await generate(request_id, prompt_ids=..., sampling_params=...) -> TokenOutput`` the way verl's own
servers do (vLLM: ``vllm_async_server.py``; SGLang: ``async_sglang_server.py``; hf: the project's
``mr_search.cpu.server``), so that ``MRSearchAgentLoop`` runs on it unchanged. Not a serving layer:
no Ray, no weight sync; the benchmark needs only generation.
"""

from __future__ import annotations

import itertools
import logging
import os
from typing import Any, Protocol

from verl.workers.rollout.replica import TokenOutput

logger = logging.getLogger(__name__)

ENGINES = ("vllm", "sglang", "hf")


class Engine(Protocol):
    name: str
    stops_wait_for_min_tokens: bool  # stop strings are not checked before min_tokens (a replay can carry them)

    async def generate(
        self, request_id: str, *, prompt_ids: list[int], sampling_params: dict[str, Any]
    ) -> TokenOutput: ...

    async def reset_prefix_cache(self) -> None: ...

    def shutdown(self) -> None: ...


class VLLMEngine:
    """vLLM's ``AsyncLLM`` (v1 engine), token ids in and out."""

    name = "vllm"
    stops_wait_for_min_tokens = True  # its detokenizer checks stop strings only past min_tokens

    def __init__(self, model: str, *, memory: float, max_model_len: int, prefix_caching: bool, eager: bool) -> None:
        os.environ.setdefault("VLLM_USE_FLASHINFER_SAMPLER", "0")
        os.environ.setdefault("VLLM_WORKER_MULTIPROC_METHOD", "spawn")  # this process may have touched CUDA
        from vllm import AsyncEngineArgs, SamplingParams
        from vllm.v1.engine.async_llm import AsyncLLM

        self._sampling_params = SamplingParams
        args = AsyncEngineArgs(
            model=model,
            dtype="bfloat16",
            gpu_memory_utilization=memory,
            max_model_len=max_model_len,
            enable_prefix_caching=prefix_caching,
            enforce_eager=eager,
        )
        self.engine = AsyncLLM.from_engine_args(args)
        self._ids = itertools.count()

    async def generate(self, request_id: str, *, prompt_ids: list[int], sampling_params: dict[str, Any]) -> TokenOutput:
        params = dict(sampling_params)
        want_logprobs = bool(params.pop("logprobs", False))
        sampling = self._sampling_params(
            max_tokens=params.pop("max_tokens"), logprobs=0 if want_logprobs else None, **params
        )
        final = None
        request = f"{request_id}-{next(self._ids)}"  # one engine request per turn, as verl's server manager makes
        async for output in self.engine.generate(
            prompt={"prompt_token_ids": list(prompt_ids)}, sampling_params=sampling, request_id=request
        ):
            final = output
        assert final is not None and final.outputs, f"vLLM returned nothing for {request}"
        out = final.outputs[0]
        ids = list(out.token_ids)
        log_probs = (
            [step[token].logprob for step, token in zip(out.logprobs, ids, strict=True)] if out.logprobs else None
        )
        return TokenOutput(
            token_ids=ids,
            log_probs=log_probs,
            stop_reason="completed",
            extra_fields={"global_steps": 0, "finish_reason": out.finish_reason},
        )

    async def reset_prefix_cache(self) -> None:
        await self.engine.reset_prefix_cache()

    def shutdown(self) -> None:
        self.engine.shutdown()


class SGLangEngine:
    """SGLang's in-process ``Engine`` with the backends that ran on these GPUs (triton attention, pytorch sampling)."""

    name = "sglang"
    stops_wait_for_min_tokens = False  # Req.check_finished tests stop strings whatever min_new_tokens says

    def __init__(self, model: str, *, memory: float, max_model_len: int, prefix_caching: bool, eager: bool) -> None:
        import sglang

        self.engine = sglang.Engine(
            model_path=model,
            dtype="bfloat16",
            mem_fraction_static=memory,
            context_length=max_model_len,
            disable_radix_cache=not prefix_caching,
            disable_cuda_graph=eager,
            attention_backend=os.environ.get("SGLANG_ATTENTION_BACKEND", "triton"),
            sampling_backend=os.environ.get("SGLANG_SAMPLING_BACKEND", "pytorch"),
            grammar_backend="none",
            skip_tokenizer_init=False,  # string stop sequences need the tokenizer
            log_level="error",
        )

    async def generate(self, request_id: str, *, prompt_ids: list[int], sampling_params: dict[str, Any]) -> TokenOutput:
        params = dict(sampling_params)
        want_logprobs = bool(params.pop("logprobs", False))
        params["max_new_tokens"] = params.pop("max_tokens")
        if params.pop("include_stop_str_in_output", False):
            params["no_stop_trim"] = True  # SGLang's name for keeping the stop string
        out = await self.engine.async_generate(
            input_ids=list(prompt_ids), sampling_params=params, return_logprob=want_logprobs
        )
        meta = out["meta_info"]
        ids = list(out["output_ids"])
        log_probs = [float(entry[0]) for entry in meta["output_token_logprobs"]] if want_logprobs else None
        finish = (meta.get("finish_reason") or {}).get("type")
        return TokenOutput(token_ids=ids, log_probs=log_probs, stop_reason=finish, extra_fields={"global_steps": 0})

    async def reset_prefix_cache(self) -> None:
        await self.engine.tokenizer_manager.flush_cache()  # Engine.flush_cache() would start a second event loop

    def shutdown(self) -> None:
        self.engine.shutdown()


class HFEngine:
    """The project's transformers rollout (``mr_search.cpu.server.HFRolloutServer``), without Ray."""

    name = "hf"
    stops_wait_for_min_tokens = False

    def __init__(self, model: str, *, memory: float, max_model_len: int, prefix_caching: bool, eager: bool) -> None:
        import torch
        from verl.workers.config import HFModelConfig, RolloutConfig
        from verl.workers.rollout.replica import RolloutMode

        from mr_search.cpu.server import HFRolloutServer

        settings = {
            "name": "mr_hf",
            "dtype": "bfloat16" if torch.cuda.is_available() else "float32",
            "prompt_length": max_model_len // 2,
            "response_length": max_model_len // 2,
            "max_model_len": max_model_len,
        }
        self.server = HFRolloutServer(
            RolloutConfig(**settings), HFModelConfig(path=model), RolloutMode.COLOCATED, replica_rank=0
        )

    async def generate(self, request_id: str, *, prompt_ids: list[int], sampling_params: dict[str, Any]) -> TokenOutput:
        return await self.server.generate(
            prompt_ids=prompt_ids, sampling_params=dict(sampling_params), request_id=request_id
        )

    async def reset_prefix_cache(self) -> None:
        return None  # no KV cache outlives a batch

    def shutdown(self) -> None:
        return None  # its one worker thread ends with the process


def make_engine(name: str, model: str, **options: Any) -> Engine:
    """``options``: memory (share of GPU memory), max_model_len, prefix_caching, eager."""
    engines = {"vllm": VLLMEngine, "sglang": SGLangEngine, "hf": HFEngine}
    if name not in engines:
        raise ValueError(f"engine {name!r} is not one of {ENGINES}")
    logger.info("starting %s on %s", name, model)
    return engines[name](model, **options)
