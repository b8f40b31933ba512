"""The native-bf16 probe: the kernel's CPU flags answer without torch, and agree with torch's own probe."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from mr_search.cpu import precision

X86 = "processor\t: 0\nflags\t\t: fpu sse2 avx2 {extra}\n\nprocessor\t: 1\nflags\t\t: fpu sse2 avx2 {extra}\n"
ARM = "processor\t: 0\nFeatures\t: fp asimd bf16\n"


@pytest.mark.parametrize(
    ("text", "native"),
    [
        (X86.format(extra="avx512f"), False),
        (X86.format(extra="avx512f avx512_bf16"), True),
        (X86.format(extra="amx_tile amx_bf16"), True),
        (ARM, False),  # torch's probe names only x86 features: no native bf16 there either
    ],
)
def test_the_kernels_flags_decide(tmp_path: Path, monkeypatch, text: str, native: bool) -> None:
    cpuinfo = tmp_path / "cpuinfo"
    cpuinfo.write_text(text)
    monkeypatch.setattr(precision, "CPUINFO", cpuinfo)
    monkeypatch.setattr(precision, "torch_has_native_bf16", lambda: pytest.fail("torch asked although flags answered"))
    assert precision.cpu_has_native_bf16() is native
    assert precision.cpu_dtype() == ("bfloat16" if native else "float32")


def test_without_proc_cpuinfo_torch_answers(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setattr(precision, "CPUINFO", tmp_path / "absent")
    monkeypatch.setattr(precision, "torch_has_native_bf16", lambda: True)
    assert precision.cpu_has_native_bf16() is True


@pytest.mark.skipif(not precision.CPUINFO.is_file(), reason="no /proc/cpuinfo: torch's probe is the only one")
def test_the_flags_agree_with_torchs_probe_on_this_machine() -> None:
    assert precision.cpu_has_native_bf16() == precision.torch_has_native_bf16()


def test_the_command_imports_no_torch() -> None:
    """train_grpo_step.sh asks it at every launch with CPU_DTYPE=auto: an interpreter start, not a torch import."""
    code = (
        "import runpy, sys; runpy.run_module('mr_search.cpu.precision', run_name='__main__'); "
        "print('torch' in sys.modules)"
    )
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert run.returncode == 0, run.stderr
    dtype, torch_imported = run.stdout.split()
    assert dtype in ("bfloat16", "float32")
    assert torch_imported == ("False" if precision.CPUINFO.is_file() else "True")
