"""Hand-made comparison work folders: verl metrics files and evaluation results built by the real eval writer."""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from pathlib import Path

import pytest

from mr_search.eval.metrics import summarize
from mr_search.eval.records import make_attempt, make_record
from mr_search.eval.report import write_report


def _write_metrics(run: Path, steps: Sequence[dict], launch: str = "20260101-000000-1") -> None:
    (run / "metrics").mkdir(parents=True, exist_ok=True)
    with (run / "metrics" / f"{launch}.jsonl").open("a", encoding="utf-8") as handle:
        for row in steps:
            handle.write(json.dumps(row) + "\n")


def _mr_step(step: int, em: Sequence[float], length: float, seconds: float = 30.0) -> dict:
    data = {"response_length/mean": length, "timing_s/step": seconds, "critic/rewards/mean": sum(em)}
    for k, value in enumerate(em, 1):
        data[f"mr_search/attempt_{k}/reward_mean"] = value
        data[f"mr_search/attempt_{k}/trained_tokens"] = 100.0
    return {"step": step, "data": data}


def _k1_step(step: int, em: float, length: float, seconds: float = 10.0) -> dict:
    return {"step": step, "data": {"response_length/mean": length, "timing_s/step": seconds, "critic/rewards/mean": em}}


def _write_results(out: Path, per_method: dict[str, Sequence[Sequence[float]]]) -> None:
    """per_method: {method: [per question: EM (0/1) of attempts 1..K]}; written by mr_search.eval's own writer."""
    records = []
    for method, questions in per_method.items():
        for q, ems in enumerate(questions):
            attempts = [
                make_attempt(i, [], ["gold"], scored={"answer": "a", "reward": e, "em": e, "f1": e})
                for i, e in enumerate(ems)
            ]
            source = "embedded_1hop" if q % 2 == 0 else "embedded_2hop"
            records.append(
                make_record(
                    method=method,
                    uid=str(q),
                    data_source=source,
                    question="q",
                    golden_answers=["gold"],
                    attempts=attempts,
                )
            )
    write_report(summarize(records), out)


@pytest.fixture
def mr_step() -> Callable[..., dict]:
    """A metrics line of an MR-Search step: mr_step(step, [EM per attempt], mean response length)."""
    return _mr_step


@pytest.fixture
def k1_step() -> Callable[..., dict]:
    """A metrics line of a K = 1 step: k1_step(step, EM, mean response length)."""
    return _k1_step


@pytest.fixture
def write_metrics() -> Callable[..., None]:
    return _write_metrics


@pytest.fixture
def write_results() -> Callable[..., None]:
    return _write_results


@pytest.fixture
def work_folder(tmp_path: Path) -> Path:
    """Two finished seeds, one unfinished, the warm start; 4 questions (2 per source), K_eval = 3, 16 rows/step.

    Seed 1: MR-Search solves 2 of 4 at attempt 1 and 3 of 4 from attempt 2; the baseline 2 of 4 throughout.
    Seed 2: MR-Search 1 of 4, then 3 of 4 at attempt 3; the baseline 1 of 4 throughout. Warm start: 1 of 4.
    """
    from mr_search_embedded.compare.budget import match_runs, write_match

    work = tmp_path / "work"
    _write_results(work / "warm_eval", {"warm_start": [[1, 1, 1], [0, 0, 0], [0, 0, 0], [0, 0, 0]]})
    plans = {
        1: {
            "mr_search": [[1, 1, 1], [1, 1, 1], [0, 1, 1], [0, 0, 0]],
            "baseline": [[1, 1, 1], [1, 1, 1], [0, 0, 0], [0, 0, 0]],
        },
        2: {
            "mr_search": [[1, 1, 1], [0, 1, 1], [0, 0, 1], [0, 0, 0]],
            "baseline": [[1, 1, 1], [0, 0, 0], [0, 0, 0], [0, 0, 0]],
        },
    }
    for seed, plan in plans.items():
        root = work / f"seed_{seed}"
        # MR-Search: 2 steps of 16 rows x 300 tokens = 9,600 tokens; the baseline 16 x 100 per step -> 6 steps match.
        _write_metrics(root / "mr_search", [_mr_step(1, [0.25, 0.25, 0.5], 300), _mr_step(2, [0.25, 0.5, 0.5], 300)])
        _write_metrics(root / "baseline", [_k1_step(s, 0.25, 100) for s in range(1, 7)])
        write_match(match_runs(root / "mr_search", 16, root / "baseline", 16), root / "budget.json")
        _write_results(root / "eval", plan)
    (work / "seed_3" / "mr_search").mkdir(parents=True)  # started, not evaluated
    (work / "meta.json").write_text(json.dumps({"command": "make compare", "machine": "test box", "steps": 2}))
    return work
