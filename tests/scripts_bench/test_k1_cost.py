"""The K = 1 cost benchmark on hand-made verl logs: every figure checked against a plain hand computation."""

from __future__ import annotations

import importlib
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from mr_search.runlog.training_log import logged_rows, read_metrics

BENCH = Path(__file__).resolve().parents[2] / "scripts" / "bench"
sys.path.insert(0, str(BENCH))  # the scripts import each other by their file names, as when run by path
k1_batch = importlib.import_module("k1_batch")
k1_cost = importlib.import_module("k1_cost")
step_cost = importlib.import_module("step_cost")

PROMPT = 100.0


def _step(
    step: int,
    rows: int,
    length: float,
    gen: float,
    old: float,
    update: float,
    sync: float,
    whole: float,
    attempts: int,
    first: float | None = None,
    **extra: float,
) -> dict:
    """One verl metrics line: its timers, lengths, token count and (MR-Search's estimator) per-attempt counts."""
    data = {
        "timing_s/gen": gen,
        "timing_s/old_log_prob": old,
        "timing_s/update_actor": update,
        "timing_s/update_weights": sync,
        "timing_s/step": whole,
        "prompt_length/mean": PROMPT,
        "response_length/mean": length,
        "perf/total_num_tokens": rows * (PROMPT + length),
        "critic/rewards/mean": 0.5,
        "mr_search/num_attempts": float(attempts),
        "mr_search/model_tokens": rows * length * 0.8,
        **extra,
    }
    for k in range(1, attempts + 1):
        data[f"mr_search/attempt_{k}/reward_mean"] = 0.5
    if first is not None:
        data["mr_search/attempt_1/trained_tokens"] = first
    return {"step": step, "data": data}


