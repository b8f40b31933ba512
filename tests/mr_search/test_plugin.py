"""`import verl` alone registers every MR-Search part (verl hides plugin import errors at DEBUG level)."""

from __future__ import annotations

import json
import subprocess
import sys

# Runs in a fresh interpreter: nothing of ours is imported by hand, verl's entry-point discovery must do it.
PROBE = """
import json, verl
from verl.trainer.ppo.core_algos import ADV_ESTIMATOR_REGISTRY
from verl.experimental.agent_loop import agent_loop
from verl.plugin.platform.platform_manager import PlatformRegistry
from verl.workers.rollout.base import _ROLLOUT_REGISTRY
from verl.workers.rollout.replica import RolloutReplicaRegistry
from verl.trainer.ppo.v1 import trainer_base
print(json.dumps({
    "estimators": sorted(ADV_ESTIMATOR_REGISTRY),
    "agent_loops": sorted(agent_loop._agent_loop_registry),
    "platforms": sorted(PlatformRegistry._platforms),
    "rollouts": sorted(f"{name}/{mode}" for name, mode in _ROLLOUT_REGISTRY),
    "replicas": sorted(RolloutReplicaRegistry._registry),
    "trainers": sorted(trainer_base.TRAINER_REGISTRY),
}))
"""


def test_import_verl_registers_every_part() -> None:
    done = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    found = json.loads(done.stdout.strip().splitlines()[-1])
    assert "mr_search" in found["estimators"], found["estimators"]
    assert "mr_search" in found["agent_loops"], found["agent_loops"]
    assert "cpu" in found["platforms"], found["platforms"]
    assert "mr_hf/async" in found["rollouts"], found["rollouts"]
    assert "mr_hf" in found["replicas"], found["replicas"]
    assert "mr_search" in found["trainers"], found["trainers"]
