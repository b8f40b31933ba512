"""SGLang's first-use CUDA kernels, built in the background before the engine needs them.

SGLang 0.5.12 builds five kernels with nvcc at first use, one after another in step 1; here side by side, best effort.
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

# Model families whose RoPE SGLang applies in the GPT-NeoX layout (get_rope's default, is_neox_style=True).
NEOX_ROPE_MODELS: Final = frozenset({"qwen2", "qwen3", "llama", "mistral"})
# Head sizes SGLang's RotaryEmbedding runs with its fused kernel on CUDA; any other takes its plain kernel.
FUSED_ROPE_HEAD_DIMS: Final = frozenset({64, 128, 256, 512})
DTYPE_BYTES: Final = {"bfloat16": 2, "float16": 2, "float32": 4}


@dataclass(frozen=True)
class JitBuild:
    """One ``sglang.jit_kernel.<kernel>._jit_<name>_module(*args)`` call; dtypes are torch attribute names."""

    kernel: str
    builder: str
    args: tuple[bool | int | str, ...]

    def label(self) -> str:
        return f"{self.kernel}{self.args}"


def sglang_jit_builds(config: Mapping[str, Any], dtype: str = "bfloat16") -> list[JitBuild]:
    """The JIT modules SGLang's eager decode and prefill load for this dense policy in ``dtype``."""
    if dtype not in DTYPE_BYTES:
        raise ValueError(f"dtype {dtype!r} is not one of {sorted(DTYPE_BYTES)}; pass --dtype bfloat16 (verl's default)")
    try:
        heads = int(config["num_attention_heads"])
        head_dim = int(config.get("head_dim") or int(config["hidden_size"]) // heads)
    except KeyError as missing:
        raise ValueError(f"the model config has no {missing}: is --model a Hugging Face model folder?") from None
    kv_heads = int(config.get("num_key_value_heads") or heads)
    builds = [JitBuild("activation", "_jit_activation_module", (dtype,))]
    if str(config.get("model_type", "")) in NEOX_ROPE_MODELS:
        if head_dim in FUSED_ROPE_HEAD_DIMS:
            rope_dim = int(head_dim * float(config.get("partial_rotary_factor", 1.0)))
            builds.append(JitBuild("rope", "_jit_fused_rope_module", (True, rope_dim, dtype)))
        else:  # SGLang's RotaryEmbedding falls back to its plain kernel for other head sizes (the tiny policy: 32)
            builds.append(JitBuild("rope", "_jit_rotary_embedding_module", ()))
    builds.append(JitBuild("kvcache", "_jit_kvcache_module", (kv_heads * head_dim * DTYPE_BYTES[dtype],)))
    for kernel in ("clamp_position", "resolve_future_token_ids"):
        builds += [JitBuild(kernel, f"_jit_{kernel}_module", (width,)) for width in ("int64", "int32")]
    return builds


def _resolve(arg: bool | int | str) -> Any:
    import torch

    return getattr(torch, arg) if isinstance(arg, str) else arg


def build_one(build: JitBuild) -> Callable[[], object]:
    """The call that builds (or loads, when cached) one module."""

    def run() -> object:
        module = importlib.import_module(f"sglang.jit_kernel.{build.kernel}")
        return getattr(module, build.builder)(*(_resolve(a) for a in build.args))

    return run


def warm(builds: Sequence[JitBuild], run: Callable[[JitBuild], Callable[[], object]] = build_one) -> list[str]:
    """Builds every module side by side (nvcc runs as a subprocess, so threads overlap); one line per module."""

    def timed(build: JitBuild) -> str:
        started = time.perf_counter()
        try:
            run(build)()
        except Exception as error:  # best effort: the engine builds what failed here
            return f"engine_warm: {build.label()} not built ({type(error).__name__}: {error}); the engine builds it"
        return f"engine_warm: {build.label()} ready in {time.perf_counter() - started:.1f} s"

    with ThreadPoolExecutor(max_workers=max(1, len(builds))) as pool:
        return list(pool.map(timed, builds))


def _pin_arch() -> str | None:
    """The CUDA arch, set once: sglang sets and removes ``TVM_FFI_CUDA_ARCH_LIST`` per build, racing in threads."""
    import torch

    if not torch.cuda.is_available():
        return None
    from sglang.jit_kernel.utils import get_jit_cuda_arch

    arch = get_jit_cuda_arch().target_name
    os.environ["TVM_FFI_CUDA_ARCH_LIST"] = arch
    return arch


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", type=Path, required=True, help="the policy's Hugging Face folder (config.json)")
    parser.add_argument("--dtype", default="bfloat16", help="the rollout's dtype (verl's default: bfloat16)")
    args = parser.parse_args(argv)
    config_path = args.model / "config.json"
    if not config_path.is_file():
        print(f"engine_warm: no {config_path}; pass --model <the policy's folder>", file=sys.stderr)
        return 2
    try:
        builds = sglang_jit_builds(json.loads(config_path.read_text()), args.dtype)
    except ValueError as error:
        print(f"engine_warm: {error}", file=sys.stderr)
        return 2
    started = time.perf_counter()
    try:
        arch = _pin_arch()
    except ImportError as error:
        print(f"engine_warm: nothing built ({error}); the engine builds its kernels at first use")
        return 0
    if arch is None:
        print("engine_warm: no CUDA device; nothing to build")
        return 0
    for line in warm(builds):
        print(line, flush=True)
    print(f"engine_warm: {len(builds)} modules for sm {arch} in {time.perf_counter() - started:.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