def _launch(run: Path, name: str, rows: list[dict]) -> Path:
    (run / "metrics").mkdir(parents=True, exist_ok=True)
    (run / "metrics" / f"{name}.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return run


@pytest.fixture
def runs(tmp_path: Path) -> tuple[Path, Path]:
    """MR-Search (K = 3, 8 rows, two launches: a resume) and K = 1 (22 rows, one launch)."""
    mr = tmp_path / "mr"
    _launch(
        mr,
        "20261201-000000-1",
        [
            {"step": 0, "data": {"val-core/em": 0.1}},  # validation before training: no training step
            _step(1, 8, 500.0, 90.0, 9.0, 30.0, 3.0, 150.0, 3, first=1000.0),  # start-up: left out
            _step(2, 8, 500.0, 10.0, 2.0, 6.0, 0.5, 20.0, 3, first=1000.0),
            _step(3, 8, 400.0, 8.0, 2.0, 5.0, 0.5, 25.0, 3, first=800.0, **{"timing_s/save_checkpoint": 7.0}),
        ],
    )
    _launch(
        mr,
        "20261201-010000-2",
        [
            _step(4, 8, 450.0, 70.0, 8.0, 20.0, 2.0, 120.0, 3, first=900.0),  # the resume's start-up: left out
            _step(5, 8, 300.0, 6.0, 1.0, 4.0, 0.5, 12.0, 3, first=600.0),
        ],
    )
    k1 = _launch(
        tmp_path / "k1",
        "20261201-020000-3",
        [
            _step(1, 22, 150.0, 50.0, 5.0, 15.0, 2.0, 80.0, 1),
            _step(2, 22, 160.0, 9.0, 1.5, 5.5, 0.5, 18.0, 1),
            _step(3, 22, 140.0, 8.0, 1.5, 4.5, 0.5, 15.0, 1, **{"timing_s/dump_rollout_generations": 1.0}),
        ],
    )
    return mr, k1


def test_steady_steps_leave_out_each_launchs_first_training_step(runs: tuple[Path, Path]) -> None:
    mr, k1 = runs
    steady, skipped = step_cost.steady_steps(mr)
    assert [step for step, _ in steady] == [2, 3, 5] and skipped == [1, 4]
    assert [step for step, _ in step_cost.steady_steps(k1)[0]] == [2, 3]
    assert sorted(read_metrics(mr)) == [0, 1, 2, 3, 4, 5], "read_metrics still merges every launch"


def test_rows_come_from_verls_token_count() -> None:
    assert logged_rows(2, _step(2, 24, 160.0, 1, 1, 1, 1, 4, 1)["data"]) == 24
    with pytest.raises(ValueError, match="not a whole number of rows; give the rows by hand"):
        logged_rows(2, {"perf/total_num_tokens": 1000, "prompt_length/mean": 100.0, "response_length/mean": 200.0})
    with pytest.raises(ValueError, match="not logged, so its rows are unknown"):
        logged_rows(2, {"response_length/mean": 200.0})


def test_per_thousand_and_ratios_match_a_hand_computation(runs: tuple[Path, Path]) -> None:
    comparison = k1_cost.compare(*runs)
    # MR-Search's steady steps 2, 3, 5: tokens 8 x (500 + 400 + 300) = 9,600; step 3 less its 7 s checkpoint.
    mr_tokens = 8 * 500.0 + 8 * 400.0 + 8 * 300.0
    mr = {
        "generation": 10 + 8 + 6,
        "old log-probs": 2 + 2 + 1,
        "update": 6 + 5 + 4,
        "weight sync": 0.5 * 3,
        "step": 20 + (25 - 7) + 12,
    }
    mr["other"] = mr["step"] - (mr["generation"] + mr["old log-probs"] + mr["update"] + mr["weight sync"])
    # K = 1's steady steps 2, 3: tokens 22 x (160 + 140) = 6,600; step 3 less its 1 s rollout dump.
    k1_tokens = 22 * 160.0 + 22 * 140.0
    k1 = {
        "generation": 9 + 8,
        "old log-probs": 1.5 + 1.5,
        "update": 5.5 + 4.5,
        "weight sync": 0.5 + 0.5,
        "step": 18 + (15 - 1),
    }
    k1["other"] = k1["step"] - (k1["generation"] + k1["old log-probs"] + k1["update"] + k1["weight sync"])
    assert comparison.mr_search.tokens == mr_tokens and comparison.k1.tokens == k1_tokens
    for column in step_cost.COLUMNS:
        mine, base = 1000 * mr[column] / mr_tokens, 1000 * k1[column] / k1_tokens
        assert comparison.mr_search.per_thousand(column) == pytest.approx(mine)
        assert comparison.k1.per_thousand(column) == pytest.approx(base)
        assert comparison.ratio(column) == pytest.approx(mine / base)
    assert comparison.token_ratio == pytest.approx((mr_tokens / 3) / (k1_tokens / 2))
    # step: 50 s / 9.6k = 5.208 s/1k against 32 s / 6.6k = 4.848: 1.074x, over 1.05
    assert not comparison.met
    assert k1_cost.compare(*runs, target=1.25).met


def test_model_written_tokens_as_the_measure(runs: tuple[Path, Path]) -> None:
    comparison = k1_cost.compare(*runs, measure="model")
    assert comparison.mr_search.tokens == pytest.approx(0.8 * 8 * (500 + 400 + 300))
    assert comparison.k1.per_thousand("step") == pytest.approx(1000 * 32 / (0.8 * 22 * 300))


def test_report_prints_each_phase_the_ratio_and_the_verdict(runs: tuple[Path, Path]) -> None:
    text = k1_cost.report(k1_cost.compare(*runs))
    assert "left out (MR-Search: [1, 4], K = 1: [1])" in text
    generation = next(line for line in text.splitlines() if line.startswith("generation, s/1k"))
    assert generation.split()[2:] == [
        f"{1000 * 24 / 9600:.4f}",
        f"{1000 * 17 / 6600:.4f}",
        f"{(24 / 9600) / (17 / 6600):.3f}",
    ]
    for name in ("old log-probs", "update", "weight sync", "other", "step (less checkpoint)"):
        assert f"\n{name}, s/1k" in text
    assert f"costs {(50 / 9600) / (32 / 6600):.3f}x the K = 1 step's per sampled token: missed (goal <= 1.05)" in text
    assert "note:" not in text  # 3,200 against 3,300 tokens a step: within 10%


def test_a_loose_token_match_is_noted(tmp_path: Path, runs: tuple[Path, Path]) -> None:
    k1 = _launch(tmp_path / "small", "a", [_step(s, 4, 150.0, 1, 1, 1, 1, 5, 1) for s in (1, 2)])
    assert "note: the runs sample" in k1_cost.report(k1_cost.compare(runs[0], k1))


def test_runs_in_the_wrong_order_or_without_steady_steps_are_named(tmp_path: Path, runs: tuple[Path, Path]) -> None:
    mr, k1 = runs
    with pytest.raises(ValueError, match="trained with K = 1; the first run is MR-Search's"):
        k1_cost.compare(k1, mr)
    one = _launch(tmp_path / "one", "a", [_step(1, 8, 500.0, 1, 1, 1, 1, 5, 1)])
    with pytest.raises(ValueError, match=r"no step after the first of a launch .*TOTAL_STEPS=4 measures 3"):
        k1_cost.compare(mr, one)
    with pytest.raises(ValueError, match="measure='tokens' is not valid"):
        k1_cost.compare(mr, k1, measure="tokens")


def test_k1_batch_scales_by_attempt_ones_share(runs: tuple[Path, Path]) -> None:
    # steady steps 2, 3, 5: model-written 0.8 x 8 x (500 + 400 + 300) = 7,680 over attempt 1's 1,000 + 800 + 600
    scale = k1_batch.token_scale(runs[0])
    assert scale == pytest.approx(7680 / 2400)
    assert k1_batch.k1_batch(6, 6, scale) == (19, 19)  # round(6 x 3.2) = 19, one update a step
    assert k1_batch.k1_batch(64, 32, scale) == (204, 102)  # two updates a step: 2 x round(64 x 3.2 / 2)
    assert k1_batch.k1_batch(4, 4, 0.01) == (1, 1)
    assert k1_batch.k1_batch(6, 6, scale, multiple=3) == (18, 18)  # 3 GPUs: 19 questions x n rows would not split
    assert k1_batch.k1_batch(6, 3, 2.7, multiple=3) == (18, 9)  # 8.1 questions an update -> 9, a multiple of 3
    with pytest.raises(ValueError, match="the mini-batch dividing the batch"):
        k1_batch.k1_batch(6, 4, scale)
    with pytest.raises(ValueError, match="no model-written tokens per attempt logged"):
        k1_batch.token_scale(runs[1])


def test_the_commands_print_and_fail_cleanly(runs: tuple[Path, Path]) -> None:
    mr, k1 = runs
    ok = subprocess.run(
        [sys.executable, str(BENCH / "k1_cost.py"), str(mr), str(k1)], capture_output=True, text=True, check=False
    )
    assert ok.returncode == 0 and "verdict: MR-Search's step costs 1.074x" in ok.stdout, ok.stderr
    bad = subprocess.run(
        [sys.executable, str(BENCH / "k1_cost.py"), str(k1), str(mr)], capture_output=True, text=True, check=False
    )
    assert bad.returncode == 2 and bad.stderr.startswith("k1_cost: ") and "Traceback" not in bad.stderr
    batch = subprocess.run(
        [sys.executable, str(BENCH / "k1_batch.py"), str(mr), "--train-batch-size", "6"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert batch.returncode == 0 and batch.stdout.split() == ["19", "19"], batch.stderr


RUNNER = BENCH / "k1_cost.sh"


@pytest.mark.parametrize(
    ("env", "message"),
    [
        ({}, "TRAIN_BATCH_SIZE='': give MR-Search's questions a step"),
        ({"TRAIN_BATCH_SIZE": "6", "PPO_MINI_BATCH_SIZE": "4"}, "PPO_MINI_BATCH_SIZE=4 must divide TRAIN_BATCH_SIZE=6"),
        ({"TRAIN_BATCH_SIZE": "6", "K": "1"}, "K=1 is not valid; MR-Search's attempts a meta-episode, > 1"),
        ({"TRAIN_BATCH_SIZE": "6", "TOTAL_STEPS": "1"}, "TOTAL_STEPS=1 is not valid; >= 2"),
    ],
)
def test_the_runner_refuses_bad_knobs_before_it_trains(tmp_path: Path, env: dict[str, str], message: str) -> None:
    clean = {key: value for key, value in os.environ.items() if key not in {"TRAIN_BATCH_SIZE", "K", "TOTAL_STEPS"}}
    run = subprocess.run(
        ["bash", str(RUNNER)],
        env={**clean, "BENCH_DIR": str(tmp_path / "bench"), **env},
        capture_output=True,
        text=True,
        check=False,
    )
    assert run.returncode == 2 and message in run.stderr, run.stderr
    assert not (tmp_path / "bench").exists(), "nothing trained, no folder made"
