"""Rows to meta-episodes: a meta-episode trained as several rows (one per context the sampler saw) counts once."""

from __future__ import annotations

from dataclasses import dataclass

import torch

from mr_search.advantage.core import GroupIds, group_codes


@dataclass(frozen=True)
class EpisodeRows:
    """Which rows belong to which meta-episode.

    Attributes:
        first: int64 ``[E]`` the first row of each meta-episode, in order of first appearance.
        of_row: int64 ``[B]`` the meta-episode (``0..E-1``) of each row.
    """

    first: torch.Tensor
    of_row: torch.Tensor


def episode_rows(group_ids: GroupIds, episode_ids: torch.Tensor | None, num_rows: int) -> EpisodeRows:
    """Groups rows into meta-episodes by (group id, episode id).

    Args:
        group_ids: ``[B]`` group (verl ``uid``) of each row.
        episode_ids: int ``[B]`` meta-episode id of each row, unique within its group (``mr_search.contract``
            ``EPISODE_ID``); None: every row is a meta-episode of its own.
        num_rows: B.

    Returns:
        The rows' ``EpisodeRows``.
    """
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
    """Raises unless every row of a meta-episode carries the meta-episode's rewards and statuses.

    Raises:
        ValueError: naming a row that disagrees with its meta-episode's first row.
    """
    for name, values in (("rewards", rewards), ("statuses", status)):
        differ = (values != values.index_select(0, rows.first.index_select(0, rows.of_row).to(values.device))).any(1)
        if bool(differ.any()):
            row = int(differ.nonzero()[0])
            raise ValueError(
                f"row {row} has attempt {name} {values[row].tolist()} but another row of its meta-episode (same uid "
                "and episode id) has different ones: every training row of a meta-episode must carry its per-attempt "
                "rewards and statuses (mr_search.contract)"
            )
