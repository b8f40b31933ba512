"""MR-Search's CPU backend for verl 0.9.x: the ``cpu`` platform, the ``mr_hf`` rollout, the workarounds."""

from __future__ import annotations

from types import ModuleType
from typing import Final

from mr_search.import_hooks import when_imported

# verl is imported only inside register(): `mr_search.cpu.generation` (the sampler) stays usable without it.
ROLLOUT_NAME: Final = "mr_hf"
ADAPTER_PATH: Final = "mr_search.cpu.adapter.HFServerAdapter"


def _load_replica() -> type:
    from mr_search.cpu.replica import HFReplica

    return HFReplica


def _register_adapter(base: ModuleType) -> None:
    base._ROLLOUT_REGISTRY[(ROLLOUT_NAME, "async")] = ADAPTER_PATH


def _register_replica(replica: ModuleType) -> None:
    replica.RolloutReplicaRegistry.register(ROLLOUT_NAME, _load_replica)


def register() -> None:
    """Registers the platform, both halves of the rollout and (on ``VERL_PLATFORM=cpu``) the workarounds."""
    from mr_search.cpu import platform, workarounds

    platform.register()
    when_imported("verl.workers.rollout.base", _register_adapter)
    when_imported("verl.workers.rollout.replica", _register_replica)
    workarounds.install()
