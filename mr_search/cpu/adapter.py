"""``HFServerAdapter``: the in-worker half of the ``mr_hf`` rollout; ships the weights to the server."""

from __future__ import annotations

import logging
import os
from collections.abc import Iterable
from typing import Any

import ray
import torch
from torch.distributed.device_mesh import DeviceMesh
from verl.workers.config import HFModelConfig, RolloutConfig
from verl.workers.rollout.base import BaseRollout

from mr_search.cpu.server import server_actor_name

logger = logging.getLogger(__name__)


class HFServerAdapter(BaseRollout):
    """Ships the trainer's weights to the replica's ``HFRolloutServer`` and relays memory calls."""

    def __init__(
        self, config: RolloutConfig, model_config: HFModelConfig, device_mesh: DeviceMesh | None, replica_rank: int = -1
    ) -> None:
        super().__init__(config, model_config, device_mesh)
        rank = int(os.environ.get("RANK", "0"))
        replica_world = (
            self.config.tensor_model_parallel_size
            * self.config.data_parallel_size
            * self.config.pipeline_model_parallel_size
        )
        self.replica_rank = rank // replica_world if replica_rank == -1 else replica_rank
        self.is_leader_rank = rank % replica_world == 0
        self._server: ray.actor.ActorHandle | None = None

    def _server_handle(self) -> ray.actor.ActorHandle:
        if self._server is None:
            self._server = ray.get_actor(server_actor_name(self.replica_rank))
        return self._server

    async def resume(self, tags: list[str]) -> None:
        if self.is_leader_rank:
            await self._server_handle().resume.remote(tags)

    async def release(self) -> None:
        if self.is_leader_rank:
            await self._server_handle().release.remote()

    async def update_weights(
        self,
        weights: Iterable[tuple[str, torch.Tensor]],
        wire_format: str = "named_tensors",
        global_steps: int | None = None,
        peft_config: Any = None,
        base_sync_done: bool = True,
        **kwargs: Any,
    ) -> None:
        """Sends full named tensors to the server; all ranks iterate ``weights`` to the end."""
        if wire_format != "named_tensors":
            raise NotImplementedError(
                f"mr_hf rollout: weight wire format {wire_format!r} is not supported; use checkpoint engine 'naive'"
            )
        if peft_config is not None and base_sync_done:
            raise NotImplementedError(
                "mr_hf rollout: LoRA adapters are not served separately; set actor_rollout_ref.model.lora.merge=True"
            )
        bucket_bytes = int(self.config.checkpoint_engine.update_weights_bucket_megabytes) << 20
        server = self._server_handle() if self.is_leader_rank else None
        if server is not None:
            await server.begin_weight_update.remote()
        bucket: list[tuple[str, torch.Tensor]] = []
        size = sent = 0
        for name, tensor in weights:
            if server is None:
                continue
            host = tensor.detach().to("cpu").contiguous()
            bucket.append((name, host))
            size += host.numel() * host.element_size()
            if size >= bucket_bytes:
                sent += await server.load_weights.remote(bucket)
                bucket, size = [], 0
        if server is not None:
            if bucket:
                sent += await server.load_weights.remote(bucket)
            await server.finish_weight_update.remote(global_steps)
            logger.info("mr_hf adapter: %d tensors sent to replica %d (step %s)", sent, self.replica_rank, global_steps)
