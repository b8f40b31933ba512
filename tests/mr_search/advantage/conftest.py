"""A plain-loop reference of the attempt-level advantage (docs/method.md#the-attempt-level-advantage).

Written for clarity, not speed.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

import pytest


def reference_attempt_advantages(
    rewards: Sequence[Sequence[float]],
    present: Sequence[Sequence[bool]],
    groups: Sequence[object],
    *,
    gamma: float = 1.0,
    baseline: str = "loo",
    std_normalize: bool = False,
    epsilon: float = 1e-6,
    shaping: float = 0.0,
    outcome_only: bool = False,
) -> list[list[float]]:
    """Loops over rows, attempts and group members; same definitions as mr_search.advantage.attempt_advantages."""
    num_rows = len(rewards)
    num_attempts = len(rewards[0]) if num_rows else 0
    raw = [[float(rewards[i][s]) if present[i][s] else 0.0 for s in range(num_attempts)] for i in range(num_rows)]
    shaped = [row[:] for row in raw]
    for i in range(num_rows):
        for s in range(1, num_attempts):
            if present[i][s] and present[i][s - 1]:
                shaped[i][s] = raw[i][s] + shaping * (raw[i][s] - raw[i][s - 1])

    def relative(values: list[float], here: list[bool]) -> list[float]:
        out = []
        for i in range(num_rows):
            members = [j for j in range(num_rows) if groups[j] == groups[i] and here[j]]
            member_values = [values[j] for j in members]
            if not here[i] or len(members) < 2 or len(set(member_values)) == 1:
                out.append(0.0)
                continue
            n = len(members)
            if baseline == "loo":
                others = [values[j] for j in members if j != i]
                out.append(values[i] - sum(others) / (n - 1))
            else:
                mean = sum(member_values) / n
                value = values[i] - mean
                if std_normalize:
                    std = math.sqrt(sum((v - mean) ** 2 for v in member_values) / (n - 1))
                    value = value / (std + epsilon)
                out.append(value)
        return out

    result = [[0.0] * num_attempts for _ in range(num_rows)]
    if outcome_only:
        finals, any_present = [], []
        for i in range(num_rows):
            last = max((s for s in range(num_attempts) if present[i][s]), default=None)
            any_present.append(last is not None)
            finals.append(shaped[i][last] if last is not None else 0.0)
        outcome = relative(finals, any_present)
        for i in range(num_rows):
            for s in range(num_attempts):
                if present[i][s]:
                    result[i][s] = outcome[i]
        return result

    columns = [
        relative([shaped[i][s] for i in range(num_rows)], [bool(present[i][s]) for i in range(num_rows)])
        for s in range(num_attempts)
    ]
    for i in range(num_rows):
        for s in range(num_attempts):
            if not present[i][s]:
                continue
            total = 0.0
            for later in range(s, num_attempts):
                total += gamma ** (later - s) * columns[later][i]
            result[i][s] = total
    return result


@pytest.fixture(scope="session")
def reference() -> Callable[..., list[list[float]]]:
    """The plain-loop reference implementation."""
    return reference_attempt_advantages
