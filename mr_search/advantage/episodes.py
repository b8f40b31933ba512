"""Rows to meta-episodes: a meta-episode trained as several rows (one per context the sampler saw) counts once."""

from __future__ import annotations

from dataclasses import dataclass

import torch

from mr_search.advantage.core import GroupIds, group_codes


@dataclass(frozen=True)
class EpisodeRows:
    """``first``: int64 ``[E]`` first row of each meta-episode, in order of appearance; ``of_row``: int64 ``[B]``."""

    first: torch.Tensor
    of_row: torch.Tensor


def episode_rows(group_ids: GroupIds, episode_ids: torch.Tensor | None, num_rows: int) -> EpisodeRows:
    """Groups rows into meta-episodes by (group id, episode id); ``episode_ids`` None: one meta-episode per row."""
    rows = torch.arange(num_rows, dtype=torch.int64)
    if episode_ids is None:
        return EpisodeRows(first=rows, of_row=rows)
    episode_ids = torch.as_tensor(episode_ids).reshape(-1).to(torch.int64).cpu()
    if episode_ids.numel() != num_rows:
        raise ValueError(f"episode_ids has {episode_ids.numel()} entries for {num_rows} rows; give one per row")
    codes, _ = group_codes(group_ids, num_rows)
    _, of_row = torch.unique(torch.stack([codes.cpu(), episode_ids], dim=1), dim=0, return_inverse=True)
    num_episodes = int(of_row.max()) + 1 if num_rows else 0
    first = torch.full((num_episodes,), num_rows, dtype=torch.int64).scatter_reduce(0, of_row, rows, "amin")
    # Renumber the meta-episodes in order of first appearance, so that one row per meta-episode keeps row order.
    order = torch.argsort(first)
    rank = torch.empty_like(order)
    rank[order] = torch.arange(num_episodes, dtype=torch.int64)
    return EpisodeRows(first=first[order], of_row=rank[of_row])


def check_same_attempts(rows: EpisodeRows, rewards: torch.Tensor, status: torch.Tensor) -> None:
    """Raises ValueError unless every row of a meta-episode carries the meta-episode's rewards and statuses."""
    for name, values in (("rewards", rewards), ("statuses", status)):
        differ = (values != values.index_select(0, rows.first.index_select(0, rows.of_row).to(values.device))).any(1)
        if bool(differ.any()):
            row = int(differ.nonzero()[0])
            raise ValueError(
                f"row {row} has attempt {name} {values[row].tolist()} but another row of its meta-episode (same uid "
                "and episode id) has different ones: every training row of a meta-episode must carry its per-attempt "
                "rewards and statuses (mr_search.contract)"
            )
