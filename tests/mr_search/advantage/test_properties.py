"""The vectorized advantage equals the plain-loop reference on random shapes, group layouts and presence masks."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mr_search.advantage import attempt_advantages, spread_to_tokens


@st.composite
def batches(draw: st.DrawFn) -> dict:
    num_rows = draw(st.integers(1, 12))
    num_attempts = draw(st.integers(1, 4))
    num_groups = draw(st.integers(1, num_rows))
    groups = draw(st.lists(st.integers(0, num_groups - 1), min_size=num_rows, max_size=num_rows))
    # Quarter steps: distinct values stay well apart, so the std division is well conditioned.
    rewards = draw(
        st.lists(
            st.lists(st.integers(-8, 8).map(lambda v: v / 4), min_size=num_attempts, max_size=num_attempts),
            min_size=num_rows,
            max_size=num_rows,
        )
    )
    present = draw(
        st.lists(
            st.lists(st.booleans(), min_size=num_attempts, max_size=num_attempts),
            min_size=num_rows,
            max_size=num_rows,
        )
    )
    baseline = draw(st.sampled_from(["loo", "grpo"]))
    options = {
        "gamma": draw(st.sampled_from([0.0, 1.0]) | st.floats(0.0, 1.0)),
        "baseline": baseline,
        "std_normalize": baseline == "grpo" and draw(st.booleans()),
        "shaping": draw(st.sampled_from([0.0]) | st.floats(-1.0, 1.0)),
        "outcome_only": draw(st.booleans()),
    }
    return {"groups": groups, "rewards": rewards, "present": present, "options": options}


def _group_ids(groups: list[int], kind: str) -> object:
    if kind == "tensor":
        return torch.tensor(groups) * 7 - 3  # arbitrary integer ids, negatives included
    if kind == "object":
        return np.array([f"uid-{g}" for g in groups], dtype=object)
    return [f"uid-{g}" for g in groups]


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(batch=batches(), kind=st.sampled_from(["tensor", "object", "list"]))
def test_matches_plain_loop_reference(batch: dict, kind: str, reference: Callable[..., list[list[float]]]) -> None:
    rewards = torch.tensor(batch["rewards"], dtype=torch.float64)
    present = torch.tensor(batch["present"], dtype=torch.bool)
    got = attempt_advantages(rewards, present, _group_ids(batch["groups"], kind), **batch["options"])
    want = reference(batch["rewards"], batch["present"], batch["groups"], **batch["options"])
    assert got.shape == rewards.shape
    assert torch.allclose(got, torch.tensor(want, dtype=torch.float64), atol=1e-9, rtol=1e-9)
    # Absent attempts never get credit.
    assert torch.count_nonzero(got[~present]) == 0


@settings(max_examples=100, deadline=None)
@given(batch=batches())
def test_float32_matches_reference_closely(batch: dict, reference: Callable[..., list[list[float]]]) -> None:
    rewards = torch.tensor(batch["rewards"], dtype=torch.float32)
    present = torch.tensor(batch["present"], dtype=torch.bool)
    got = attempt_advantages(rewards, present, batch["groups"], **batch["options"])
    want = torch.tensor(reference(batch["rewards"], batch["present"], batch["groups"], **batch["options"]))
    assert got.dtype == torch.float32
    assert torch.allclose(got, want.float(), atol=1e-4, rtol=1e-4)


@settings(max_examples=100, deadline=None)
@given(data=st.data())
def test_spread_to_tokens_matches_a_loop(data: st.DataObject) -> None:
    num_rows, num_attempts, width = (
        data.draw(st.integers(1, 6)),
        data.draw(st.integers(1, 4)),
        data.draw(st.integers(1, 9)),
    )
    ids = data.draw(
        st.lists(
            st.lists(st.integers(-1, num_attempts - 1), min_size=width, max_size=width),
            min_size=num_rows,
            max_size=num_rows,
        )
    )
    mask = data.draw(
        st.lists(st.lists(st.booleans(), min_size=width, max_size=width), min_size=num_rows, max_size=num_rows)
    )
    advantages = torch.randn(num_rows, num_attempts, dtype=torch.float64)
    got = spread_to_tokens(advantages, torch.tensor(ids), torch.tensor(mask))
    for b in range(num_rows):
        for t in range(width):
            expected = float(advantages[b, ids[b][t]]) if ids[b][t] >= 0 and mask[b][t] else 0.0
            assert float(got[b, t]) == pytest.approx(expected)
