"""verl finds the CPU backend through the plugin entry point: the platform and both halves of the rollout."""

from __future__ import annotations

import re
from pathlib import Path

import verl  # loads the mr_search plugin through verl's entry points

from mr_search import plugin
from mr_search.cpu.platform import PlatformCPU, cpu_platform_selected


def test_plugin_lists_the_cpu_backend() -> None:
    assert "mr_search.cpu" in plugin._PARTS


def test_cpu_platform_is_registered_but_never_auto_detected() -> None:
    from verl.plugin.platform.platform_manager import PlatformRegistry

    assert PlatformRegistry.get("cpu") is PlatformCPU
    platform = PlatformCPU()
    assert not platform.is_platform_available(use_smi_check=True)
    assert (platform.device_name, platform.communication_backend_name(), platform.ray_resource_name()) == (
        "cpu",
        "gloo",
        "GPU",
    )
    assert not cpu_platform_selected()  # tests run without VERL_PLATFORM=cpu


def test_device_module_has_every_call_verl_makes_on_get_torch_device() -> None:
    # verl calls get_torch_device().<name>(...) all over; a new call in a verl upgrade must be added here.
    root = Path(verl.__file__).parent
    called = set()
    for path in root.rglob("*.py"):
        called.update(re.findall(r"get_torch_device\(\)\.(\w+)", path.read_text(encoding="utf-8", errors="ignore")))
    module = PlatformCPU().device_module
    missing = sorted(name for name in called if not hasattr(module, name))
    assert called and not missing, f"CPU device module lacks {missing}: add them to mr_search/cpu/platform.py"
    assert module.mem_get_info()[1] > 0 and module.memory_allocated() == 0
    module.empty_cache()
    module.synchronize()


def test_rollout_is_registered_in_both_verl_registries() -> None:
    from verl.workers.rollout.base import get_rollout_class
    from verl.workers.rollout.replica import RolloutReplica, get_rollout_replica_class

    from mr_search.cpu.adapter import HFServerAdapter
    from mr_search.cpu.replica import HFReplica

    assert get_rollout_class("mr_hf", "async") is HFServerAdapter
    replica_cls = get_rollout_replica_class("mr_hf")
    assert replica_cls is HFReplica and issubclass(replica_cls, RolloutReplica)
    # Every lifecycle call verl's managers make on a replica's servers exists on the server.
    from mr_search.cpu.server import HFRolloutServer

    for name in (
        "wake_up",
        "sleep",
        "abort_all_requests",
        "resume_generation",
        "clear_kv_cache",
        "release_kv_cache",
        "resume_kv_cache",
        "start_profile",
        "stop_profile",
        "generate",
    ):
        assert callable(getattr(HFRolloutServer, name)), name
        assert hasattr(RolloutReplica, name) or name == "generate"


def test_registration_is_idempotent() -> None:
    from verl.workers.rollout.replica import RolloutReplicaRegistry

    from mr_search import cpu

    cpu.register()
    cpu.register()
    assert RolloutReplicaRegistry.get("mr_hf").__name__ == "HFReplica"
