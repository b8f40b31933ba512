"""The shell libraries' tests: a snippet run in bash with one of scripts/lib sourced."""

from __future__ import annotations

import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest

LIBS = Path(__file__).resolve().parents[2] / "scripts" / "lib"


@pytest.fixture
def sourced() -> Callable[[str, str], subprocess.CompletedProcess[str]]:
    """``sourced("pool.sh", snippet)``: the snippet under ``set -euo pipefail`` after sourcing scripts/lib/pool.sh."""

    def run(lib: str, snippet: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            ["bash", "-c", f'set -euo pipefail; source "{LIBS / lib}"; {snippet}'],
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )

    return run
