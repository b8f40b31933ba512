"""Fixtures of the CPU backend tests: a tiny local Qwen2 policy and a rollout server over it."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

TEXTS = (
    "Answer the question. <think> reason </think> <search> query </search> <information> Doc 1 </information>",
    "<answer> Paris </answer> hello world, the quick brown fox jumps over the lazy dog 0123456789",
)


@pytest.fixture(scope="session")
def tiny_model_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from mr_search_embedded.tiny_model import ensure_tiny_model

    return ensure_tiny_model(tmp_path_factory.mktemp("cpu_tiny_model"), texts=list(TEXTS) * 4)


@pytest.fixture
def make_server(tiny_model_dir: Path):
    """Builds an in-process ``HFRolloutServer`` (no Ray) over the tiny model."""
    from verl.workers.config import HFModelConfig, RolloutConfig
    from verl.workers.rollout.replica import RolloutMode

    from mr_search.cpu.server import HFRolloutServer

    def build(**rollout: Any) -> HFRolloutServer:
        settings = {"name": "mr_hf", "dtype": "float32", "prompt_length": 64, "response_length": 16, **rollout}
        model_config = HFModelConfig(path=str(tiny_model_dir), override_config={"attn_implementation": "sdpa"})
        return HFRolloutServer(RolloutConfig(**settings), model_config, RolloutMode.HYBRID, replica_rank=0)

    return build


class LocalActorHandle:
    """Stands in for a Ray actor handle: ``handle.method.remote(...)`` awaits ``obj.method(...)``."""

    def __init__(self, obj: Any) -> None:
        self._obj = obj
        self.calls: list[str] = []

    def __getattr__(self, name: str) -> Any:
        method = getattr(self._obj, name)
        calls = self.calls

        class _Remote:
            @staticmethod
            def remote(*args: Any, **kwargs: Any) -> Any:
                calls.append(name)
                result = method(*args, **kwargs)
                if asyncio.iscoroutine(result):
                    return result
                future = asyncio.get_running_loop().create_future()
                future.set_result(result)
                return future

        return _Remote()


@pytest.fixture
def local_handle():
    return LocalActorHandle
