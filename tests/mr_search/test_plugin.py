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


@pytest.mark.xdist_group("fresh_verl")
def test_a_fault_asked_for_is_installed_on_the_rollout_adapters(fresh_verl: dict) -> None:
    """The probe's interpreter runs with MR_SEARCH_FAULT=engine-stop@7: `import verl` installs it
    (mr_search.ops.faults)."""
    assert fresh_verl["fault_on_cpu_adapter"] == "Fault(action='engine-stop', step=7)"
