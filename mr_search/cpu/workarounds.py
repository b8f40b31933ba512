"""The CPU backend's workarounds for verl 0.9.1 gaps (docs/cpu-backend.md), armed only when ``VERL_PLATFORM=cpu``."""

from __future__ import annotations

import functools
import logging
import sys
from collections.abc import Callable
from types import ModuleType
from typing import Any, Final

from mr_search.cpu import ROLLOUT_NAME
from mr_search.cpu.platform import cpu_platform_selected
from mr_search.import_hooks import when_imported

logger = logging.getLogger(__name__)

# Environment of every process of a CPU run (the driver's environment reaches Ray's local workers).
ENV: Final[dict[str, str]] = {
    "VERL_PLATFORM": "cpu",
    # torch.compile needs a C++ toolchain per process and buys nothing for tiny models on CPU.
    "TORCH_COMPILE_DISABLE": "1",
    "TOKENIZERS_PARALLELISM": "false",
    # Ray starts no idle Python workers ahead of the actors: on a few cores those that no actor takes only cost CPU.
    "RAY_prestart_worker_first_driver": "0",
}

# Hydra overrides of a CPU run (items 3, 5, 7, the rollout backend, no Ray dashboard; a logical GPU per rank).
OVERRIDES: Final[tuple[str, ...]] = (
    "trainer.device=cpu",
    "trainer.nnodes=1",
    "trainer.n_gpus_per_node=1",
    "++ray_kwargs.ray_init.num_gpus=${trainer.n_gpus_per_node}",
    "ray_kwargs.ray_init.num_cpus=16",
    "++ray_kwargs.ray_init.include_dashboard=False",
    "actor_rollout_ref.actor.strategy=fsdp2",
    "critic.strategy=fsdp2",
    "++actor_rollout_ref.model.override_config.attn_implementation=sdpa",
    "actor_rollout_ref.model.use_remove_padding=False",
    f"actor_rollout_ref.rollout.name={ROLLOUT_NAME}",
    "actor_rollout_ref.rollout.tensor_model_parallel_size=1",
    "actor_rollout_ref.rollout.agent.num_workers=1",
    # Item 12: no reward-loop process; verl calls one only for an output without a reward, and ours have one.
    "reward.num_workers=0",
)

_PATCHED: Final = "__mr_search_cpu_workaround__"


def _gloo_when_unset(init_fn: Callable[..., Any]) -> Callable[..., Any]:
    """Wraps ``initialize_global_process_group_ray`` so that a missing backend means plain ``gloo``."""
    if getattr(init_fn, _PATCHED, False):
        return init_fn

    @functools.wraps(init_fn)
    def init_with_gloo(timeout_second: int | None = None, backend: str | None = None) -> Any:
        return init_fn(timeout_second=timeout_second, backend=backend or "gloo")

    setattr(init_with_gloo, _PATCHED, True)
    return init_with_gloo


def patch_process_group_backend(module: ModuleType) -> None:
    """Item 2, for a module holding ``initialize_global_process_group_ray``."""
    name = "initialize_global_process_group_ray"
    if not hasattr(module, name):
        raise RuntimeError(
            f"mr_search CPU workaround 2: {module.__name__}.{name} is gone; verl moved the process-group "
            "setup, so check the backend string it builds on CPU and update mr_search/cpu/workarounds.py"
        )
    setattr(module, name, _gloo_when_unset(getattr(module, name)))


def register_fsdp_engines_for_cpu(module: ModuleType) -> None:
    """Item 4: verl's FSDP engines, registered for device "cpu" as well."""
    from verl.workers.engine.base import EngineRegistry

    for model_type, engine_name in (
        ("language_model", "FSDPEngineWithLMHead"),
        ("value_model", "FSDPEngineWithValueHead"),
    ):
        engine_cls = getattr(module, engine_name, None)
        if engine_cls is None:
            raise RuntimeError(
                f"mr_search CPU workaround 4: {module.__name__}.{engine_name} is gone; update "
                "mr_search/cpu/workarounds.py to the FSDP engine classes of this verl version"
            )
        for backend in ("fsdp", "fsdp2"):
            registered = EngineRegistry._engines.get(model_type, {}).get(backend, {})
            if "cpu" not in registered:
                EngineRegistry.register(model_type=model_type, backend=backend, device="cpu")(engine_cls)


