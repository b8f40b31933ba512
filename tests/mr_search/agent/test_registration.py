"""``default_agent_loop=mr_search`` resolves to our loop the way verl's agent-loop worker builds it."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import hydra
import pytest
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


@pytest.mark.xdist_group("fresh_verl")
def test_plugin_registers_on_import_verl_in_a_fresh_process(fresh_verl: dict[str, Any]) -> None:
    """What a Ray agent-loop worker does: ``import verl`` (entry point), then verl's agent-loop module."""
    assert not fresh_verl["agent_loop_imported_by_verl"], "import verl got heavier"
    assert fresh_verl["agent_loop_target"] == "mr_search.agent.loop.MRSearchAgentLoop"
