"""Which attempts count: truncated attempts (one rule, knob), early stop carrying the solved outcome, exact zeros."""

from __future__ import annotations

import random
from collections.abc import Callable
from fractions import Fraction

import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mr_search.advantage import AdvantageConfig, attempt_advantages, credited_attempts, per_attempt_advantages
from mr_search.contract import AttemptStatus

C, T, S, A = (int(AttemptStatus.COMPLETE), int(AttemptStatus.TRUNCATED), int(AttemptStatus.CARRIED), 0)


def _advantages(rewards: list[list[float]], status: list[list[int]], **options: object) -> list[list[float]]:
    config = AdvantageConfig(**options)  # type: ignore[arg-type]
    result = per_attempt_advantages(torch.tensor(rewards), torch.tensor(status), ["q"] * len(rewards), config)
    return result.tolist()


def test_a_truncated_attempt_is_absent_by_default_so_no_penalty_reaches_a_right_first_answer() -> None:
    # Rows (1, 1, cut) against two rows (1, 1, 1): the cut attempt takes no part, every column is all-equal.
    rewards = [[1.0, 1.0, 0.0], [1.0, 1.0, 1.0], [1.0, 1.0, 1.0]]
    status = [[C, C, T], [C, C, C], [C, C, C]]
    assert _advantages(rewards, status) == [[0.0, 0.0, 0.0]] * 3


def test_truncated_zero_counts_it_as_a_wrong_attempt() -> None:
    rewards = [[1.0, 1.0, 0.0], [1.0, 1.0, 1.0], [1.0, 1.0, 1.0]]
    status = [[C, C, T], [C, C, C], [C, C, C]]
    assert _advantages(rewards, status, truncated="zero") == [[-1.0, -1.0, -1.0], [0.5, 0.5, 0.5], [0.5, 0.5, 0.5]]


def test_early_stop_carries_the_solved_reward_to_the_skipped_attempts() -> None:
    credited, present = credited_attempts(
        torch.tensor([[1.0, 0.0, 0.0], [0.0, 1.0, 0.0]]), torch.tensor([[C, S, S], [C, C, S]])
    )
    assert credited.tolist() == [[1.0, 1.0, 1.0], [0.0, 1.0, 1.0]]
    assert present.all()


def test_solving_at_attempt_1_earns_at_least_what_solving_at_attempt_2_does() -> None:
    # The case: with early stop, solving at once must not earn less at attempt 1 than solving later.
    rewards = [[1.0, 0.0, 0.0], [0.0, 1.0, 0.0], [0.0, 0.0, 0.0]]
    status = [[C, S, S], [C, C, S], [C, C, C]]
    advantages = _advantages(rewards, status)
    assert advantages[0][0] >= advantages[1][0]
    assert advantages[0][0] == pytest.approx(2.0) and advantages[1][0] == pytest.approx(0.5)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    others=st.lists(st.lists(st.sampled_from([0.0, 1.0]), min_size=3, max_size=3), min_size=0, max_size=5),
    baseline=st.sampled_from(["loo", "grpo"]),
    gamma=st.sampled_from([0.0, 0.5, 1.0]),
)
def test_early_solver_dominates_later_solver_in_any_group(
    others: list[list[float]], baseline: str, gamma: float
) -> None:
    rewards = [[1.0, 0.0, 0.0], [0.0, 1.0, 0.0], *others]
    status = [[C, S, S], [C, C, S]] + [[C, C, C]] * len(others)
    advantages = _advantages(rewards, status, baseline=baseline, gamma=gamma)
    assert advantages[0][0] >= advantages[1][0] - 1e-6


def _reference_credit(rewards: list[list[float]], status: list[list[int]], mode: str) -> tuple[list, list]:
    """Plain loops: the rules of credited_attempts written out one attempt at a time."""
    credited, present = [], []
    for row_rewards, row_status in zip(rewards, status, strict=True):
        values, here = [], []
        for s, (reward, code) in enumerate(zip(row_rewards, row_status, strict=True)):
            if code == C:
                values.append(reward), here.append(True)
            elif code == T and mode == "zero":
                values.append(0.0), here.append(True)
            elif code == S and s > 0 and here[s - 1]:
                values.append(values[s - 1]), here.append(True)
            else:
                values.append(0.0), here.append(False)
        credited.append(values)
        present.append(here)
    return credited, present


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data(), mode=st.sampled_from(["absent", "zero"]))
def test_vectorized_matches_the_plain_loop_reference_on_random_statuses(
    data: st.DataObject, mode: str, reference: Callable[..., list[list[float]]]
) -> None:
    rows, attempts = data.draw(st.integers(1, 8)), data.draw(st.integers(1, 4))
    rewards = [
        data.draw(st.lists(st.sampled_from([0.0, 0.25, 1.0]), min_size=attempts, max_size=attempts))
        for _ in range(rows)
    ]
    status = [
        data.draw(st.lists(st.sampled_from([A, C, T, S]), min_size=attempts, max_size=attempts)) for _ in range(rows)
    ]
    groups = data.draw(st.lists(st.integers(0, 2), min_size=rows, max_size=rows))
    credited, present = _reference_credit(rewards, status, mode)
    expected = reference(credited, present, groups)
    ours = per_attempt_advantages(
        torch.tensor(rewards, dtype=torch.float64), torch.tensor(status), groups, AdvantageConfig(truncated=mode)
    )
    assert torch.allclose(ours, torch.tensor(expected, dtype=torch.float64), atol=1e-9)


def _exact(rewards: list[list[Fraction]], groups: list[int]) -> list[list[Fraction]]:
    """LOO + gamma = 1 in rational arithmetic (all attempts present)."""
    rows, attempts = len(rewards), len(rewards[0])
    relative = [[Fraction(0)] * attempts for _ in range(rows)]
    for s in range(attempts):
        for i in range(rows):
            members = [j for j in range(rows) if groups[j] == groups[i]]
            values = {rewards[j][s] for j in members}
            if len(members) < 2 or len(values) == 1:
                continue
            others = [rewards[j][s] for j in members if j != i]
            relative[i][s] = rewards[i][s] - sum(others, Fraction(0)) / len(others)
    return [[sum(relative[i][s:], Fraction(0)) for s in range(attempts)] for i in range(rows)]


def test_advantages_that_cancel_are_exactly_zero_in_float32() -> None:
    generator = random.Random(0)
    cancelled = 0
    for _ in range(300):
        rows = generator.choice([4, 5, 6, 7])
        rewards = [[Fraction(generator.choice([0, 0, 1, 4])) / 4 for _ in range(3)] for _ in range(rows)]
        exact = _exact(rewards, [0] * rows)
        ours = attempt_advantages(
            torch.tensor([[float(r) for r in row] for row in rewards], dtype=torch.float32),
            torch.ones(rows, 3, dtype=torch.bool),
            [0] * rows,
        )
        assert ours.dtype == torch.float32
        for i in range(rows):
            for s in range(3):
                if exact[i][s] == 0:
                    cancelled += 1
                    assert ours[i, s].item() == 0.0, (rewards, i, s, ours[i, s].item())
                else:
                    assert ours[i, s].item() == pytest.approx(float(exact[i][s]), rel=1e-5)
    assert cancelled > 100  # the case the test is about really occurs
