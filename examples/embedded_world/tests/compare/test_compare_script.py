"""Argument handling of examples/embedded_world/scripts/compare.sh (DRY_RUN: the plan, no training)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[4]
SCRIPT = ROOT / "examples" / "embedded_world" / "scripts" / "compare.sh"
# Knobs a test passes itself, never the caller's shell.
OWN = (
    "MR_SEARCH_WORLD",
    "WORLD",
    "POLICY",
    "NAMESAKE_VERSION",
    "MR_SEARCH_NAMESAKE_VERSION",
    "NAMESAKE_RECIPE",
    "K_EVAL",
    "ARMS",
    "TIMINGS",
    "REPORT_DIR",
    "BUDGET",
    "PARALLEL_RUNS",
    "RUN_RETRIES",
    "UNTIL_STEP",
    "DEV_QUESTIONS",
    "MINI_BATCH",
    "WARMSTART_RECIPE",
    "WARM_START",
    "EVAL_WORKERS",
    "EVALUATE",
    "ROLLOUT_ENGINE",
    "PLAN_GATE",
    "PLAN_RECORD",
)


def run(tmp_path: Path, **env: str) -> subprocess.CompletedProcess[str]:
    inherited = {k: v for k, v in os.environ.items() if k not in OWN}
    full = {**inherited, "PYTHON": sys.executable, "DRY_RUN": "1", "MR_SEARCH_CACHE": str(tmp_path), **env}
    return subprocess.run(["bash", str(SCRIPT)], env=full, capture_output=True, text=True, timeout=120, check=False)


def test_the_dry_run_prints_the_plan_with_the_four_arms(tmp_path: Path) -> None:
    result = run(tmp_path, WORK_DIR=str(tmp_path / "w"))
    assert result.returncode == 0, result.stderr
    out = result.stdout
    assert "arms mr_search k1 k1_all_turns mr_search_no_credit; seeds 1 2 3 4 5" in out
    for arm, what in (
        ("mr_search", "K = 3 attempts of 3 turns, gamma = 1; its steps are the budget; evaluated 3x3"),
        ("k1", "K = 1 with the same 3 turns per attempt (Search-R1); first launch 64 steps; evaluated 3x3"),
        ("k1_all_turns", "3 x 3 = 9 turns in one attempt; first launch 64 steps; evaluated 1x9"),
        ("mr_search_no_credit", "MR-Search with gamma = 0"),
    ):
        assert f"  - `{arm}`: " in out and what in out, arm
    for part in ("**Metric**", "**Comparison**", "**Pass rule**", "**Budget**", "**Seeds**: 5", "**Splits**"):
        assert part in out, part
    assert "lr 1e-4" in out, "the learning rate of every committed run"
    # evaluated with the embedded training's limits: 48 tokens a turn, 256 a passages block, 1024 per 3 attempts
    assert "1024 tokens a meta-episode, 48 a turn, 256 a passages block" in out
    assert "**Planned wall time**: ~" in out and "reports/compare_embedded/comparison.json" in out
    assert not (tmp_path / "w").exists() and not any(tmp_path.iterdir()), "a dry run writes nothing, builds nothing"


def test_knobs_change_the_plan(tmp_path: Path) -> None:
    result = run(
        tmp_path,
        ARMS="k1,mr_search",
        SEEDS="2",
        SEED_BASE="7",
        STEPS="4",
        BASELINE_STEPS="10",
        MAX_NEW_TOKENS="64",
        LR="3e-5",
        TURNS="2",
        ATTEMPTS="2",
        MAX_QUESTIONS="30,embedded_2hop=12",
    )
    assert result.returncode == 0, result.stderr
    out = result.stdout
    assert "683 tokens a meta-episode, 64 a turn" in out, "1024 per 3 attempts, rounded"
    assert "**Seeds**: 2 (7, 8)" in out and "lr 3e-5" in out
    assert "K = 2 attempts of 2 turns" in out and "first launch 10 steps" in out
    assert "k1_all_turns" not in out
    assert "(12 of embedded_2hop, 30 of every other source)" in out
    assert "outcome feedback off (paper)" in out
    assert "outcome feedback on (MAGE-style)" in run(tmp_path, OUTCOME_FEEDBACK="1").stdout


def test_each_opt_in_world_gets_its_own_report_and_port(tmp_path: Path) -> None:
    result = run(tmp_path, MR_SEARCH_WORLD="namesake", POLICY="small")
    assert result.returncode == 0, result.stderr
    assert "world namesake, policy small" in result.stdout
    assert f"report {ROOT}/reports/comparison/namesake, retrieval http://127.0.0.1:8019" in result.stdout
    assert "reports/compare_namesake/comparison.json" in result.stdout, "step times of the world's earlier report"
    threehop = run(tmp_path, MR_SEARCH_WORLD="threehop")
    assert threehop.returncode == 0, threehop.stderr
    assert f"report {ROOT}/reports/comparison/threehop, retrieval http://127.0.0.1:8020" in threehop.stdout
    default = run(tmp_path)
    assert "world default, policy tiny" in default.stdout
    assert f"report {ROOT}/reports/comparison/default, retrieval http://127.0.0.1:8000" in default.stdout


@pytest.mark.parametrize(
    ("env", "message"),
    [
        ({"WORLD": "namesake"}, "WORLD is now MR_SEARCH_WORLD (WORLD=namesake given)"),
        ({"NAMESAKE_VERSION": "4"}, "NAMESAKE_VERSION is gone: the namesake world has one version and one warm start"),
        ({"MR_SEARCH_NAMESAKE_VERSION": "4"}, "MR_SEARCH_NAMESAKE_VERSION is gone"),
        ({"K_EVAL": "6"}, "K_EVAL is gone: the final evaluation uses K_eval = ATTEMPTS"),
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
        ({"TURNS": "0"}, "TURNS=0 is not valid"),
        ({"ARMS": "mr_search k2"}, "k2 not valid; use some of mr_search, k1, k1_all_turns, mr_search_no_credit"),
        ({"ARMS": "mr_search"}, "lacks k1"),
        ({"MAX_NEW_TOKENS": "0"}, "MAX_NEW_TOKENS=0 is not valid"),
        ({"MAX_QUESTIONS": "all"}, "MAX_QUESTIONS=all is not valid; use a whole number >= 1 or e.g. 100,embedded_3hop"),
        ({"EVAL_RESPONSE_LENGTH": "lots"}, "EVAL_RESPONSE_LENGTH=lots is not valid"),
        ({"RETRIEVER_URL": "http://example.com:80"}, "use http://127.0.0.1:<port>"),
        ({"TOKEN_TOLERANCE": "5%"}, "TOKEN_TOLERANCE=5% is not valid"),
        ({"ROLLOUT_ENGINE": "trt"}, "ROLLOUT_ENGINE=trt is not valid; use cpu, hf, sglang or vllm"),
        ({"LR": "fast"}, "LR=fast is not valid; use a number like 1e-4"),
        ({"OUTCOME_FEEDBACK": "yes"}, "OUTCOME_FEEDBACK=yes is not valid; use 0 (paper) or 1"),
        ({"WARM_START": "/nowhere"}, "WARM_START=/nowhere holds no HF model (config.json)"),
        ({"REFLECTION_QUESTION": "on"}, "REFLECTION_QUESTION=on is not valid; use 0 (paper), 1, or leave it empty"),
        ({"MR_SEARCH_WORLD": "twins"}, "MR_SEARCH_WORLD=twins is not valid; use default, namesake or threehop"),
        ({"POLICY": "wide"}, "POLICY=wide is not valid; use tiny or small"),
        ({"BUDGET": "time"}, "BUDGET=time is not valid; use tokens (compute-fair) or updates (paper)"),
        ({"PARALLEL_RUNS": "0"}, "PARALLEL_RUNS=0 is not valid"),
        ({"EVALUATE": "no"}, "EVALUATE=no is not valid; use 1 (evaluate at STEPS) or 0 (train only)"),
        ({"UNTIL_STEP": "4"}, "UNTIL_STEP needs BUDGET=updates"),
        ({"BUDGET": "updates", "UNTIL_STEP": "99"}, "UNTIL_STEP=99 is past STEPS=16"),
        ({"MINI_BATCH": "3"}, "MINI_BATCH=3 does not divide TRAIN_BATCH_SIZE=4"),
        ({"DEV_QUESTIONS": "some"}, "DEV_QUESTIONS=some is not valid"),
        ({"PARALLEL_RUNS": "2"}, "--parallel=2 needs --budget updates"),
        ({"WARMSTART_RECIPE": "best"}, "WARMSTART_RECIPE=best is not valid; use world (the world's own) or control"),
        ({"EVAL_WORKERS": "0"}, "EVAL_WORKERS=0 is not valid; use a whole number >= 1"),
        ({"RUN_RETRIES": "-1"}, "RUN_RETRIES=-1 is not valid; use a whole number >= 0"),
        ({"ENGINE_WARM": "yes"}, "ENGINE_WARM=yes is not valid; use 1 (default) or 0"),
    ],
)
def test_bad_knobs_are_refused(tmp_path: Path, env: dict[str, str], message: str) -> None:
    result = run(tmp_path, **env)
    assert result.returncode != 0
    assert message in result.stderr


def test_an_edit_to_the_script_while_it_runs_does_not_change_the_running_one(tmp_path: Path) -> None:
    # bash reads a plain script as it goes: an edit during an hour-long comparison shifted the bytes under the running
    # one and stopped it with a syntax error. A copy of the script, cut in half and ended with `exit 7` by the first
    # Python call it makes, must still run to the end as it was when it started.
    tree = tmp_path / "tree"
    (tree / "examples" / "embedded_world" / "scripts").mkdir(parents=True)
    (tree / "scripts").symlink_to(ROOT / "scripts")
    (tree / "reports").mkdir()
    copy = tree / "examples" / "embedded_world" / "scripts" / "compare.sh"
    copy.write_text(SCRIPT.read_text(encoding="utf-8"), encoding="utf-8")
    python = tmp_path / "python"
    python.write_text(
        "#!/usr/bin/env bash\n"
        f"if [[ ! -e {tmp_path}/edited ]]; then touch {tmp_path}/edited\n"
        f"  head -c $(( $(wc -c <{copy}) / 2 )) {copy} >{tmp_path}/half && printf '\\nexit 7\\n' >>{tmp_path}/half\n"
        f"  cat {tmp_path}/half >{copy}; fi\n"
        f'exec {sys.executable} "$@"\n'
    )
    python.chmod(0o755)
    inherited = {k: v for k, v in os.environ.items() if k not in OWN}
    # A real start (not a dry run): its first Python call reads the arms, and the run goes on past the cut to the plan
    # gate, which stops it because the plan is in no git repository.
    env = {
        **inherited,
        "PYTHON": str(python),
        "MR_SEARCH_CACHE": str(tmp_path / "cache"),
        "WORK_DIR": str(tmp_path / "work"),
        "REPORT_DIR": str(tmp_path / "report"),
    }
    result = subprocess.run(["bash", str(copy)], env=env, capture_output=True, text=True, timeout=300, check=False)
    assert (tmp_path / "edited").exists() and "exit 7" in copy.read_text(), "the script was edited under the run"
    assert result.returncode not in (0, 7), result.stderr
    assert "the plan gate stopped the run" in result.stderr, result.stderr[-2000:]


def saved(run_dir: Path, step: int) -> None:
    """A checkpoint as verl leaves it once saved: the step's folder and the tracker naming it."""
    (run_dir / "checkpoints" / f"global_step_{step}").mkdir(parents=True, exist_ok=True)
    (run_dir / "checkpoints" / "latest_checkpointed_iteration.txt").write_text(str(step))


