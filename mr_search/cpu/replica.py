"""``HFReplica``: verl's ``RolloutReplica`` for the ``mr_hf`` backend, one server actor per replica."""

from __future__ import annotations

import logging
import os

import ray
from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy
from verl.plugin.platform import get_platform
from verl.workers.rollout.replica import RolloutReplica

from mr_search.cpu.server import HFRolloutServer, server_actor_name

logger = logging.getLogger(__name__)


async def _worker_placement(worker: ray.actor.ActorHandle) -> tuple[str, str]:
    """(node id, visible devices) of a trainer worker, asked from inside it."""
    keyword = get_platform().visible_devices_envvar()
    return await worker.__ray_call__.remote(
        lambda self: (ray.get_runtime_context().get_node_id(), os.environ.get(keyword, ""))
    )


class HFReplica(RolloutReplica):
    """A replica served by one ``HFRolloutServer`` on the node of its first worker."""

    async def launch_servers(self) -> None:
        if self.nnodes != 1:
            raise ValueError(
                f"mr_hf rollout: a replica must fit one node (tensor_model_parallel_size={self.world_size}, "
                f"gpus per node={self.gpus_per_node}); use tensor_model_parallel_size=1"
            )
        env_vars = {var: "1" for var in get_platform().ray_noset_envvars()}
        name = server_actor_name(self.replica_rank, self.name_suffix)
        options: dict = {"name": name, "max_concurrency": self.max_concurrency, "runtime_env": {"env_vars": env_vars}}
        visible_devices = None
        if self.workers:
            node_id, visible_devices = await _worker_placement(self.workers[0])
            options["scheduling_strategy"] = NodeAffinitySchedulingStrategy(node_id=node_id, soft=False)
        server = (
            ray.remote(HFRolloutServer)
            .options(**options)
            .remote(
                config=self.config,
                model_config=self.model_config,
                rollout_mode=self.rollout_mode,
                replica_rank=self.replica_rank,
                visible_devices=visible_devices or None,
                server_name=name,
            )
        )
        await server.launch_server.remote()
        self.servers = [server]
        self._server_handle = server
        self._server_address = await server.get_server_address.remote()
        logger.info("mr_hf replica %d ready at %s", self.replica_rank, self._server_address)
