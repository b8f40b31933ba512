"""`import verl` alone registers every MR-Search part (verl hides plugin import errors at DEBUG level)."""

from __future__ import annotations

import pytest


@pytest.mark.xdist_group("fresh_verl")
def test_import_verl_registers_every_part(fresh_verl: dict) -> None:
    found = fresh_verl["registries"]
    assert "mr_search" in found["estimators"], found["estimators"]
    assert "mr_search" in found["agent_loops"], found["agent_loops"]
    assert "cpu" in found["platforms"], found["platforms"]
    assert "mr_hf/async" in found["rollouts"], found["rollouts"]
    assert "mr_hf" in found["replicas"], found["replicas"]
    assert "mr_search" in found["trainers"], found["trainers"]
