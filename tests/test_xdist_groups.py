"""`make test` runs on two pytest-xdist workers with `--dist loadgroup`: tests/conftest.py must group the tests that
share a module-scoped fixture, or a training run they share is started once per worker (minutes each on 2 cores)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

MODULE_FIXTURE = """
import os

import pytest


@pytest.fixture(scope="module")
def built():
    with open(os.environ["BUILDS"], "a") as builds:
        builds.write(os.environ["PYTEST_XDIST_WORKER"] + "\\n")
    return 1


@pytest.mark.parametrize("n", range(6))
def test_user(built, n):
    pass


@pytest.mark.parametrize("n", range(6))
def test_other(n):
    pass
"""


def test_tests_sharing_a_module_fixture_run_on_one_worker(tmp_path: Path) -> None:
    """tests/conftest.py groups them (one build of the fixture); the module's other tests still spread."""
    (tmp_path / "conftest.py").write_text((Path(__file__).parent / "conftest.py").read_text())
    (tmp_path / "test_module_fixture.py").write_text(MODULE_FIXTURE)
    builds = tmp_path / "builds.txt"
    run = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-n", "2", "--dist", "loadgroup", "-q"],
        cwd=tmp_path,
        env={**os.environ, "BUILDS": str(builds)},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    assert len(builds.read_text().split()) == 1, f"the module fixture was built on: {builds.read_text().split()}"
