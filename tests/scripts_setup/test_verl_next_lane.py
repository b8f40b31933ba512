"""The verl-next lane's test list (`VERL_NEXT_TESTS` in the Makefile) names test files that exist.

A test module moved or renamed without the list following it stops the lane at collection, on a machine that runs
it rarely; make's own reading of the variable is taken, so line continuations and overrides count as make sees them.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SHOW = "mr-search-show-verl-next: ; @echo $(VERL_NEXT_TESTS)\n"


@pytest.mark.skipif(shutil.which("make") is None, reason="make is not installed")
def test_every_file_of_the_lane_exists() -> None:
    done = subprocess.run(
        ["make", "-s", "--no-print-directory", "-f", "Makefile", "-f", "-", "mr-search-show-verl-next"],
        input=SHOW,
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=60,
        check=True,
    )
    listed = done.stdout.split()
    assert len(listed) >= 10, done.stdout
    missing = [name for name in listed if not (ROOT / name.split("::")[0]).is_file()]
    assert not missing, f"VERL_NEXT_TESTS names files that are gone: {missing}"
