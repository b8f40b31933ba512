from __future__ import annotations

from pathlib import Path

import pytest

from mr_search_embedded.compare.aggregate import Spread, em_by_attempt, em_curve, gain_by_attempt, load_results
from mr_search_embedded.compare.budget import match_runs, next_steps, read_match, write_match


def test_spread_over_seeds() -> None:
    s = Spread.of([10.0, 20.0, 30.0])
    assert (s.mean, s.std, s.low, s.high, s.n) == (20.0, 10.0, 10.0, 30.0, 3)
    assert s.text() == "20.0 ± 10.0"
    assert Spread.of([12.5]).text() == "12.5"  # one seed: no spread shown
    with pytest.raises(ValueError, match="no values"):
        Spread.of([])


def test_em_and_gain_by_attempt() -> None:
    curves = [[10.0, 20.0, 40.0], [20.0, 20.0, 20.0]]
    assert [s.mean for s in em_by_attempt(curves)] == [15.0, 20.0, 30.0]
    assert [s.mean for s in gain_by_attempt(curves)] == [0.0, 5.0, 15.0]
    with pytest.raises(ValueError, match="different lengths"):
        em_by_attempt([[1.0], [1.0, 2.0]])


def test_em_curve_from_eval_results(tmp_path: Path, write_results) -> None:
    write_results(tmp_path, {"m": [[0, 1], [0, 0]]})  # question 0: 1-hop, question 1: 2-hop
    results = load_results(tmp_path / "results.json")
    assert em_curve(results, "m") == [0.0, 50.0]  # macro average of 100 (1-hop) and 0 (2-hop)
    assert em_curve(results, "m", "embedded_1hop") == [0.0, 100.0]
    with pytest.raises(ValueError, match="present"):
        em_curve(results, "other")


def test_budget_match_counts_model_written_tokens(tmp_path: Path, write_metrics, mr_step) -> None:
    # MR-Search: 2 steps of 3 attempts x 100 model-written tokens (sampled: 16 rows x 300 a step).
    write_metrics(tmp_path / "mr", [mr_step(s, [0, 0, 0], 300.0) for s in (1, 2)])
    write_metrics(tmp_path / "k1", [mr_step(s, [0.0], 110.0) for s in range(1, 5)])  # 100 model-written a step
    match = match_runs(tmp_path / "mr", 16, tmp_path / "k1", 16)
    assert (match.reference_model_tokens, match.reference_response_tokens) == (600.0, 9600.0)
    assert match.steps_needed == 6  # 4 run (400) + ceil(200 / 100)
    assert (match.step, match.model_tokens, match.response_tokens) == (4, 400.0, 4 * 110.0 * 16)
    assert next_steps(match, 0.05) == 6 and next_steps(match, 0.4) == 4
    write_metrics(tmp_path / "k1", [mr_step(s, [0.0], 110.0) for s in (5, 6, 7)], launch="resumed")
    match = match_runs(tmp_path / "mr", 16, tmp_path / "k1", 16)
    assert match.step == 6 and match.ratio == 1.0 and match.within(0.0)
    assert next_steps(match, 0.05) == 7, "over the budget: no more steps; step 6 is evaluated"
    assert read_match(write_match(match, tmp_path / "budget.json")) == match
    with pytest.raises(ValueError, match="tolerance"):
        next_steps(match, 1.5)


def test_runs_without_model_written_tokens_and_old_matches_are_refused(
    tmp_path: Path, write_metrics, mr_step, k1_step
) -> None:
    write_metrics(tmp_path / "mr", [mr_step(1, [0, 0, 0], 300.0)])
    write_metrics(tmp_path / "grpo", [k1_step(1, 0.0, 110.0)])  # verl's own estimator: no model-written count
    with pytest.raises(ValueError, match="adv_estimator=mr_search"):
        match_runs(tmp_path / "mr", 16, tmp_path / "grpo", 16)
    old = tmp_path / "budget.json"
    old.write_text('{"mr_steps": 16, "mr_tokens": 1.0, "baseline_step": 3}')
    with pytest.raises(ValueError, match="earlier sampled-token harness"):
        read_match(old)
