"""Each CPU workaround still matches verl: these fail when a verl upgrade moves what they work around.

The source checks read verl's and transformers' installed files (docs/cpu-backend.md, workarounds 2-7, 10, 12); the
subprocess test arms the workarounds the way a CPU run does (``VERL_PLATFORM=cpu``) and checks their effect.
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from mr_search.cpu import workarounds

REPO = Path(__file__).resolve().parents[3]


def _source(module: str) -> str:
    spec = importlib.util.find_spec(module)
    assert spec is not None and spec.origin, f"verl module {module} is gone: re-check mr_search/cpu/workarounds.py"
    return Path(spec.origin).read_text(encoding="utf-8")


def _expect(module: str, snippet: str, item: int) -> None:
    assert snippet in _source(module), (
        f"verl changed {module}: {snippet!r} is gone. Re-check CPU workaround {item} in "
        "mr_search/cpu/workarounds.py (and docs/cpu-backend.md); it may be obsolete or need to move."
    )


def test_item2_backend_string_and_its_caller() -> None:
    _expect("verl.utils.distributed", 'backend = backend or f"cpu:gloo,{get_device_name()}:{get_nccl_backend()}"', 2)
    _expect("verl.workers.engine_workers", "initialize_global_process_group_ray(timeout_second=None)", 2)


def test_item2_is_still_needed_torch_rejects_the_duplicate_cpu_backend() -> None:
    import torch.distributed as dist
    from torch.distributed.distributed_c10d import BackendConfig

    with pytest.raises(ValueError, match="Duplicate device type cpu"):
        BackendConfig("cpu:gloo,cpu:gloo")
    assert dist.is_gloo_available()


def test_item3_resource_pools_ask_ray_for_gpus() -> None:
    _expect("verl.single_controller.ray.base", "use_gpu=True,", 3)
    _expect(
        "verl.single_controller.ray.base",
        'node_info.get("GPU", 0) if "GPU" in node_info else node_info.get("NPU", 0)',
        3,
    )


def test_item4_fsdp_engines_are_registered_for_cuda_and_npu_only() -> None:
    source = _source("verl.workers.engine.fsdp.transformer_impl")
    for model_type, cls in (("language_model", "FSDPEngineWithLMHead"), ("value_model", "FSDPEngineWithValueHead")):
        registration = (
            f'@EngineRegistry.register(model_type="{model_type}", backend=["fsdp", "fsdp2"], device=["cuda", "npu"])'
        )
        assert registration in source, f"verl changed the FSDP engine registration: re-check CPU workaround 4 ({cls})"
        assert f"class {cls}(" in source


def test_item5_flash_attention_is_the_default_attention() -> None:
    _expect("verl.workers.config.model", 'self.override_config.get("attn_implementation", "flash_attention_2")', 5)
    assert "++actor_rollout_ref.model.override_config.attn_implementation=sdpa" in workarounds.OVERRIDES


def test_item5_critic_loader_hard_codes_flash_attention() -> None:
    import inspect

    from verl.utils.model import load_valuehead_model

    source = inspect.getsource(load_valuehead_model)
    assert 'attn_implementation="flash_attention_2"' in source, "verl's critic loader changed: re-check workaround 5"
    assert list(inspect.signature(load_valuehead_model).parameters) == [
        "local_path",
        "torch_dtype",
        "model_config",
        "trust_remote_code",
    ]
    _expect("verl.workers.engine.fsdp.transformer_impl", "from verl.utils.model import load_valuehead_model", 5)


def test_item6_reference_offload_pins_memory() -> None:
    _expect("verl.workers.engine.fsdp.transformer_impl", "offload_policy = CPUOffloadPolicy(pin_memory=True)", 6)


def test_item7_fsdp1_syncs_module_states() -> None:
    _expect("verl.workers.engine.fsdp.transformer_impl", "sync_module_states=True,", 7)
    assert "actor_rollout_ref.actor.strategy=fsdp2" in workarounds.OVERRIDES


def test_item10_trainer_casts_global_steps_to_int() -> None:
    _expect(
        "verl.trainer.ppo.v1.trainer_base", 'np.array([tag["min_global_steps"] for tag in batch.tags], dtype=int)', 10
    )
    _expect("verl.workers.rollout.llm_server", 'output.extra_fields.setdefault("min_global_steps", global_steps)', 10)


def test_item12_transformers_generation_imports_sklearn_when_installed() -> None:
    _expect("transformers.generation.candidate_generator", "if is_sklearn_available():\n    from sklearn", 12)
    assert importlib.util.find_spec("sklearn") is not None, "scikit-learn is no longer installed: item 12 may go"


def test_item12_reward_workers_are_not_needed_when_the_loop_scores() -> None:
    """verl calls a reward worker only for an output the agent loop left unscored (and the loop scores all)."""
    loop = "verl.experimental.agent_loop.agent_loop"
    _expect(loop, "if final_output.reward_score is None and enable_async_reward:", 12)
    assert "reward.num_workers=0" in workarounds.OVERRIDES


def test_workarounds_stay_off_without_the_cpu_platform() -> None:
    import verl.utils.distributed as distributed

    assert not workarounds.install()
    assert not getattr(distributed.initialize_global_process_group_ray, "__mr_search_cpu_workaround__", False)


_PROBE = r"""
import json, os
import verl
from verl.utils.device import get_device_name, get_torch_device
import verl.workers.engine_workers as engine_workers
import verl.workers.engine.fsdp.transformer_impl as impl
from verl.workers.engine.base import EngineRegistry
import torch.distributed as dist

