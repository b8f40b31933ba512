"""Aligning TransferQueue's jagged per-attempt columns with the trainer's right-padded batch."""

from __future__ import annotations

import pytest
import torch

from mr_search.contract import ATTEMPT_IDS, ATTEMPT_REWARDS, ATTEMPT_STATUS, EPISODE_ID, PAD_ATTEMPT_ID, AttemptStatus
from mr_search.trainer.columns import attempt_batch_from_columns, attempt_token_sums


def _jagged(rows: list[list[float]], dtype: torch.dtype) -> torch.Tensor:
    return torch.nested.as_nested_tensor([torch.tensor(r, dtype=dtype) for r in rows], layout=torch.jagged)


def _columns(ids: list[list[int]], rewards: list[list[float]], status: list[list[int]]) -> dict:
    return {
        ATTEMPT_IDS: _jagged(ids, torch.int64),
        ATTEMPT_REWARDS: _jagged(rewards, torch.float32),
        ATTEMPT_STATUS: _jagged(status, torch.int64),
    }


def test_attempt_ids_are_padded_with_minus_one_not_attempt_zero() -> None:
    columns = _columns([[0, 0, 1], [0]], [[1.0, 0.0], [0.0, 0.0]], [[1, 1], [1, 0]])
    batch = attempt_batch_from_columns(columns, response_lengths=[3, 1], uids=["a", "a"], width=4)
    assert batch.attempt_ids.tolist() == [[0, 0, 1, PAD_ATTEMPT_ID], [0, PAD_ATTEMPT_ID, PAD_ATTEMPT_ID, -1]]
    assert batch.rewards.tolist() == [[1.0, 0.0], [0.0, 0.0]]
    assert batch.status.tolist() == [[AttemptStatus.COMPLETE] * 2, [AttemptStatus.COMPLETE, AttemptStatus.ABSENT]]
    assert batch.is_padding.tolist() == [False, False]


def test_verl_padding_rows_are_cut_to_their_mask_length_and_have_no_attempts() -> None:
    # verl's synthetic row copies row 0's fields (5 attempt ids, its rewards) but has a 1-token response.
    columns = _columns([[0, 0, 1, 1, 2], [0, 0, 1, 1, 2]], [[1.0, 0.0, 1.0]] * 2, [[1, 1, 1]] * 2)
    batch = attempt_batch_from_columns(columns, response_lengths=[5, 1], uids=["u1", "pad0a1b"], width=5)
    assert batch.attempt_ids[1].tolist() == [0, -1, -1, -1, -1]
    assert batch.status[1].tolist() == [AttemptStatus.ABSENT] * 3
    assert batch.rewards[1].tolist() == [0.0, 0.0, 0.0]
    assert batch.is_padding.tolist() == [False, True]


def test_batch_width_is_the_longest_response_not_the_configured_maximum() -> None:
    columns = _columns([[0, 1], [0, 0, 0]], [[1.0, 1.0], [1.0, 0.0]], [[1, 1], [1, 0]])
    batch = attempt_batch_from_columns(columns, response_lengths=[2, 3], uids=["a", "b"], width=3)
    assert batch.attempt_ids.shape == (2, 3)


def test_padded_tensor_and_list_columns_are_accepted() -> None:
    columns = {
        ATTEMPT_IDS: [[0, 1], [0, 0]],
        ATTEMPT_REWARDS: torch.tensor([[0.5, 1.0], [0.0, 0.0]]),
        ATTEMPT_STATUS: torch.tensor([[1, 1], [1, 0]]),
    }
    batch = attempt_batch_from_columns(columns, response_lengths=[2, 2], uids=["a", "a"], width=2)
    assert batch.attempt_ids.tolist() == [[0, 1], [0, 0]]
    # An absent attempt's reward is dropped whatever the rollout wrote there.
    assert batch.rewards.tolist() == [[0.5, 1.0], [0.0, 0.0]]


def test_a_real_row_with_misaligned_attempt_ids_is_an_error() -> None:
    columns = _columns([[0, 0, 1], [0]], [[1.0, 0.0], [0.0, 0.0]], [[1, 1], [1, 0]])
    with pytest.raises(ValueError, match=r"row 1 .* 1 attempt ids for 2 response tokens.*response_length"):
        attempt_batch_from_columns(columns, response_lengths=[3, 2], uids=["a", "b"], width=3)


def test_missing_columns_name_the_rollout_to_use() -> None:
    with pytest.raises(ValueError, match=r"mr_attempt_status.*agent loop"):
        attempt_batch_from_columns(
            {ATTEMPT_IDS: [[0]], ATTEMPT_REWARDS: [[1.0]]}, response_lengths=[1], uids=["a"], width=1
        )


def test_attempt_token_sums_groups_tokens_by_attempt_and_drops_padding() -> None:
    values = torch.tensor([[1.0, 2.0, 4.0, 8.0], [16.0, 32.0, 64.0, 128.0]])
    ids = torch.tensor([[0, 1, 1, -1], [2, 2, 0, -1]])
    assert attempt_token_sums(values, ids, 3).tolist() == [[1.0, 6.0, 0.0], [64.0, 0.0, 48.0]]


def test_episode_ids_are_read_and_padding_rows_get_their_own() -> None:
    columns = _columns([[0, 1], [1], [0, 1]], [[1.0, 0.0]] * 3, [[1, 1]] * 3)
    columns[EPISODE_ID] = _jagged([[42], [42], [42]], torch.int64)  # row 2: verl's copy of row 0
    batch = attempt_batch_from_columns(columns, response_lengths=[2, 1, 1], uids=["a", "a", "pad0"], width=2)
    assert batch.episode_ids.tolist() == [42, 42, -3]
    assert attempt_batch_from_columns(_columns([[0]], [[1.0]], [[1]]), [1], ["a"], 1).episode_ids is None
