"""The ``mr_hf`` rollout server: a Ray actor that generates with transformers for verl's agent loops.

One executor thread decodes and applies the weight buckets: no batch sees half-updated weights.
"""

from __future__ import annotations

import asyncio
import collections
import concurrent.futures
import dataclasses
import logging
import os
import threading
from typing import Any, Final

import ray
import torch
from verl.utils.config import omega_conf_to_dataclass
from verl.workers.config import HFModelConfig, RolloutConfig
from verl.workers.rollout.replica import RolloutMode, TokenOutput

from mr_search.cpu.generation import Generation, generate_batch
from mr_search.cpu.hf_generate import PendingTurn, eos_token_ids, pad_token_id, resolve_batch, sampling_from_request

logger = logging.getLogger(__name__)

# Upper bound of requests decoded together (also bounded by rollout.max_num_seqs).
MAX_BATCH: Final = 64
# How long a batch's first request waits for companions: a step's requests come a few milliseconds apart.
BATCH_WAIT_S: Final = 0.02
_STOP_REASON: Final = {"stop": "completed", "length": "completed", "abort": "aborted"}
_DTYPES: Final = {"bfloat16": torch.bfloat16, "float16": torch.float16, "float32": torch.float32}


def server_actor_name(replica_rank: int, name_suffix: str = "") -> str:
    """Ray name of a replica's server actor; the in-worker adapter finds its server by it."""
    return f"mr_hf_server_{replica_rank}{name_suffix}"


