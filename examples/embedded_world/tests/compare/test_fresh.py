"""Evaluations made with other settings are caught: the script evaluates again, the report refuses to mix them."""

from __future__ import annotations

import json
from pathlib import Path

from mr_search_embedded.compare.__main__ import is_fresh, main


def _results(path: Path, **meta) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"meta": meta, "methods": {}}))
    return path


def _set_meta(results: Path, **meta) -> None:
    data = json.loads(results.read_text(encoding="utf-8"))
    data["meta"] = {**data["meta"], **meta}
    results.write_text(json.dumps(data), encoding="utf-8")


BASE = {
    "models": "mr_search=/r/m, k1=/r/k",
    "K_eval": 3,
    "max questions per source": 40,
    "max turns per attempt": 3,
    "max new tokens per turn": 48,
}


def test_an_evaluation_is_fresh_only_for_its_models_and_settings(tmp_path: Path) -> None:
    results = _results(tmp_path / "eval_3x3" / "results.json", **BASE)
    both = ["k1=/r/k", "mr_search=/r/m"]
    assert is_fresh(results, both, 3, 40)
    assert not is_fresh(results, ["mr_search=/r/m"], 3, 40), "another set of models"
    assert not is_fresh(results, both, 2, 40), "another K_eval"
    assert not is_fresh(results, both, 3, 30), "other questions"
    assert not is_fresh(tmp_path / "nowhere.json", both, 3, 40)
    assert is_fresh(results, both, 3, 40, {"max turns per attempt": 3, "max new tokens per turn": 48})
    assert not is_fresh(results, both, 3, 40, {"max turns per attempt": 9}), "the all-turns arm's shape differs"


def _args(results: Path) -> list[str]:
    return [
        "fresh",
        "--results",
        str(results),
        "--models",
        "mr_search=/r/m",
        "k1=/r/k",
        "--k-eval",
        "3",
        "--max-questions",
        "40",
    ]


def test_the_cli_answers_by_exit_code_and_checks_the_limits_given(tmp_path: Path) -> None:
    results = _results(tmp_path / "results.json", **BASE)
    assert main(_args(results)) == 0
    assert main([*_args(results), "--max-turns", "3", "--max-new-tokens", "48"]) == 0
    assert main([*_args(results), "--max-turns", "9"]) == 1
    _set_meta(results, **{"max turns per attempt": None})
    assert main([*_args(results), "--max-turns", "3"]) == 1, "an evaluation from before turns were recorded is stale"


def test_reflection_options_must_match_too(tmp_path: Path) -> None:
    results = _results(tmp_path / "results.json", **BASE)
    assert main(_args(results)) == 0, "an evaluation from before the options had them off"
    assert main([*_args(results), "--reflection-restates-question"]) == 1
    assert main([*_args(results), "--outcome-feedback"]) == 1
    _set_meta(results, **{"reflection restates question": True, "outcome feedback": True})
    assert main([*_args(results), "--reflection-restates-question", "--outcome-feedback"]) == 0
    assert main(_args(results)) == 1


def test_an_evaluation_with_per_source_counts_is_fresh_only_for_the_same_counts(tmp_path: Path) -> None:
    from mr_search.eval.question_cap import parse_max_questions

    results = _results(tmp_path / "results.json", **{**BASE, "max questions per source": "100,embedded_3hop=217"})
    both = ["k1=/r/k", "mr_search=/r/m"]
    assert is_fresh(results, both, 3, parse_max_questions("100,embedded_3hop=217"))
    assert not is_fresh(results, both, 3, parse_max_questions("100,embedded_3hop=200"))
    assert not is_fresh(results, both, 3, 100)
    args = _args(results)
    args[args.index("40")] = "100,embedded_3hop=217"
    assert main(args) == 0
