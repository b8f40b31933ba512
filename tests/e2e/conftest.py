"""Runs train_grpo_step.sh as a user would (a subprocess with environment knobs) and reads its run folder."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "train_grpo_step.sh"


@dataclass
class ScriptRun:
    """One finished launch of the training script."""

    returncode: int
    output: str
    run_dir: Path

    def steps(self) -> dict[int, dict[str, float]]:
        """Per-step metrics of every launch into this run folder (later launches win for a repeated step)."""
        steps: dict[int, dict[str, float]] = {}
        for path in sorted((self.run_dir / "metrics").glob("*.jsonl")):
            for line in path.read_text().splitlines():
                if line.strip():
                    row = json.loads(line)
                    steps[int(row["step"])] = row["data"]
        return steps


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _port_answers(port: int) -> bool:
    with socket.socket() as sock:
        sock.settimeout(1)
        return sock.connect_ex(("127.0.0.1", port)) == 0


@pytest.fixture(scope="session")
def free_port() -> Callable[[], int]:
    """Returns a function giving a free TCP port on 127.0.0.1 (never 8000 in tests)."""
    return _free_port


@pytest.fixture(scope="session")
def port_answers() -> Callable[[int], bool]:
    """Returns a function telling whether something listens on 127.0.0.1:<port>."""
    return _port_answers


@pytest.fixture(scope="session")
def script_env() -> dict[str, str]:
    """The environment of a user's shell: the project's venv first on PATH, the shared cache, no GPU."""
    env = dict(os.environ)
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    env["PYTHON"] = sys.executable
    env.setdefault("MR_SEARCH_CACHE", str(REPO / ".cache"))
    return env


def _compose_command(command: list[str]) -> dict:
    """What ``command`` (``python -m verl.trainer.main_ppo --config-path=... --config-name=... overrides...``) with
    Hydra's ``--cfg job`` would print, composed in this process: the same config folder, name and overrides through
    Hydra's compose API, unresolved as ``--cfg job`` prints it, without an interpreter start and verl's imports (about
    ten seconds of CPU each). Checked against ``--cfg job`` for four of this folder's commands: equal but for one key
    the compose API adds (``model_engine``, verl's defaults-list choice). The command line itself is run in a
    subprocess by one test in this folder."""
    from hydra import compose, initialize_config_dir
    from omegaconf import OmegaConf

    entry = command.index("verl.trainer.main_ppo")
    options = [arg for arg in command[entry + 1 :] if arg.startswith("--")]
    overrides = [arg for arg in command[entry + 1 :] if not arg.startswith("--")]
    named = dict(arg[2:].split("=", 1) for arg in options)
    assert set(named) == {"config-path", "config-name"}, f"options this helper does not compose: {options}"
    with initialize_config_dir(config_dir=named["config-path"], version_base=None):
        config = compose(config_name=named["config-name"], overrides=overrides)
    return OmegaConf.to_container(config, resolve=False)


@pytest.fixture(scope="session")
def compose_command() -> Callable[[list[str]], dict]:
    """``compose_command(command)``: the config a dry run's trainer command composes into (as ``--cfg job``)."""
    return _compose_command


@pytest.fixture(scope="session")
def run_script(script_env) -> Callable[..., ScriptRun]:
    """``run_script(run_dir, *overrides, timeout=..., **knobs)`` launches the script and waits for it."""

    def _run(run_dir: Path, *overrides: str, timeout: float = 600, **knobs: str) -> ScriptRun:
        env = {**script_env, "RUN_DIR": str(run_dir), **{k: str(v) for k, v in knobs.items()}}
        result = subprocess.run(
            ["bash", str(SCRIPT), *overrides], cwd=REPO, env=env, capture_output=True, text=True, timeout=timeout
        )
        return ScriptRun(result.returncode, result.stdout + result.stderr, run_dir)

    return _run
