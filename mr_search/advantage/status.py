"""Which attempts count for the advantage, and with what reward, from how each attempt ended (the status column)."""

from __future__ import annotations

import torch

from mr_search.advantage.config import TRUNCATED_MODES
from mr_search.contract import AttemptStatus


def credited_attempts(
    rewards: torch.Tensor, status: torch.Tensor, truncated: str = "absent"
) -> tuple[torch.Tensor, torch.Tensor]:
    """Statuses -> ``(rewards, present)``; ``CARRIED`` takes the previous reward: stopping early never earns less."""
    if truncated not in TRUNCATED_MODES:
        raise ValueError(f"truncated={truncated!r} is not valid; choose one of {list(TRUNCATED_MODES)}")
    if status.shape != rewards.shape:
        raise ValueError(f"status {tuple(status.shape)} must have the shape of rewards {tuple(rewards.shape)}")
    status = status.to(device=rewards.device, dtype=torch.int64)
    known = (status >= min(AttemptStatus)) & (status <= max(AttemptStatus))
    if not bool(known.all()):
        raise ValueError(f"attempt status codes must be one of {[int(s) for s in AttemptStatus]}")
    complete = status == AttemptStatus.COMPLETE
    cut = status == AttemptStatus.TRUNCATED
    carried = status == AttemptStatus.CARRIED
    zero = torch.zeros_like(rewards)
    credited = torch.where(complete, rewards, zero)
    present = complete | (cut if truncated == "zero" else torch.zeros_like(cut))
    for s in range(1, rewards.shape[1]):  # K is small: carry each column's reward into the next where carried
        credited[:, s] = torch.where(carried[:, s], credited[:, s - 1], credited[:, s])
        present[:, s] |= carried[:, s] & present[:, s - 1]
    return credited, present
