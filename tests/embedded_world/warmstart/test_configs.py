"""The two warm starts the lab builds, pinned: the default world's and the namesake world's (the one behind
reports/compare_namesake). An edit that changes what either trains fails here, not silently in a later comparison."""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
from dataclasses import asdict

import pytest

from mr_search_embedded.warmstart.decision import presence_windows, world_name_words
from mr_search_embedded.warmstart.train import WarmStartConfig, transcript_mix, warmstart_config
from mr_search_embedded.world.facts import WorldConfig
from mr_search_embedded.world.namesake import CONTROL_RELATION, RETRY_RELATION

TRANSCRIPTS = {
    "attempts": 3,
    "topk": 3,
    "p_wrong": 0.6,
    "p_verify": 0.5,
    "p_partial": 0.5,
    "seed": 0,
    "outcome_feedback": False,
    "p_verify_found": None,
    "retry_question": False,
    "reflection_question": False,
    "p_rename": 0.0,
}
DEFAULT = {
    "num_transcripts": 5000,
    "single_attempt_share": 0.85,
    "window_steps": 500,
    "window_length": 128,
    "window_batch_size": 24,
    "window_anchor_share": 0.5,
    "decision_windows_per_step": 0,
    "steps": 200,
    "batch_size": 16,
    "lr": 6e-3,
    "adam_beta2": 0.95,
    "env_loss_weight": 0.5,
    "warmup_steps": 50,
    "max_length": 1024,
    "bf16": True,
    "transcripts": TRANSCRIPTS,
    "seed": 0,
}
# The namesake world's: where it differs from the default's.
NAMESAKE = {
    **DEFAULT,
    "num_transcripts": 15_000,
    "single_attempt_share": 0.7,
    "window_steps": 1_500,
    "decision_windows_per_step": 24,
    "steps": 1_500,
    "batch_size": 12,
    "transcripts": {
        **TRANSCRIPTS,
        "p_verify_found": 0.1,
        "retry_question": True,
        "reflection_question": True,
        "p_rename": 0.5,
    },
}

# sha256 of the JSON of transcript_mix(..., count=60) on the 24-group namesake world (the default's on its questions
# other than the namesake and control ones, which the default world does not have), and of presence_windows(..., 20,
# seed=2): the same before and after the warm-start code lost its retired options.
TRANSCRIPT_SHA256 = {
    ("default", False): "f2fb347abc7b944d445fb06d8fc5a8e1c7ac8e4430782b0b39f10357310691fc",
    ("default", True): "7714950a178470a6d7eb99e39d4a7865bf442ca835b6812c959afcc963da1a58",
    ("namesake", False): "0830531c0ab1da8a6fb770d3f8f2ff16bb6459011589f0f766b853ef12686095",
    ("namesake", True): "821d3cc621e927c3c6af2bf59ad0537e14781046244d9eb241e7062dacfb213f",
}
WINDOWS_SHA256 = "42793911f6f68c4e8caec7ecad6bcf24d0e4185742ea599ba50b83e4b4ec231c"


def _sha(items) -> str:
    return hashlib.sha256(json.dumps([asdict(x) for x in items]).encode()).hexdigest()


@pytest.mark.parametrize(("world", "expected"), [("default", DEFAULT), ("namesake", NAMESAKE)])
def test_each_worlds_warm_start_is_pinned(world: str, expected: dict) -> None:
    assert asdict(warmstart_config(False, world)) == expected
    feedback = {**expected, "transcripts": {**expected["transcripts"], "outcome_feedback": True}}
    assert asdict(warmstart_config(True, world)) == feedback
    assert warmstart_config(False, world).decision_count == expected["steps"] * expected["decision_windows_per_step"]


def test_the_default_is_the_dataclass_default() -> None:
    assert warmstart_config() == warmstart_config(world="default") == WarmStartConfig()


@pytest.mark.parametrize("feedback", [False, True], ids=["paper", "outcome_feedback"])
@pytest.mark.parametrize("world", ["default", "namesake"])
def test_what_each_warm_start_trains_on_is_pinned(small_namesake, world: str, feedback: bool) -> None:
    index, train = small_namesake
    if world == "default":
        train = [r for r in train if r["relation"] not in (RETRY_RELATION, CONTROL_RELATION)]
    transcripts = transcript_mix(train, index, warmstart_config(feedback, world), count=60)
    assert _sha(transcripts) == TRANSCRIPT_SHA256[(world, feedback)]


def test_the_namesake_decision_windows_are_pinned(small_namesake) -> None:
    index, train = small_namesake
    name_words = world_name_words({"seed": 0, "config": asdict(WorldConfig())})
    assert _sha(presence_windows(train, index, 20, name_words, seed=2)) == WINDOWS_SHA256


def test_the_command_builds_a_known_policy_shape_only() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "mr_search_embedded.warmstart", "--policy", "wide"],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 2 and "invalid choice: 'wide'" in done.stderr
    assert (
        "--namesake-recipe"
        not in subprocess.run(
            [sys.executable, "-m", "mr_search_embedded.warmstart", "--help"],
            capture_output=True,
            text=True,
            timeout=120,
            check=True,
        ).stdout
    )
