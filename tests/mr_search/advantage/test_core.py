"""The attempt-level advantage on the cases docs/method.md#the-attempt-level-advantage defines; the spread to tokens."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from mr_search.advantage import attempt_advantages, spread_to_tokens


def _t(rows: list[list[float]]) -> torch.Tensor:
    return torch.tensor(rows, dtype=torch.float64)


def test_worked_example_of_the_paper() -> None:
    # n = 2, K = 2, gamma = 1: rewards (0, 1) and (0, 0) -> A_1 = (1, 1), A_2 = (-1, -1).
    rewards = _t([[0.0, 1.0], [0.0, 0.0]])
    present = torch.ones(2, 2, dtype=torch.bool)
    advantages = attempt_advantages(rewards, present, ["q", "q"])
    assert advantages.tolist() == [[1.0, 1.0], [-1.0, -1.0]]


def test_gamma_zero_credits_each_attempt_with_its_own_reward_only() -> None:
    rewards = _t([[0.0, 1.0], [0.0, 0.0]])
    present = torch.ones(2, 2, dtype=torch.bool)
    assert attempt_advantages(rewards, present, ["q", "q"], gamma=0.0).tolist() == [[0.0, 1.0], [0.0, -1.0]]
    # gamma = 0.5 halves the later attempt's credit to the earlier one.
    assert attempt_advantages(rewards, present, ["q", "q"], gamma=0.5).tolist() == [[0.5, 1.0], [-0.5, -1.0]]


def test_leave_one_out_excludes_the_row_itself() -> None:
    # Three trajectories, one attempt: 1 - (0 + 0)/2 = 1; 0 - (1 + 0)/2 = -0.5.
    rewards = _t([[1.0], [0.0], [0.0]])
    present = torch.ones(3, 1, dtype=torch.bool)
    assert attempt_advantages(rewards, present, [7, 7, 7]).tolist() == [[1.0], [-0.5], [-0.5]]
    grpo = attempt_advantages(rewards, present, [7, 7, 7], baseline="grpo")
    assert torch.allclose(grpo, _t([[2 / 3], [-1 / 3], [-1 / 3]]))


def test_group_of_one_gets_zero() -> None:
    rewards = _t([[1.0, 0.0], [0.0, 1.0]])
    present = torch.ones(2, 2, dtype=torch.bool)
    assert attempt_advantages(rewards, present, ["a", "b"]).abs().sum() == 0
    assert attempt_advantages(rewards, present, ["a", "b"], baseline="grpo", std_normalize=True).abs().sum() == 0


def test_all_equal_rewards_give_exactly_zero() -> None:
    # 0.1 summed five times is not 0.5 in floating point: the result must still be exactly 0.
    rewards = torch.full((5, 3), 0.1, dtype=torch.float32)
    present = torch.ones(5, 3, dtype=torch.bool)
    for baseline, std in (("loo", False), ("grpo", False), ("grpo", True)):
        advantages = attempt_advantages(rewards, present, ["g"] * 5, baseline=baseline, std_normalize=std)
        assert torch.count_nonzero(advantages) == 0


def test_absent_attempts_take_no_part_and_get_zero() -> None:
    # Row 2's meta-episode stopped after attempt 1 (context overflow): its attempt 2 is absent.
    rewards = _t([[0.0, 1.0], [0.0, 0.0], [1.0, 99.0]])
    present = torch.tensor([[True, True], [True, True], [True, False]])
    advantages = attempt_advantages(rewards, present, ["q"] * 3)
    # Attempt 2: only rows 0 and 1 -> r~ = (1, -1, 0), the 99 is ignored.
    # Attempt 1: rewards (0, 0, 1) -> r~ = (-0.5, -0.5, 1).
    assert advantages.tolist() == [[0.5, 1.0], [-1.5, -1.0], [1.0, 0.0]]


def test_attempt_with_a_single_present_trajectory_gets_zero() -> None:
    rewards = _t([[1.0, 1.0], [0.0, 0.0]])
    present = torch.tensor([[True, True], [True, False]])
    advantages = attempt_advantages(rewards, present, ["q", "q"])
    assert advantages.tolist() == [[1.0, 0.0], [-1.0, 0.0]]


def test_groups_are_found_by_id_not_by_position() -> None:
    rewards = _t([[1.0], [5.0], [0.0], [3.0]])
    present = torch.ones(4, 1, dtype=torch.bool)
    interleaved = attempt_advantages(rewards, present, np.array(["a", "b", "a", "b"], dtype=object))
    assert interleaved.flatten().tolist() == [1.0, 2.0, -1.0, -2.0]
    as_ints = attempt_advantages(rewards, present, torch.tensor([4, 9, 4, 9]))
    assert torch.equal(interleaved, as_ints)


def test_improvement_shaping_adds_the_gain_over_the_previous_attempt() -> None:
    # Row 0 improves 0 -> 1: shaped reward of attempt 2 = 1 + 0.5 * (1 - 0) = 1.5; row 1 stays 0.
    rewards = _t([[0.0, 1.0], [0.0, 0.0]])
    present = torch.ones(2, 2, dtype=torch.bool)
    advantages = attempt_advantages(rewards, present, ["q", "q"], shaping=0.5, gamma=0.0)
    assert advantages.tolist() == [[0.0, 1.5], [0.0, -1.5]]


def test_outcome_only_gives_every_attempt_the_final_outcome_advantage() -> None:
    # Row 0 ends right, row 1 ends wrong although its first attempt was right; row 2 stops after attempt 1 (right).
    rewards = _t([[0.0, 0.0, 1.0], [1.0, 0.0, 0.0], [1.0, 0.0, 0.0]])
    present = torch.tensor([[True, True, True], [True, True, True], [True, False, False]])
    advantages = attempt_advantages(rewards, present, ["q"] * 3, outcome_only=True)
    # Final outcomes (1, 0, 1) -> loo (0.5, -1, 0.5), given to every present attempt.
    assert advantages.tolist() == [[0.5, 0.5, 0.5], [-1.0, -1.0, -1.0], [0.5, 0.0, 0.0]]


def test_integer_rewards_are_accepted_and_float_returned() -> None:
    advantages = attempt_advantages(torch.tensor([[1], [0]]), torch.tensor([[1], [1]]), ["a", "a"])
    assert advantages.dtype == torch.float32
    assert advantages.flatten().tolist() == [1.0, -1.0]


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"baseline": "mean"}, "baseline"),
        ({"std_normalize": True}, "grpo"),
        ({"gamma": 1.5}, "gamma"),
    ],
)
def test_invalid_options_are_rejected(kwargs: dict, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        attempt_advantages(torch.zeros(2, 1), torch.ones(2, 1, dtype=torch.bool), ["a", "a"], **kwargs)


def test_mismatched_shapes_are_rejected() -> None:
    with pytest.raises(ValueError, match="present"):
        attempt_advantages(torch.zeros(2, 2), torch.ones(2, 1, dtype=torch.bool), ["a", "a"])
    with pytest.raises(ValueError, match="group_ids"):
        attempt_advantages(torch.zeros(2, 1), torch.ones(2, 1, dtype=torch.bool), ["a"])


def test_spread_to_tokens_follows_attempt_ids_and_mask() -> None:
    advantages = _t([[1.0, -2.0], [3.0, 4.0]])
    attempt_ids = torch.tensor([[0, 0, 1, 1, -1], [0, 1, 1, -1, -1]])
    mask = torch.tensor([[1, 0, 1, 1, 0], [1, 1, 0, 0, 0]])
    tokens = spread_to_tokens(advantages, attempt_ids, mask)
    assert tokens.tolist() == [[1.0, 0.0, -2.0, -2.0, 0.0], [3.0, 4.0, 0.0, 0.0, 0.0]]


def test_spread_to_tokens_gives_padding_zero_even_under_the_mask() -> None:
    # Padding id -1 must never read attempt 0's advantage.
    tokens = spread_to_tokens(_t([[5.0]]), torch.tensor([[0, -1]]), torch.tensor([[1, 1]]))
    assert tokens.tolist() == [[5.0, 0.0]]


def test_spread_to_tokens_rejects_ids_beyond_k() -> None:
    with pytest.raises(ValueError, match=r"must lie in 0\.\.1, or be -1 on padding"):
        spread_to_tokens(_t([[1.0, 2.0]]), torch.tensor([[0, 2]]), torch.tensor([[1, 1]]))
    with pytest.raises(ValueError, match=r"must lie in 0\.\.1"):
        spread_to_tokens(_t([[1.0, 2.0]]), torch.tensor([[0, -2]]), torch.tensor([[1, 1]]))


def test_spread_to_tokens_on_wide_rows_matches_a_plain_loop() -> None:
    # Every row must get exactly its own attempt's value, and a bad id in the last row must still raise ValueError.
    generator = torch.Generator().manual_seed(0)
    rows, width, attempts = 45, 4096, 3
    advantages = torch.randn(rows, attempts, generator=generator)
    attempt_ids = torch.randint(-1, attempts, (rows, width), generator=generator)
    mask = torch.randint(0, 2, (rows, width), generator=generator)
    tokens = spread_to_tokens(advantages, attempt_ids, mask)
    broken = attempt_ids.clone()
    broken[-1, -1] = attempts  # out of range
    with pytest.raises(ValueError, match=r"must lie in 0\.\.2"):
        spread_to_tokens(advantages, broken, mask)
    expected = torch.zeros(rows, width)
    for row in range(rows):
        for attempt in range(attempts):
            expected[row][attempt_ids[row] == attempt] = advantages[row, attempt]
    assert torch.equal(tokens, expected * mask)


def test_spread_to_tokens_takes_a_half_precision_mask_and_inputs_that_need_grad() -> None:
    ids, mask = torch.tensor([[0, 1, -1]]), torch.tensor([[1, 1, 1]])
    assert spread_to_tokens(_t([[1.0, 2.0]]), ids, mask.to(torch.bfloat16)).tolist() == [[1.0, 2.0, 0.0]]
    advantages = _t([[1.0, 2.0]]).requires_grad_()
    assert spread_to_tokens(advantages, ids, mask).tolist() == [[1.0, 2.0, 0.0]]


@pytest.mark.parametrize("mask_dtype", [torch.bool, torch.int32, torch.float32])
def test_spread_to_tokens_reads_any_mask_dtype_and_strided_inputs(mask_dtype: torch.dtype) -> None:
    advantages = _t([[1.5, -2.0], [3.0, 0.25]])
    ids = torch.tensor([[0, 0, 1, -1, 9], [1, 0, 0, 1, 9]])[:, :4]  # a non-contiguous view; out-of-order runs
    mask = torch.tensor([[1, 0, 1, 1], [1, 1, 0, 1]]).to(mask_dtype)
    tokens = spread_to_tokens(advantages, ids, mask)
    assert tokens.dtype == advantages.dtype
    assert tokens.tolist() == [[1.5, 0.0, -2.0, 0.0], [0.25, 3.0, 0.0, 0.25]]
