"""The engine benchmarks' CPU accounting on real processes: a spinning grandchild counts, a sleeping one does not."""

from __future__ import annotations

import importlib
import subprocess
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[2] / "scripts" / "bench"
sys.path.insert(0, str(BENCH))  # run by path, as the benchmark is
idle = importlib.import_module("engine_idle_cpu")
server = importlib.import_module("sglang_server")


def _parent_of(child_code: str) -> subprocess.Popen:
    """A process whose child starts a grandchild running ``child_code``: three levels, as a server's tree has."""
    middle = f"import subprocess, sys; subprocess.run([sys.executable, '-c', {child_code!r}])"
    code = f"import subprocess, sys; subprocess.run([sys.executable, '-c', {middle!r}])"
    return subprocess.Popen([sys.executable, "-c", code])


def _measured(child_code: str) -> dict[str, float]:
    parent = _parent_of(child_code)
    try:
        for _ in range(100):  # until the grandchild exists
            if len(server.process_tree(parent.pid)) > 2:
                break
            subprocess.run(["sleep", "0.05"], check=True)
        return server.tree_cpu_percent(parent.pid, 1.0)
    finally:
        for pid in reversed(server.process_tree(parent.pid)):
            subprocess.run(["kill", "-9", str(pid)], check=False)
        parent.wait()


def test_a_spinning_grandchild_is_counted_and_a_sleeping_one_is_not() -> None:
    spinning = _measured("while True: pass")
    sleeping = _measured("import time; time.sleep(30)")
    assert len(spinning) == 3 and len(sleeping) == 3, "the root, its child and its grandchild"
    # One core's worth alone; on the 2-core CI box beside a training run its share can fall well below half a core,
    # still far above a sleeping tree's (whose grandchild's start-up may fall inside the window).
    assert max(spinning.values()) > 20.0, spinning
    assert sum(sleeping.values()) < 10.0, sleeping


def test_a_folder_without_a_model_is_refused_before_any_server_starts(tmp_path: Path) -> None:
    with pytest.raises(SystemExit) as stop:
        idle.main(["--model", str(tmp_path)])
    assert stop.value.code == 2
