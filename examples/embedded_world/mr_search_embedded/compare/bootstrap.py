"""A question-level paired bootstrap of an EM margin, vectorized with numpy (a plain loop checks it in the tests).

The unit is the test question: each arm's EM on a question is first averaged over seeds, so a resample draws
questions (with replacement) and keeps every arm's value of each drawn question together (paired). The margin of a
resample is the reference's mean minus the other arm's best mean over its columns (its attempts k when its figure is
the best EM@k): the best k is chosen again in every resample, so the interval covers that choice too.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Final

import numpy as np

RESAMPLES: Final = 10_000
SEED: Final = 0
LEVEL: Final = 0.95


@dataclass(frozen=True)
class Interval:
    """A margin (points of EM) and its bootstrap interval."""

    margin: float
    low: float
    high: float
    best_column: int  # 0-based column of the other arm's best mean on all questions (its k* - 1)
    questions: int
    resamples: int
    seed: int

    def as_list(self) -> list[float]:
        return [self.low, self.high]

    def as_dict(self) -> dict[str, Any]:
        return {
            "margin": self.margin,
            "ci95": self.as_list(),
            "questions": self.questions,
            "resamples": self.resamples,
            "seed": self.seed,
        }


def resample_indices(questions: int, resamples: int = RESAMPLES, seed: int = SEED) -> np.ndarray:
    """int64 ``[resamples, questions]``: the questions each resample draws, with replacement (a fixed seed)."""
    if questions < 1:
        raise ValueError("resample_indices: no questions to resample")
    if resamples < 1:
        raise ValueError(f"resamples={resamples}: give at least 1")
    return np.random.default_rng(seed).integers(0, questions, size=(resamples, questions))


def resampled_margins(reference: np.ndarray, other: np.ndarray, indices: np.ndarray) -> np.ndarray:
    """Margins of every resample.

    Args:
        reference: float ``[Q]``, the reference arm's EM (%) per question (seeds averaged).
        other: float ``[Q, J]``, the other arm's EM (%) per question for each of its J candidate columns.
        indices: int ``[R, Q]`` from ``resample_indices``.

    Returns:
        float ``[R]``: ``mean_q reference[idx] - max_j mean_q other[idx, j]`` per resample.
    """
    reference = np.asarray(reference, dtype=np.float64)
    other = np.asarray(other, dtype=np.float64)
    if other.ndim != 2 or other.shape[0] != reference.shape[0] or reference.ndim != 1:
        raise ValueError(f"reference [Q] and other [Q, J] must share Q; got {reference.shape} and {other.shape}")
    resamples, questions = indices.shape
    if questions != reference.shape[0]:
        raise ValueError(f"indices draw {questions} questions, the arms have {reference.shape[0]}")
    # counts[r, q]: how often resample r drew question q; a product then gives every resample's sums at once.
    counts = np.zeros((resamples, questions), dtype=np.float64)
    np.add.at(counts, (np.arange(resamples)[:, None], indices), 1.0)
    return (counts @ reference) / questions - ((counts @ other) / questions).max(axis=1)


def percentile_interval(values: np.ndarray, level: float = LEVEL) -> tuple[float, float]:
    """The central ``level`` interval of ``values`` (numpy's linear percentiles)."""
    tail = 100.0 * (1.0 - level) / 2.0
    low, high = np.percentile(np.asarray(values, dtype=np.float64), [tail, 100.0 - tail])
    return float(low), float(high)


def bootstrap_margin(
    reference: np.ndarray, other: np.ndarray, resamples: int = RESAMPLES, seed: int = SEED
) -> Interval:
    """The margin of ``reference`` [Q] over ``other`` [Q, J] on all questions and its 95% paired interval."""
    reference = np.asarray(reference, dtype=np.float64)
    other = np.asarray(other, dtype=np.float64)
    if other.ndim == 1:
        other = other[:, None]
    means = other.mean(axis=0)
    best = int(np.argmax(means))  # the first of equal bests
    margins = resampled_margins(reference, other, resample_indices(reference.shape[0], resamples, seed))
    low, high = percentile_interval(margins)
    return Interval(float(reference.mean() - means[best]), low, high, best, int(reference.shape[0]), resamples, seed)
