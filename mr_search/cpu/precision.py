"""The CPU engine's precision: verl's bf16 where the CPU computes it natively, float32 where torch would emulate it.

``python -m mr_search.cpu.precision`` prints ``bfloat16`` or ``float32``; ``train_grpo_step.sh`` asks it when
``CPU_DTYPE=auto`` (docs/cpu-backend.md, "Precision").
"""

from __future__ import annotations


def cpu_has_native_bf16() -> bool:
    """AVX512-BF16 or AMX-BF16: CPUs where bf16 matrix products run at full speed (elsewhere torch emulates them)."""
    import torch

    try:
        caps = torch._C._cpu._get_cpu_capability()  # torch's own CPU feature probe (no public API yet)
    except (AttributeError, RuntimeError):
        return False
    return bool(caps.get("avx512_bf16") or caps.get("amx_bf16"))


def cpu_dtype() -> str:
    """``bfloat16`` on a CPU with native bf16, else ``float32``."""
    return "bfloat16" if cpu_has_native_bf16() else "float32"


if __name__ == "__main__":
    print(cpu_dtype())