def test_a_machine_without_a_gpu_only_evaluates_runs_an_engine_trained(tmp_path: Path) -> None:
    """ROLLOUT_ENGINE=sglang without a GPU: refused while a run lacks its last step, past the check once all have it."""
    work = tmp_path / "w"
    knobs = {
        "DRY_RUN": "0",
        "ROLLOUT_ENGINE": "sglang",
        "BUDGET": "updates",
        "ARMS": "mr_search k1",
        "SEEDS": "1",
        "STEPS": "3",
        "WORK_DIR": str(work),
        "REPORT_DIR": str(tmp_path / "report"),
        "PATH": f"{tmp_path / 'bin'}:{os.environ['PATH']}",
    }
    (tmp_path / "bin").mkdir()
    fake_smi = tmp_path / "bin" / "nvidia-smi"  # a machine without a GPU, whatever this one has
    fake_smi.write_text("#!/bin/sh\nexit 9\n")
    fake_smi.chmod(0o755)
    saved(work / "seed_1" / "mr_search", 3)
    (work / "seed_1" / "k1" / "checkpoints" / "global_step_3").mkdir(parents=True)  # killed while saving: no tracker
    refused = run(tmp_path, **knobs)
    assert refused.returncode != 0
    assert "ROLLOUT_ENGINE=sglang trains on a GPU and this machine has none, but seed_1/k1 has no checkpoint" in (
        refused.stderr
    )
    assert "piece-unpack" in refused.stderr and not (work / "plan.md").exists(), "stopped before the plan"
    assert "tokens trains each seed" in run(tmp_path, **{**knobs, "BUDGET": "tokens", "EVALUATE": "0"}).stderr
    tokens = run(tmp_path, **{**knobs, "BUDGET": "tokens"})
    assert "this machine has none; use ROLLOUT_ENGINE=cpu, or a GPU machine" in tokens.stderr
    saved(work / "seed_1" / "k1", 3)
    past = run(tmp_path, **knobs)
    assert "has no checkpoint" not in past.stderr
    assert (work / "plan.md").is_file(), "past the check: the plan is written (the gate stops an uncommitted one)"
    assert "the plan gate stopped the run" in past.stderr
