"""Fixtures shared by the mr_search tests (the trainer's in-memory TransferQueue among them)."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import torch
from tensordict import TensorDict
from verl.utils.tensordict_utils import list_of_dict_to_tensordict

# What `import verl` registers, seen by a fresh interpreter as Ray's workers see it: nothing of ours imported by hand,
# verl's entry-point discovery must do it. One interpreter for the tests that read it (each start imports verl and
# torch, seconds of CPU); each fact is taken at the point of the imports where its test needs it.
FRESH_VERL_PROBE = """
import json, sys
import verl
state = {"agent_loop_imported_by_verl": "verl.experimental.agent_loop.agent_loop" in sys.modules}
from verl.trainer.ppo import core_algos
state["estimator"] = "mr_search" in core_algos.ADV_ESTIMATOR_REGISTRY
state["trainer_imported_by_plugin"] = "mr_search.trainer.attempt_trainer" in sys.modules
from verl.experimental.agent_loop import agent_loop
from verl.plugin.platform.platform_manager import PlatformRegistry
from verl.workers.rollout.base import _ROLLOUT_REGISTRY
from verl.workers.rollout.replica import RolloutReplicaRegistry
from verl.trainer.ppo.v1 import trainer_base
state["registries"] = {
    "estimators": sorted(core_algos.ADV_ESTIMATOR_REGISTRY),
    "agent_loops": sorted(agent_loop._agent_loop_registry),
    "platforms": sorted(PlatformRegistry._platforms),
    "rollouts": sorted(f"{name}/{mode}" for name, mode in _ROLLOUT_REGISTRY),
    "replicas": sorted(RolloutReplicaRegistry._registry),
    "trainers": sorted(trainer_base.TRAINER_REGISTRY),
}
state["agent_loop_target"] = agent_loop._agent_loop_registry["mr_search"]["_target_"]
from verl.trainer.ppo.v1 import get_trainer_cls
trainer = get_trainer_cls("mr_search")
from mr_search import plugin
plugin._done = False
plugin.register()  # a retried plugin import must not raise "already registered"
state["trainer"] = trainer.__module__ + "." + trainer.__qualname__
state["sync_subclass"] = next(c.__name__ for c in trainer.__mro__ if c.__module__.startswith("verl."))
from mr_search.cpu.adapter import HFServerAdapter
state["fault_on_cpu_adapter"] = repr(getattr(HFServerAdapter.update_weights, "_mr_search_fault", None))
print(json.dumps(state))
"""


@pytest.fixture(scope="session")
def fresh_verl() -> dict[str, Any]:
    """``FRESH_VERL_PROBE``'s findings (one fresh interpreter per worker that asks; its tests share an xdist group)."""
    env = {**os.environ, "VERL_USE_EXTERNAL_PLUGINS": "auto", "MR_SEARCH_FAULT": "engine-stop@7"}
    done = subprocess.run(
        [sys.executable, "-c", FRESH_VERL_PROBE], capture_output=True, text=True, env=env, timeout=300
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


class ForcedTokens(torch.nn.Module):
    """Wraps a causal LM and forces the given token ids, one per decoding step (then the model's own choice).

    The tiny test models are random: forcing a turn's first tokens makes them write a search or an answer.
    """

    def __init__(self, model: torch.nn.Module, forced: list[int]) -> None:
        super().__init__()
        self.model, self.forced, self.step = model, forced, 0
        self.generation_config = model.generation_config

    def forward(self, **kwargs: Any) -> Any:
        out = self.model(**kwargs)
        if self.step < len(self.forced):
            out.logits[:, -1, self.forced[self.step]] += 1e4
        self.step += 1
        return out


@pytest.fixture
def forced_tokens() -> Callable[[torch.nn.Module, list[int]], torch.nn.Module]:
    """``forced_tokens(model, token_ids)``: the model, made to emit ``token_ids`` first."""
    return ForcedTokens


class FakeTransferQueue:
    """``kv_batch_get`` / ``kv_batch_put`` over a dict of rows; every tensor column comes back jagged."""

    def __init__(self) -> None:
        self.rows: dict[str, dict[str, Any]] = {}

    def put_rows(self, rows: dict[str, dict[str, Any]]) -> None:
        for key, row in rows.items():
            self.rows[key] = dict(row)

    def kv_batch_get(self, keys: list[str], partition_id: str, select_fields: list[str]) -> TensorDict:
        available = [f for f in select_fields if all(f in self.rows[k] for k in keys)]
        td = list_of_dict_to_tensordict([{f: self.rows[k][f] for f in available} for k in keys])
        for name in list(td.keys()):
            value = td.get(name)
            if isinstance(value, torch.Tensor) and not value.is_nested:
                td[name] = torch.nested.as_nested_tensor(list(value.unbind(0)), layout=torch.jagged)
        return td

    def kv_batch_put(self, keys: list[str], partition_id: str, fields: TensorDict) -> str:
        for name in list(fields.keys()):
            for key, value in zip(keys, fields.get(name).unbind(0), strict=True):
                self.rows[key][name] = value
        return f"batch of {len(keys)}"


@pytest.fixture
def fake_tq() -> FakeTransferQueue:
    return FakeTransferQueue()


@pytest.fixture
def advantage_trainer(fake_tq: FakeTransferQueue) -> Callable[..., Any]:
    """``advantage_trainer(queue=None, credit_gamma=1.0, **algorithm)``: an ``AttemptTrainer`` without workers.

    Its advantage step is the real one, over ``queue`` (default ``fake_tq``); ``credit_gamma`` is MR-Search's
    gamma, ``algorithm`` overrides verl's ``algorithm`` keys. Nothing else of the trainer is built.
    """
    from omegaconf import OmegaConf

    from mr_search.advantage import register as register_estimator
    from mr_search.trainer.attempt_trainer import (
        AttemptTrainer,
        advantage_config_of,
        episode_config_of,
        retriever_config_of,
    )

    def make(queue: Any = None, credit_gamma: float = 1.0, **algorithm: Any) -> AttemptTrainer:
        config = OmegaConf.create(
            {
                "algorithm": {
                    "adv_estimator": "mr_search",
                    "use_kl_in_reward": False,
                    "kl_penalty": "kl",
                    "rollout_correction": None,
                    **algorithm,
                },
                "mr_search": {"advantage": {"gamma": credit_gamma, "baseline": "loo"}},
            }
        )
        register_estimator()  # as AttemptTrainer.__init__ does
        trainer = AttemptTrainer.__new__(AttemptTrainer)
        trainer.config = config
        trainer.advantage_config = advantage_config_of(config)
        trainer.retriever_config = retriever_config_of(config)
        trainer.episode_config = episode_config_of(config)
        trainer.transfer_queue = fake_tq if queue is None else queue
        return trainer

    return make


@pytest.fixture
def retrieval_service() -> Iterator[Callable[[Path], str]]:
    """``serve(corpus)``: the real embedded retrieval service on a free port in a thread; its /retrieve URL.

    Every service started is stopped when the test ends.
    """
    uvicorn = pytest.importorskip("uvicorn")
    from mr_search_retrieval.app import create_app
    from mr_search_retrieval.server import build_parser, config_from_args

    running: list[tuple[Any, threading.Thread]] = []

    def serve(corpus: Path) -> str:
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", 0))
            port = sock.getsockname()[1]
        config = config_from_args(build_parser().parse_args(["--port", str(port), "--corpus", str(corpus)]))
        server = uvicorn.Server(uvicorn.Config(create_app(config), host="127.0.0.1", port=port, log_level="warning"))
        thread = threading.Thread(target=server.run, daemon=True)
        thread.start()
        running.append((server, thread))
        for _ in range(600):
            if server.started or not thread.is_alive():
                break
            time.sleep(0.2)
        assert server.started, "the embedded retrieval service did not start"
        return f"http://127.0.0.1:{port}/retrieve"

    yield serve
    for server, thread in running:
        server.should_exit = True
        thread.join(timeout=30)
