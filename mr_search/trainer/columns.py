"""Turns the per-attempt columns fetched from TransferQueue (jagged, per row) into padded ``[B, T]`` / ``[B, K]``."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
from torch.nn.utils.rnn import pad_sequence

from mr_search.contract import ATTEMPT_IDS, ATTEMPT_REWARDS, ATTEMPT_STATUS, EPISODE_ID, PAD_ATTEMPT_ID, AttemptStatus

# verl's synthetic padding rows (verl/trainer/ppo/padding_utils.py) have uids starting so; uuid4 hex uids cannot.
PADDING_UID_PREFIX = "pad"


@dataclass(frozen=True)
class AttemptBatch:
    """Per-attempt data row-aligned with the padded trainer batch (``episode_ids`` None: a row per meta-episode)."""

    attempt_ids: torch.Tensor
    rewards: torch.Tensor
    status: torch.Tensor
    is_padding: torch.Tensor
    episode_ids: torch.Tensor | None = None


def column_rows(column: Any) -> list[torch.Tensor]:
    """Splits a column into one 1-D tensor per row: jagged nested tensor, padded tensor or list of sequences."""
    rows = list(column.unbind(0)) if isinstance(column, torch.Tensor) else [torch.as_tensor(row) for row in column]
    return [row.reshape(-1) for row in rows]


def _pad_rows(rows: list[torch.Tensor], width: int, value: float, dtype: torch.dtype) -> torch.Tensor:
    """Right-pads 1-D rows with ``value`` to ``[B, width]`` (rows longer than ``width`` are cut)."""
    if not rows:
        return torch.full((0, width), value, dtype=dtype)
    padded = pad_sequence([row.to(dtype) for row in rows], batch_first=True, padding_value=value)
    if padded.shape[1] >= width:
        return padded[:, :width]
    return torch.cat([padded, torch.full((padded.shape[0], width - padded.shape[1]), value, dtype=dtype)], dim=1)


def attempt_batch_from_columns(
    columns: dict[str, Any],
    response_lengths: torch.Tensor | Sequence[int],
    uids: Sequence[str] | np.ndarray,
    width: int,
) -> AttemptBatch:
    """Aligns the contract columns with the trainer's right-padded batch; attempt ids are padded with -1, never 0."""
    missing = [name for name in (ATTEMPT_IDS, ATTEMPT_REWARDS, ATTEMPT_STATUS) if name not in columns]
    if missing:
        raise ValueError(
            f"per-attempt column(s) {missing} missing from the batch: the rollout must be MR-Search's agent loop "
            "(mr_search.contract) when algorithm.adv_estimator=mr_search"
        )
    lengths = torch.as_tensor(response_lengths, dtype=torch.int64).reshape(-1)
    num_rows = lengths.numel()
    is_padding = torch.tensor([str(uid).startswith(PADDING_UID_PREFIX) for uid in uids], dtype=torch.bool)
    if is_padding.numel() != num_rows:
        raise ValueError(f"{is_padding.numel()} uids for {num_rows} rows")

    id_rows = column_rows(columns[ATTEMPT_IDS])
    reward_rows = column_rows(columns[ATTEMPT_REWARDS])
    status_rows = column_rows(columns[ATTEMPT_STATUS])
    for name, rows in ((ATTEMPT_IDS, id_rows), (ATTEMPT_REWARDS, reward_rows), (ATTEMPT_STATUS, status_rows)):
        if len(rows) != num_rows:
            raise ValueError(f"column {name} has {len(rows)} rows, the batch has {num_rows}")
    id_lengths = torch.tensor([row.numel() for row in id_rows], dtype=torch.int64)
    bad = ((id_lengths != lengths) & ~is_padding).nonzero().flatten()
    if bad.numel():
        row = int(bad[0])
        raise ValueError(
            f"row {row} (uid {uids[row]!r}) has {int(id_lengths[row])} attempt ids for {int(lengths[row])} response "
            f"tokens ({bad.numel()} such rows): the agent loop must give {ATTEMPT_IDS} exactly one entry per response "
            "token, cut to rollout.response_length together with the response"
        )

    attempt_ids = _pad_rows(id_rows, width, PAD_ATTEMPT_ID, torch.int64)
    beyond = torch.arange(width)[None, :] >= lengths[:, None]
    attempt_ids = attempt_ids.masked_fill(beyond, PAD_ATTEMPT_ID)
    num_attempts = max((row.numel() for row in reward_rows), default=0)
    rewards = _pad_rows(reward_rows, num_attempts, 0.0, torch.float32)
    status = _pad_rows(status_rows, num_attempts, int(AttemptStatus.ABSENT), torch.int64)
    status = status.masked_fill(is_padding[:, None], int(AttemptStatus.ABSENT))
    rewards = torch.where(status == AttemptStatus.ABSENT, torch.zeros_like(rewards), rewards)
    episode_ids = None
    if EPISODE_ID in columns:
        episode_rows = column_rows(columns[EPISODE_ID])
        if len(episode_rows) != num_rows or any(row.numel() != 1 for row in episode_rows):
            raise ValueError(f"column {EPISODE_ID} must hold one id per row, for {num_rows} rows")
        episode_ids = torch.cat(episode_rows).to(torch.int64)
        # A padding row copies a real row's id: give it one of its own, so it never joins that meta-episode.
        episode_ids = torch.where(is_padding, -1 - torch.arange(num_rows), episode_ids)
    return AttemptBatch(
        attempt_ids=attempt_ids, rewards=rewards, status=status, is_padding=is_padding, episode_ids=episode_ids
    )


def attempt_token_sums(values: torch.Tensor, attempt_ids: torch.Tensor, num_attempts: int) -> torch.Tensor:
    """Sums a per-token ``[B, T]`` quantity within each attempt: ``[B, K]`` (tokens with id -1 are dropped)."""
    valid = attempt_ids >= 0
    sums = values.new_zeros((values.shape[0], num_attempts + 1))
    index = torch.where(valid, attempt_ids, torch.full_like(attempt_ids, num_attempts))
    sums.scatter_add_(1, index, torch.where(valid, values, torch.zeros_like(values)))
    return sums[:, :num_attempts]
