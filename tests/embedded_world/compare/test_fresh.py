"""Evaluations made with other settings are caught: the script evaluates again, the report refuses to mix them."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from mr_search_embedded.compare.__main__ import is_fresh, main
from mr_search_embedded.compare.report import build_comparison

ROWS = {"mr_search": 16, "baseline": 16}


def _set_meta(results: Path, **meta) -> None:
    data = json.loads(results.read_text(encoding="utf-8"))
    data["meta"] = {**data.get("meta", {}), **meta}
    results.write_text(json.dumps(data), encoding="utf-8")


def test_an_evaluation_is_fresh_only_for_its_models_and_settings(work_folder: Path) -> None:
    results = work_folder / "warm_eval" / "results.json"
    _set_meta(results, models="warm_start=/c/ws/abc", K_eval=6, **{"max questions per source": 40})
    assert is_fresh(results, ["warm_start=/c/ws/abc"], 6, 40)
    assert not is_fresh(results, ["warm_start=/c/ws/abc"], 3, 40), "another K_eval"
    assert not is_fresh(results, ["warm_start=/c/ws/abc"], 6, 20), "other questions"
    assert not is_fresh(results, ["warm_start=/c/ws/new"], 6, 40), "another warm start (a new build)"
    assert not is_fresh(work_folder / "nowhere.json", ["warm_start=/c/ws/abc"], 6, 40)
    both = work_folder / "seed_1" / "eval" / "results.json"
    _set_meta(both, models="mr_search=/r/m, baseline=/r/b", K_eval=6, **{"max questions per source": None})
    assert is_fresh(both, ["baseline=/r/b", "mr_search=/r/m"], 6, None), "order and spacing do not matter"
    data = json.loads(results.read_text(encoding="utf-8"))
    del data["meta"]["max questions per source"]
    results.write_text(json.dumps(data), encoding="utf-8")
    assert not is_fresh(results, ["warm_start=/c/ws/abc"], 6, None), "results from before the setting was recorded"


def test_the_cli_answers_by_exit_code_and_checks_the_token_limits_given(work_folder: Path) -> None:
    results = work_folder / "warm_eval" / "results.json"
    limits = {"max new tokens per turn": 48, "max information tokens": 256, "response length": 1024}
    _set_meta(results, models="warm_start=/w", K_eval=3, **{"max questions per source": 40}, **limits)
    args = ["fresh", "--results", str(results), "--models", "warm_start=/w", "--k-eval", "3"]
    assert main([*args, "--max-questions", "40"]) == 0
    assert main([*args, "--max-questions", "10"]) == 1
    assert main([*args, "--max-questions", "40", "--max-new-tokens", "48", "--response-length", "1024"]) == 0
    assert main([*args, "--max-questions", "40", "--max-new-tokens", "1024"]) == 1, "evaluated with other limits"
    assert main([*args, "--max-questions", "40", "--max-information-tokens", "512"]) == 1


def test_the_report_refuses_evaluations_with_different_attempts(work_folder: Path) -> None:
    for results in work_folder.glob("**/results.json"):
        _set_meta(results, K_eval=3, questions=4)
    assert build_comparison(work_folder, ROWS)["seeds"] == [1, 2]
    _set_meta(work_folder / "warm_eval" / "results.json", K_eval=6)
    with pytest.raises(ValueError, match=r"warm start: K_eval=6.*same WORK_DIR"):
        build_comparison(work_folder, ROWS)


def _warm_start_evaluated(work_folder: Path) -> tuple[Path, list[str]]:
    """The warm start's results.json, with settings from before the reflection options, and the fresh check's args."""
    results = work_folder / "warm_eval" / "results.json"
    _set_meta(results, models="warm_start=/w", K_eval=3, **{"max questions per source": 40})
    return results, [
        "fresh",
        "--results",
        str(results),
        "--models",
        "warm_start=/w",
        "--k-eval",
        "3",
        "--max-questions",
        "40",
    ]


def test_reflection_turns_that_restate_the_question_must_match_too(work_folder: Path) -> None:
    results, args = _warm_start_evaluated(work_folder)
    assert main(args) == 0, "an evaluation from before the option had plain reflection turns"
    assert main([*args, "--reflection-restates-question"]) == 1
    _set_meta(results, **{"reflection restates question": True})
    assert main([*args, "--reflection-restates-question"]) == 0 and main(args) == 1


def test_outcome_feedback_must_match_too(work_folder: Path) -> None:
    results, args = _warm_start_evaluated(work_folder)
    assert main(args) == 0, "an evaluation from before the option had no feedback"
    assert main([*args, "--outcome-feedback"]) == 1
    _set_meta(results, **{"outcome feedback": True})
    assert main([*args, "--outcome-feedback"]) == 0 and main(args) == 1
    for other in work_folder.glob("seed_*/**/results.json"):
        _set_meta(other, **{"outcome feedback": False})
    with pytest.raises(ValueError, match=r"warm start: .*outcome feedback on.*OUTCOME_FEEDBACK"):
        build_comparison(work_folder, ROWS)
