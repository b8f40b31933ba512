"""MR-Search's CPU backend for verl 0.9.x: the ``cpu`` platform, the ``mr_hf`` rollout and the CPU workarounds.

``register()`` (listed in ``mr_search.plugin._PARTS``) registers, in every process that imports verl:

* the platform ``cpu`` with verl's ``PlatformRegistry`` (``mr_search.cpu.platform``); it is used only
  when ``VERL_PLATFORM=cpu`` selects it;
* the rollout backend ``mr_hf`` (transformers generation; CPU, or one GPU without SGLang):
  ``_ROLLOUT_REGISTRY[("mr_hf", "async")]`` -> ``mr_search.cpu.adapter.HFServerAdapter`` (in the
  trainer workers) and ``RolloutReplicaRegistry.register("mr_hf", ...)`` -> ``mr_search.cpu.replica.HFReplica``
  (the server); both attach when verl imports the registry module, so ``import verl`` stays fast;
* the workarounds of ``mr_search.cpu.workarounds``, armed only when ``VERL_PLATFORM=cpu``.

A CPU run needs ``configs/cpu_backend.env`` in its environment and the config group ``configs/engine/cpu.yaml``
(``+engine=cpu``) among its Hydra overrides (both kept equal to ``mr_search.cpu.workarounds.ENV`` / ``OVERRIDES``).
"""

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
