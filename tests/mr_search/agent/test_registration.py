"""``default_agent_loop=mr_search`` resolves to our loop the way verl's agent-loop worker builds it."""

from __future__ import annotations

import os
import subprocess
import sys
from types import SimpleNamespace
from typing import Any

import hydra
from verl.experimental.agent_loop.agent_loop import DictConfigWrap, ToolListWrap, _agent_loop_registry
from verl.utils.dataset.rl_dataset import RLHFDataset

from mr_search.agent.loop import MRSearchAgentLoop
from mr_search.agent.registration import register


def test_register_is_idempotent_and_worker_instantiation_works(kit: SimpleNamespace, tokenizer: Any) -> None:
    register()
    register()
    entry = _agent_loop_registry["mr_search"]
    assert entry == {"_target_": "mr_search.agent.loop.MRSearchAgentLoop"}
    loop, _, _ = kit.make_loop([])
    config = loop.config
    # Exactly the call of AgentLoopWorker._run_agent_loop (verl 0.9.1).
    built = hydra.utils.instantiate(
        config=entry,
        trainer_config=DictConfigWrap(config=config),
        server_manager=object(),
        tokenizer=tokenizer,
        processor=None,
        hf_model_type=None,
        dataset_cls=RLHFDataset,
        data_config=DictConfigWrap(config.data),
        tools=ToolListWrap([]),
    )
    assert isinstance(built, MRSearchAgentLoop)
    assert built.episode.attempts == 3 and built.episode.topk == 3


def test_plugin_registers_on_import_verl_in_a_fresh_process() -> None:
    """What a Ray agent-loop worker does: ``import verl`` (entry point), then verl's agent-loop module."""
    code = (
        "import sys, verl\n"
        "assert 'verl.experimental.agent_loop.agent_loop' not in sys.modules, 'import verl got heavier'\n"
        "from verl.experimental.agent_loop.agent_loop import _agent_loop_registry as r\n"
        "print(r['mr_search']['_target_'])\n"
    )
    env = {**os.environ, "VERL_USE_EXTERNAL_PLUGINS": "auto"}
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=300)
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout.strip().splitlines()[-1] == "mr_search.agent.loop.MRSearchAgentLoop"
