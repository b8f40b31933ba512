from __future__ import annotations

from pathlib import Path

import pytest

from mr_search_embedded.compare.aggregate import Spread, em_by_attempt, em_curve, gain_by_attempt, load_results
from mr_search_embedded.compare.budget import match_runs, read_match, write_match


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


def test_budget_match_picks_closest_baseline_step(tmp_path: Path, write_metrics, mr_step, k1_step) -> None:
    write_metrics(tmp_path / "mr", [mr_step(s, [0, 0, 0], 300.0) for s in (1, 2)])  # 9,600 tokens at 16 rows
    write_metrics(tmp_path / "k1", [k1_step(s, 0.0, 110.0) for s in range(1, 5)])  # 1,760 a step
    match = match_runs(tmp_path / "mr", 16, tmp_path / "k1", 16)
    assert match.mr_tokens == 9600.0
    assert match.mr_model_tokens == 600.0
    assert match.baseline_steps_needed == 6  # 4 run (7,040) + ceil(2,560 / 1,760)
    assert match.baseline_step == 4
    write_metrics(tmp_path / "k1", [k1_step(s, 0.0, 110.0) for s in (5, 6)], launch="resumed")
    match = match_runs(tmp_path / "mr", 16, tmp_path / "k1", 16)
    assert match.baseline_step == 5  # 8,800 is closer to 9,600 than 10,560
    assert match.ratio == pytest.approx(8800 / 9600)
    assert read_match(write_match(match, tmp_path / "budget.json")) == match
