"""The paired bootstrap of the final-answer test, vectorized, against a plain loop over resamples and questions."""

from __future__ import annotations

import numpy as np
import pytest

from mr_search_embedded.compare.bootstrap import (
    bootstrap_margin,
    percentile_interval,
    resample_indices,
    resampled_margins,
)


def _plain_margins(reference: list[float], other: list[list[float]], indices: list[list[int]]) -> list[float]:
    """One resample at a time: the reference's mean minus the other arm's best column mean over the drawn questions."""
    margins = []
    for drawn in indices:
        ref = sum(reference[q] for q in drawn) / len(drawn)
        best = max(sum(other[q][j] for q in drawn) / len(drawn) for j in range(len(other[0])))
        margins.append(ref - best)
    return margins


def _plain_percentile(values: list[float], percent: float) -> float:
    """Linear interpolation between the closest ranks (numpy's default), written out."""
    ordered = sorted(values)
    position = percent / 100 * (len(ordered) - 1)
    below = int(position)
    above = min(below + 1, len(ordered) - 1)
    return ordered[below] + (ordered[above] - ordered[below]) * (position - below)


@pytest.mark.parametrize(("questions", "columns", "seed"), [(7, 1, 0), (30, 3, 1), (80, 3, 2), (5, 6, 3)])
def test_vectorized_margins_equal_the_plain_loop(questions: int, columns: int, seed: int) -> None:
    rng = np.random.default_rng(seed)
    # EM per question averaged over 5 seeds: multiples of 20 points.
    reference = rng.integers(0, 6, questions) * 20.0
    other = rng.integers(0, 6, (questions, columns)) * 20.0
    indices = resample_indices(questions, 500, seed)
    fast = resampled_margins(reference, other, indices)
    plain = _plain_margins(reference.tolist(), other.tolist(), indices.tolist())
    assert fast == pytest.approx(plain, abs=1e-9)
    low, high = percentile_interval(fast)
    assert low == pytest.approx(_plain_percentile(plain, 2.5), abs=1e-9)
    assert high == pytest.approx(_plain_percentile(plain, 97.5), abs=1e-9)


def test_resamples_are_fixed_by_the_seed_and_draw_with_replacement() -> None:
    first, again = resample_indices(40, 10_000, 0), resample_indices(40, 10_000, 0)
    assert first.shape == (10_000, 40) and (first == again).all()
    assert not (resample_indices(40, 10_000, 1) == first).all()
    assert first.min() == 0 and first.max() == 39
    assert any(len(set(row)) < 40 for row in first[:10].tolist()), "with replacement: some question drawn twice"


def test_margin_interval_and_the_best_column() -> None:
    # 40 questions: MR-Search right on 30; the other arm's attempt 2 is its best (20 right), attempt 1 has 10.
    reference = np.array([100.0] * 30 + [0.0] * 10)
    other = np.zeros((40, 3))
    other[:10, 0] = 100.0
    other[:20, 1] = 100.0
    other[:15, 2] = 100.0
    result = bootstrap_margin(reference, other, resamples=2_000, seed=0)
    assert result.margin == pytest.approx(75.0 - 50.0)
    assert result.best_column == 1
    assert result.low < result.margin < result.high
    assert result.low > 0, "a 25-point margin on paired questions is well clear of 0"
    assert bootstrap_margin(reference, other, resamples=2_000, seed=0) == result, "a fixed seed: the same interval"


def test_choosing_the_best_column_in_every_resample_only_lowers_the_margins() -> None:
    rng = np.random.default_rng(5)
    reference = rng.integers(0, 2, 60) * 100.0
    other = rng.integers(0, 2, (60, 3)) * 100.0
    indices = resample_indices(60, 1_000, 0)
    rechosen = resampled_margins(reference, other, indices)
    fixed = resampled_margins(reference, other[:, [int(np.argmax(other.mean(axis=0)))]], indices)
    assert (rechosen <= fixed + 1e-12).all()


def test_identical_arms_give_a_zero_margin_and_a_zero_width_interval() -> None:
    values = np.array([100.0, 0.0, 100.0, 100.0, 0.0])
    result = bootstrap_margin(values, values, resamples=300)
    assert (result.margin, result.low, result.high) == (0.0, 0.0, 0.0)


def test_errors_name_the_mismatch() -> None:
    with pytest.raises(ValueError, match="must share Q"):
        resampled_margins(np.zeros(4), np.zeros((5, 2)), resample_indices(4, 10))
    with pytest.raises(ValueError, match="no questions"):
        resample_indices(0)
    with pytest.raises(ValueError, match="indices draw 3 questions"):
        resampled_margins(np.zeros(4), np.zeros((4, 1)), resample_indices(3, 10))
