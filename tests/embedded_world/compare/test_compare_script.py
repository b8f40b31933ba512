"""Argument handling of examples/embedded_world/scripts/compare.sh (DRY_RUN: the plan, no training)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
SCRIPT = ROOT / "examples" / "embedded_world" / "scripts" / "compare.sh"
# Knobs a test passes itself, never the caller's shell.
OWN = ("MR_SEARCH_WORLD", "WORLD", "POLICY", "NAMESAKE_VERSION", "MR_SEARCH_NAMESAKE_VERSION", "NAMESAKE_RECIPE")


def run(tmp_path: Path, **env: str) -> subprocess.CompletedProcess[str]:
    inherited = {k: v for k, v in os.environ.items() if k not in OWN}
    full = {**inherited, "PYTHON": sys.executable, "DRY_RUN": "1", "MR_SEARCH_CACHE": str(tmp_path), **env}
    return subprocess.run(["bash", str(SCRIPT)], env=full, capture_output=True, text=True, timeout=60, check=False)


def test_default_plan(tmp_path: Path) -> None:
    result = run(tmp_path, WORK_DIR=str(tmp_path / "w"))
    assert result.returncode == 0, result.stderr
    assert "seeds 1 2 3" in result.stdout
    assert "MR-Search K=3 16 steps, baseline K=1 from 64 steps" in result.stdout
    assert "K_eval=6" in result.stdout
    assert "lr 1e-4;" in result.stdout, "the learning rate of every committed run"
    # evaluated with the embedded training's limits: 48 tokens a turn, 256 a passages block, 1024 per 3 attempts
    assert "(48 tokens a turn, 256 a passages block, 2048 a meta-episode)" in result.stdout
    assert not (tmp_path / "w").exists()  # a dry run writes nothing


def test_knobs_change_the_plan(tmp_path: Path) -> None:
    result = run(
        tmp_path, SEEDS="2", SEED_BASE="7", STEPS="4", BASELINE_STEPS="10", K_EVAL="3", MAX_NEW_TOKENS="64", LR="3e-5"
    )
    assert result.returncode == 0, result.stderr
    assert "(64 tokens a turn, 256 a passages block, 1024 a meta-episode)" in result.stdout
    assert "seeds 7 8" in result.stdout and "lr 3e-5;" in result.stdout
    assert "4 steps, baseline K=1 from 10 steps" in result.stdout
    assert "outcome feedback off (paper)" in result.stdout
    assert "outcome feedback on (MAGE-style)" in run(tmp_path, OUTCOME_FEEDBACK="1").stdout


def test_the_namesake_world_gets_its_own_report_and_port(tmp_path: Path) -> None:
    result = run(tmp_path, MR_SEARCH_WORLD="namesake", POLICY="small")
    assert result.returncode == 0, result.stderr
    assert "world namesake, policy small" in result.stdout
    assert f"report {ROOT}/reports/compare_namesake, retrieval http://127.0.0.1:8019" in result.stdout
    default = run(tmp_path)
    assert "world default, policy tiny" in default.stdout
    assert f"report {ROOT}/reports/compare_embedded, retrieval http://127.0.0.1:8000" in default.stdout


@pytest.mark.parametrize(
    ("env", "message"),
    [
        ({"WORLD": "namesake"}, "WORLD is now MR_SEARCH_WORLD (WORLD=namesake given)"),
        ({"NAMESAKE_VERSION": "4"}, "NAMESAKE_VERSION is gone: the namesake world has one version and one warm start"),
        ({"MR_SEARCH_NAMESAKE_VERSION": "4"}, "MR_SEARCH_NAMESAKE_VERSION is gone"),
        ({"MR_SEARCH_WORLD": "namesake", "NAMESAKE_RECIPE": "14"}, "NAMESAKE_RECIPE is gone"),
    ],
)
def test_one_name_per_knob_and_retired_knobs_are_named(tmp_path: Path, env: dict[str, str], message: str) -> None:
    result = run(tmp_path, **env)
    assert result.returncode != 0 and message in result.stderr


@pytest.mark.parametrize(
    ("env", "message"),
    [
        ({"SEEDS": "0"}, "SEEDS=0 is not valid"),
        ({"STEPS": "two"}, "STEPS=two is not valid"),
        ({"ATTEMPTS": "1"}, "MR-Search needs >= 2 attempts"),
        ({"K_EVAL": "-3"}, "K_EVAL=-3 is not valid"),
        ({"MAX_NEW_TOKENS": "0"}, "MAX_NEW_TOKENS=0 is not valid"),
        ({"EVAL_RESPONSE_LENGTH": "lots"}, "EVAL_RESPONSE_LENGTH=lots is not valid"),
        ({"RETRIEVER_URL": "http://example.com:80"}, "use http://127.0.0.1:<port>"),
        ({"TOKEN_TOLERANCE": "5%"}, "TOKEN_TOLERANCE=5% is not valid"),
        ({"ROLLOUT_ENGINE": "sglang"}, "ROLLOUT_ENGINE=sglang is not valid; use cpu or hf"),
        ({"LR": "fast"}, "LR=fast is not valid; use a number like 1e-4"),
        ({"OUTCOME_FEEDBACK": "yes"}, "OUTCOME_FEEDBACK=yes is not valid; use 0 (paper) or 1"),
        ({"WARM_START": "/nowhere"}, "WARM_START=/nowhere holds no HF model (config.json)"),
        ({"REFLECTION_QUESTION": "on"}, "REFLECTION_QUESTION=on is not valid; use 0 (paper), 1, or leave it empty"),
        ({"MR_SEARCH_WORLD": "twins"}, "MR_SEARCH_WORLD=twins is not valid; use default or namesake"),
        ({"POLICY": "wide"}, "POLICY=wide is not valid; use tiny or small"),
    ],
)
def test_bad_knobs_are_refused(tmp_path: Path, env: dict[str, str], message: str) -> None:
    result = run(tmp_path, **env)
    assert result.returncode != 0
    assert message in result.stderr


def test_the_script_is_read_whole_before_it_runs() -> None:
    # bash reads a plain script as it goes: an edit during an hour-long comparison shifted the bytes under the running
    # one and stopped it with a syntax error. Inside one brace group ending in exit, bash parses everything first.
    lines = SCRIPT.read_text(encoding="utf-8").splitlines()
    start = lines.index("set -euo pipefail")
    assert lines[start + 1 :].count("{") == 1 and lines[-2:] == ["exit", "}"]
    body = [line for line in lines[start + 1 :] if line and not line.startswith("#")]
    assert body[0] == "{", "nothing but comments between set -euo pipefail and the group"
    assert subprocess.run(["bash", "-n", str(SCRIPT)], check=False).returncode == 0
