"""The benchmark's port of the original grpo_prm_step computes the same advantages as the vectorized path."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest
import torch

SCRIPT = Path(__file__).resolve().parents[3] / "scripts" / "bench" / "bench_advantage.py"


def _bench() -> ModuleType:
    spec = importlib.util.spec_from_file_location("mr_search_bench_advantage", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("gamma", [0.0, 0.5, 1.0])
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_reference_port_equals_the_vectorized_estimator(gamma: float, seed: int) -> None:
    bench = _bench()
    batch = bench.make_batch(rows=40, tokens=90, attempts=3, group_size=5, seed=seed)
    token_rewards, step_ids = bench.original_inputs(batch)
    want = bench.reference_grpo_prm_step(token_rewards, step_ids, batch["response_mask"], batch["uids"], gamma)
    got = bench.vectorized(batch, gamma)
    assert torch.count_nonzero(want) > 0
    torch.testing.assert_close(got, want, rtol=0.0, atol=1e-5)


def test_bench_script_runs_and_checks_its_outputs() -> None:
    proc = subprocess.run(
        [sys.executable, str(SCRIPT), "--rows", "60", "--tokens", "128", "--reference-repeats", "2", "--goal", "0"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "outputs equal to float32 rounding (1): True" in proc.stdout
    assert "speed-up at torch's default" in proc.stdout