class HFRolloutServer:
    """One rollout replica's generation server (wrapped with ``ray.remote`` by ``HFReplica``)."""

    def __init__(
        self,
        config: RolloutConfig,
        model_config: HFModelConfig,
        rollout_mode: RolloutMode,
        replica_rank: int,
        visible_devices: str | None = None,
        server_name: str | None = None,
    ) -> None:
        if visible_devices:
            os.environ["CUDA_VISIBLE_DEVICES"] = visible_devices
        from transformers import AutoModelForCausalLM, AutoTokenizer

        self.config: RolloutConfig = omega_conf_to_dataclass(config)
        self.model_config: HFModelConfig = omega_conf_to_dataclass(model_config, dataclass_type=HFModelConfig)
        self.rollout_mode = rollout_mode
        self.replica_rank = replica_rank
        self.device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
        dtype_name = str(self.config.dtype)
        if dtype_name not in _DTYPES:
            raise ValueError(f"mr_hf rollout: rollout.dtype={dtype_name!r}; valid: {sorted(_DTYPES)}")
        path = self.model_config.local_path
        trust = self.model_config.trust_remote_code
        self.tokenizer = AutoTokenizer.from_pretrained(path, trust_remote_code=trust)
        self.model = AutoModelForCausalLM.from_pretrained(
            path, dtype=_DTYPES[dtype_name], attn_implementation="sdpa", trust_remote_code=trust
        ).eval()
        self.model.to(self.device)
        self.eos_token_ids = eos_token_ids(self.tokenizer, getattr(self.model, "generation_config", None))
        self.pad_token_id = pad_token_id(self.tokenizer, self.eos_token_ids)
        self.max_model_len = int(
            self.config.max_model_len or getattr(self.model.config, "max_position_embeddings", 32768)
        )
        self.max_batch = max(1, min(MAX_BATCH, int(self.config.max_num_seqs or MAX_BATCH)))
        # Weight version; an int from the start (docs/cpu-backend.md, workaround 10: verl calls int() on it).
        self.global_steps = 0

        self._executor = concurrent.futures.ThreadPoolExecutor(max_workers=1, thread_name_prefix="mr_hf")
        self._abort = threading.Event()
        self._queue: asyncio.Queue[PendingTurn] | None = None
        self._accepting: asyncio.Event | None = None
        self._reject_while_paused = False
        self._batcher: asyncio.Task[None] | None = None
        self._updated_params: set[str] = set()
        self.batch_sizes: collections.deque[int] = collections.deque(maxlen=1024)  # recent micro-batch sizes
        # An identifier, not an HTTP endpoint: verl's load balancer keys servers by it.
        name = server_name or server_actor_name(replica_rank)
        self._address = f"mr_hf://{ray.util.get_node_ip_address()}/{name}"
        logger.info("mr_hf server %d: %s on %s (%s)", replica_rank, path, self.device, dtype_name)

    async def launch_server(self) -> None:
        """Starts the batching loop (on the actor's event loop)."""
        if self._batcher is None:
            self._queue = asyncio.Queue()
            self._accepting = asyncio.Event()
            self._accepting.set()
            self._batcher = asyncio.get_running_loop().create_task(self._batch_loop())

    def get_server_address(self) -> str:
        return self._address

    async def wake_up(self) -> None:
        await self._run(self._place_weights, self.device)

    async def sleep(self) -> None:
        if self.config.free_cache_engine:
            await self._run(self._place_weights, torch.device("cpu"))

    async def resume(self, tags: list[str]) -> None:
        """The adapter's ``resume(["weights"])`` / ``resume(["kv_cache"])``; no KV cache outlives a batch."""
        if "weights" in tags:
            await self._run(self._place_weights, self.device)

    async def release(self) -> None:
        if self.config.free_cache_engine:
            await self._run(self._place_weights, torch.device("cpu"))

    async def clear_kv_cache(self) -> None:
        return None

    async def release_kv_cache(self) -> None:
        return None

    async def resume_kv_cache(self) -> None:
        return None

    async def abort_all_requests(self, reject_request: bool = False) -> None:
        """Ends queued and running requests as "aborted" and holds new ones until ``resume_generation``."""
        await self.launch_server()
        assert self._queue is not None and self._accepting is not None
        self._reject_while_paused = reject_request
        self._accepting.clear()
        self._abort.set()
        while not self._queue.empty():
            request = self._queue.get_nowait()
            if not request.future.done():
                request.future.set_result(Generation(finish_reason="abort"))
        await self._run(lambda: None)  # the running batch has seen the flag once this returns
        self._abort.clear()

    async def resume_generation(self) -> None:
        await self.launch_server()
        assert self._accepting is not None
        self._accepting.set()

    async def start_profile(self, **kwargs: Any) -> None:
        logger.info("mr_hf server: profiling is not supported; start_profile ignored")

    async def stop_profile(self) -> None:
        return None

    async def set_global_steps(self, global_steps: int) -> None:
        self.global_steps = int(global_steps)

    def _place_weights(self, device: torch.device) -> None:
        if device.type != self.model.device.type:
            self.model.to(device)
            if self.device.type == "cuda":
                torch.cuda.empty_cache()

    async def begin_weight_update(self) -> None:
        self._updated_params = set()

    async def load_weights(self, named_tensors: list[tuple[str, torch.Tensor]]) -> int:
        """Copies one bucket of trainer weights (HF names, full tensors) into the model."""
        return await self._run(self._load_weights, named_tensors)

    def _load_weights(self, named_tensors: list[tuple[str, torch.Tensor]]) -> int:
        state = self.model.state_dict(keep_vars=True)
        unknown = [name for name, _ in named_tensors if name not in state]
        if unknown:
            raise KeyError(f"mr_hf weight sync: the rollout model has no parameter(s) {unknown[:5]}")
        with torch.no_grad():
            for name, tensor in named_tensors:
                target = state[name]
                if target.shape != tensor.shape:
                    raise ValueError(
                        f"mr_hf weight sync: {name} has shape {tuple(tensor.shape)}, expected {tuple(target.shape)}"
                    )
                target.copy_(tensor.to(dtype=target.dtype))
                self._updated_params.add(name)
        return len(named_tensors)

    async def finish_weight_update(self, global_steps: int | None) -> None:
        """Checks that every parameter arrived, then stamps the new weight version."""
        by_tensor: dict[int, list[str]] = {}  # tied weights share one tensor under several names
        for name, param in self.model.named_parameters(remove_duplicate=False):
            by_tensor.setdefault(id(param), []).append(name)
        missing = [names[0] for names in by_tensor.values() if not self._updated_params.intersection(names)]
        if missing:
            raise RuntimeError(
                f"mr_hf weight sync: the trainer sent no values for {missing[:5]} ({len(missing)} in all)"
            )
        if global_steps is not None:
            self.global_steps = int(global_steps)
        logger.info("mr_hf server %d: weights of step %s loaded", self.replica_rank, self.global_steps)

    async def generate(
        self,
        prompt_ids: list[int],
        sampling_params: dict[str, Any],
        request_id: str,
        image_data: list[Any] | None = None,
        video_data: list[Any] | None = None,
        **kwargs: Any,
    ) -> TokenOutput:
        """Generates one response from token ids (verl's server-manager contract)."""
        if image_data or video_data or kwargs.get("audio_data"):
            raise NotImplementedError("mr_hf rollout serves text models only; got image/video/audio data")
        await self.launch_server()
        assert self._queue is not None and self._accepting is not None
        if not self._accepting.is_set():
            if self._reject_while_paused:
                raise RuntimeError(f"mr_hf server {self.replica_rank} is paused; request {request_id} rejected")
            await self._accepting.wait()
        prompt = [int(t) for t in prompt_ids]
        room = self.max_model_len - len(prompt) - 1
        if room < 0:
            raise ValueError(f"prompt of {len(prompt)} tokens exceeds max_model_len={self.max_model_len}")
        default_new = min(
            self.config.response_length, self.config.prompt_length + self.config.response_length - len(prompt)
        )
        # One-token stop strings also become stop ids (no decoding needed to match them).
        params = sampling_from_request(self.tokenizer, dict(sampling_params), max(0, default_new))
        if params.max_new_tokens > room:
            params = dataclasses.replace(params, max_new_tokens=room)
        future: asyncio.Future[Generation] = asyncio.get_running_loop().create_future()
        await self._queue.put(PendingTurn(prompt, params, future))
        result = await future
        return TokenOutput(
            token_ids=result.token_ids,
            log_probs=result.log_probs if sampling_params.get("logprobs", True) else None,
            stop_reason=_STOP_REASON[result.finish_reason],
            extra_fields={"global_steps": self.global_steps, "finish_reason": result.finish_reason},
        )

    async def _batch_loop(self) -> None:
        assert self._queue is not None
        while True:
            batch = [await self._queue.get()]
            await asyncio.sleep(BATCH_WAIT_S)
            while len(batch) < self.max_batch and not self._queue.empty():
                batch.append(self._queue.get_nowait())
            batch = [r for r in batch if not r.future.done()]
            if not batch:
                continue
            self.batch_sizes.append(len(batch))
            error = await resolve_batch(batch, self._executor, self._generate)
            if error is not None:
                logger.error("mr_hf server %d: generation failed", self.replica_rank, exc_info=error)

    def _generate(self, batch: list[PendingTurn]) -> list[Generation]:
        if self.model.device.type != self.device.type:
            self.model.to(self.device)  # a request while asleep: serve it rather than fail
        return generate_batch(
            self.model,
            [r.prompt_ids for r in batch],
            [r.params for r in batch],
            eos_token_ids=self.eos_token_ids,
            pad_token_id=self.pad_token_id,
            decode=lambda ids: self.tokenizer.decode(ids, skip_special_tokens=False),
            should_abort=self._abort.is_set,
        )

    async def _run(self, fn: Any, *args: Any) -> Any:
        return await asyncio.get_running_loop().run_in_executor(self._executor, fn, *args)
