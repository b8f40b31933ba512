"""`make test` runs on two pytest-xdist workers with `--dist loadgroup`: tests marked with one `xdist_group` must land
on one worker, or a module-scoped training run they share is started once per worker (minutes each on 2 cores)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

GROUPED = """
import os

import pytest


@pytest.mark.xdist_group("shared_run")
def test_first():
    print("first on", os.environ["PYTEST_XDIST_WORKER"])


@pytest.mark.xdist_group("shared_run")
def test_second():
    print("second on", os.environ["PYTEST_XDIST_WORKER"])


@pytest.mark.parametrize("n", range(4))
def test_other(n):
    pass
"""


def test_tests_of_one_xdist_group_run_on_one_worker(tmp_path: Path) -> None:
    (tmp_path / "test_grouped.py").write_text(GROUPED)
    run = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-n", "2", "--dist", "loadgroup", "-rA", "-q"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    workers = {line.split()[0]: line.split()[-1] for line in run.stdout.splitlines() if " on gw" in line}
    assert set(workers) == {"first", "second"}, run.stdout[-3000:]
    assert workers["first"] == workers["second"], f"one group on two workers: {workers}"
