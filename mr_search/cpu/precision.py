"""The CPU engine's precision: verl's bf16 where the CPU computes it natively, float32 where torch would emulate it.

Read from ``/proc/cpuinfo`` on Linux: importing torch costs seconds a launch.
"""

from __future__ import annotations

from pathlib import Path

NATIVE_BF16_FLAGS = frozenset({"avx512_bf16", "amx_bf16"})
CPUINFO = Path("/proc/cpuinfo")


def linux_cpu_flags(cpuinfo: Path | None = None) -> frozenset[str] | None:
    """The x86 flags of the first CPU in ``cpuinfo`` (empty where none are listed, e.g. ARM); None if unreadable."""
    try:
        text = (cpuinfo or CPUINFO).read_text(encoding="utf-8", errors="replace")
    except OSError:
        return None
    for line in text.splitlines():
        name, sep, value = line.partition(":")
        if sep and name.strip() == "flags":
            return frozenset(value.split())
    return frozenset()


def torch_has_native_bf16() -> bool:
    """torch's own CPU feature probe (no public API yet): AVX512-BF16 or AMX-BF16."""
    import torch

    try:
        caps = torch._C._cpu._get_cpu_capability()
    except (AttributeError, RuntimeError):
        return False
    return bool(caps.get("avx512_bf16") or caps.get("amx_bf16"))


def cpu_has_native_bf16() -> bool:
    """AVX512-BF16 or AMX-BF16: CPUs where bf16 matrix products run at full speed (elsewhere torch emulates them)."""
    flags = linux_cpu_flags()
    if flags is None:
        return torch_has_native_bf16()
    return bool(flags & NATIVE_BF16_FLAGS)


def cpu_dtype() -> str:
    """``bfloat16`` on a CPU with native bf16, else ``float32``."""
    return "bfloat16" if cpu_has_native_bf16() else "float32"


if __name__ == "__main__":
    print(cpu_dtype())