os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=os.environ["PROBE_PORT"], RANK="0", WORLD_SIZE="1")
engine_workers.initialize_global_process_group_ray(timeout_second=None)
report = {
    "device": get_device_name(),
    "backend": dist.get_backend(),
    "engine": EngineRegistry.get_engine_cls("language_model", "fsdp2").__name__,
    "value_engine": EngineRegistry.get_engine_cls("value_model", "fsdp").__name__,
    "pin_memory": impl.CPUOffloadPolicy(pin_memory=True).pin_memory,
    "offload_is_policy": isinstance(impl.CPUOffloadPolicy(), __import__("torch").distributed.fsdp.CPUOffloadPolicy),
}
from transformers import AutoConfig
import verl.utils.model as model_utils
config = AutoConfig.from_pretrained(os.environ["PROBE_MODEL"])
config._attn_implementation = "flash_attention_2"  # verl's default, which cannot run on CPU
config.num_labels = 1
critic = model_utils.load_valuehead_model(os.environ["PROBE_MODEL"], __import__("torch").float32, config, False)
report["critic"] = [type(critic).__name__, critic.config._attn_implementation]
dist.destroy_process_group()
import sys
import transformers.generation.candidate_generator  # noqa: F401  (what every verl worker imports)
report["sklearn"] = "sklearn" in sys.modules
print("PROBE" + json.dumps(report))
"""


def test_cpu_platform_run_arms_every_workaround(tiny_model_dir: Path) -> None:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    env = {**os.environ, **workarounds.ENV, "PROBE_PORT": str(port), "PROBE_MODEL": str(tiny_model_dir)}
    result = subprocess.run(
        [sys.executable, "-c", _PROBE], env=env, capture_output=True, text=True, timeout=240, cwd=REPO
    )
    assert result.returncode == 0, result.stderr[-3000:]
    line = next(line for line in result.stdout.splitlines() if line.startswith("PROBE"))
    report = json.loads(line[len("PROBE") :])
    assert report == {
        "device": "cpu",
        "backend": "gloo",
        "engine": "FSDPEngineWithLMHead",
        "value_engine": "FSDPEngineWithValueHead",
        "pin_memory": False,
        "offload_is_policy": True,
        "critic": ["Qwen2ForTokenClassification", "sdpa"],
        "sklearn": False,
    }


def _leaves(node: object, prefix: str = "") -> dict[str, object]:
    if isinstance(node, dict):
        return {key: value for k, v in node.items() for key, value in _leaves(v, f"{prefix}{k}.").items()}
    return {prefix[:-1]: node}


def test_config_files_for_the_launch_script_match_the_module() -> None:
    """configs/cpu_backend.env is ENV; configs/engine/cpu.yaml (``+engine=cpu``) sets what OVERRIDES sets."""
    import yaml

    env_lines = (REPO / "configs" / "cpu_backend.env").read_text().splitlines()
    assert env_lines == [f"{key}={value}" for key, value in workarounds.ENV.items()]
    group = _leaves(yaml.safe_load((REPO / "configs" / "engine" / "cpu.yaml").read_text()))
    overrides = dict(override.lstrip("+").split("=", 1) for override in workarounds.OVERRIDES)
    assert group == {key: yaml.safe_load(value) for key, value in overrides.items()}


def test_overrides_compose_with_verls_trainer_config_and_validate() -> None:
    from hydra import compose, initialize_config_dir
    from omegaconf import OmegaConf
    from verl.utils.config import omega_conf_to_dataclass
    from verl.workers.config import RolloutConfig

    config_dir = Path(importlib.util.find_spec("verl.trainer").origin).parent / "config"
    with initialize_config_dir(config_dir=str(config_dir), version_base=None):
        config = compose(config_name="ppo_trainer", overrides=list(workarounds.OVERRIDES))
    OmegaConf.resolve(config)
    assert config.trainer.device == "cpu"
    assert config.ray_kwargs.ray_init.num_gpus == config.trainer.n_gpus_per_node * config.trainer.nnodes
    assert config.actor_rollout_ref.ref.strategy == config.critic.strategy == "fsdp2"
    assert config.actor_rollout_ref.model.override_config.attn_implementation == "sdpa"
    rollout = omega_conf_to_dataclass(config.actor_rollout_ref.rollout, dataclass_type=RolloutConfig)
    assert rollout.name == workarounds.ROLLOUT_NAME