def unpin_offload_policy(module: ModuleType) -> None:
    """Item 6: ``CPUOffloadPolicy(pin_memory=True)`` in the FSDP engine builds an unpinned policy."""
    policy_cls = getattr(module, "CPUOffloadPolicy", None)
    if policy_cls is None:
        raise RuntimeError(
            f"mr_search CPU workaround 6: {module.__name__}.CPUOffloadPolicy is gone; check how verl "
            "offloads FSDP2 reference models now and update mr_search/cpu/workarounds.py"
        )
    if getattr(policy_cls, _PATCHED, False):
        return

    class UnpinnedCPUOffloadPolicy(policy_cls):  # type: ignore[misc, valid-type]
        """Pinned host memory needs an accelerator; on CPU the offloaded parameters stay plain."""

        def __init__(self, pin_memory: bool = False) -> None:
            super().__init__(pin_memory=False)

    setattr(UnpinnedCPUOffloadPolicy, _PATCHED, True)
    module.CPUOffloadPolicy = UnpinnedCPUOffloadPolicy


def _load_valuehead_with_config_attention(load_fn: Callable[..., Any]) -> Callable[..., Any]:
    if getattr(load_fn, _PATCHED, False):
        return load_fn

    @functools.wraps(load_fn)
    def load_valuehead_model(local_path: str, torch_dtype: Any, model_config: Any, trust_remote_code: bool) -> Any:
        from transformers import AutoModelForTokenClassification

        configured = getattr(model_config, "_attn_implementation", None) or "sdpa"
        # flash-attention kernels need a GPU: on the CPU platform they always become sdpa.
        attention = "sdpa" if "flash" in configured else configured
        return AutoModelForTokenClassification.from_pretrained(
            local_path,
            dtype=torch_dtype,
            config=model_config,
            attn_implementation=attention,
            trust_remote_code=trust_remote_code,
        )

    setattr(load_valuehead_model, _PATCHED, True)
    return load_valuehead_model


def patch_value_model_attention(module: ModuleType) -> None:
    """Item 5, critic: ``verl.utils.model.load_valuehead_model`` without its hard-coded flash-attention."""
    if not hasattr(module, "load_valuehead_model"):
        raise RuntimeError(
            f"mr_search CPU workaround 5: {module.__name__}.load_valuehead_model is gone; check how verl loads "
            "critics now and update mr_search/cpu/workarounds.py"
        )
    module.load_valuehead_model = _load_valuehead_with_config_attention(module.load_valuehead_model)


def _patch_fsdp_engine_module(module: ModuleType) -> None:
    register_fsdp_engines_for_cpu(module)
    unpin_offload_policy(module)


def _sklearn_unavailable() -> bool:
    return False


def skip_transformers_sklearn() -> None:
    """Item 12: transformers' ``is_sklearn_available`` reports False (unless already too late)."""
    if "transformers.generation.candidate_generator" in sys.modules:
        return
    import transformers.utils as hf_utils
    import transformers.utils.import_utils as hf_import_utils

    hf_utils.is_sklearn_available = hf_import_utils.is_sklearn_available = _sklearn_unavailable


_installed = False


def install() -> bool:
    """Arms the workarounds in this process if ``VERL_PLATFORM=cpu``; returns whether they are armed."""
    global _installed
    if not cpu_platform_selected():
        return False
    if not _installed:
        when_imported("verl.utils.distributed", patch_process_group_backend)
        when_imported("verl.workers.engine_workers", patch_process_group_backend)
        when_imported("verl.workers.engine.fsdp.transformer_impl", _patch_fsdp_engine_module)
        when_imported("verl.utils.model", patch_value_model_attention)
        skip_transformers_sklearn()
        _installed = True
        logger.info("mr_search CPU workarounds armed (VERL_PLATFORM=cpu)")
    return True
