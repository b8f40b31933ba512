"""A meta-episode trained as several rows gets its full-context per-attempt advantages; the baseline counts it once."""

from __future__ import annotations

import random

import numpy as np
import pytest
import torch

from mr_search.advantage import AdvantageConfig, compute_mr_search_advantage, per_attempt_advantages
from mr_search.advantage.episodes import episode_rows
from mr_search.contract import AttemptStatus

K = 3


def reference(rewards: list[list[float]], present: list[list[bool]], groups: list[str]) -> list[list[float]]:
    """Plain loops, one entry per meta-episode: leave-one-out per attempt within the group, then gamma = 1 sums."""
    relative = [[0.0] * K for _ in rewards]
    for e, group in enumerate(groups):
        for s in range(K):
            if not present[e][s]:
                continue
            others = [rewards[j][s] for j in range(len(rewards)) if groups[j] == group and j != e and present[j][s]]
            values = [rewards[e][s], *others]
            if others and max(values) != min(values):
                relative[e][s] = rewards[e][s] - sum(others) / len(others)
    return [[sum(relative[e][s:]) if present[e][s] else 0.0 for s in range(K)] for e in range(len(rewards))]


def split_into_rows(seed: int):
    """Random meta-episodes (groups of 4), each trained as 1 to K rows (a row per context), rows shuffled."""
    rng = random.Random(seed)
    episodes = []
    for g in range(5):
        for _ in range(4):
            attempts = rng.randint(1, K)
            rewards = [float(rng.random() < 0.5) if s < attempts else 0.0 for s in range(K)]
            episodes.append((f"g{g}", rewards, [s < attempts for s in range(K)]))
    rows = []  # (episode index, its attempt of each token, mask)
    for e, (_, _, present) in enumerate(episodes):
        attempts = sum(present)
        tokens = [s for s in range(attempts) for _ in range(rng.randint(1, 4))]
        cuts = sorted(rng.sample(range(1, len(tokens)), rng.randint(0, min(2, len(tokens) - 1))))
        for lo, hi in zip([0, *cuts], [*cuts, len(tokens)], strict=True):
            rows.append((e, tokens[lo:hi], [rng.randint(0, 1) for _ in tokens[lo:hi]]))
    rng.shuffle(rows)
    return episodes, rows


@pytest.mark.parametrize("seed", range(5))
def test_each_row_gets_its_meta_episodes_advantages_with_the_episode_counted_once(seed: int) -> None:
    episodes, rows = split_into_rows(seed)
    assert len(rows) > len(episodes), "some meta-episodes are trained as several rows"
    want = reference([r for _, r, _ in episodes], [p for _, _, p in episodes], [g for g, _, _ in episodes])
    width = max(len(ids) for _, ids, _ in rows)
    ids = torch.tensor([ids + [-1] * (width - len(ids)) for _, ids, _ in rows])
    mask = torch.tensor([m + [0] * (width - len(m)) for _, _, m in rows])
    rewards = torch.tensor([episodes[e][1] for e, _, _ in rows])
    status = torch.tensor(
        [[int(AttemptStatus.COMPLETE if p else AttemptStatus.ABSENT) for p in episodes[e][2]] for e, _, _ in rows]
    )
    uids = np.array([episodes[e][0] for e, _, _ in rows], dtype=object)
    # Episode ids need only be unique within a group: reuse small numbers across groups.
    episode_ids = torch.tensor([e % 4 for e, _, _ in rows])
    advantages, _ = compute_mr_search_advantage(
        torch.zeros(len(rows), width),
        mask,
        uids,
        AdvantageConfig(),
        attempt_ids=ids,
        attempt_rewards=rewards,
        attempt_status=status,
        episode_ids=episode_ids,
    )
    for row, (e, attempt_ids, row_mask) in enumerate(rows):
        expected = [want[e][s] * m for s, m in zip(attempt_ids, row_mask, strict=True)]
        assert advantages[row, : len(attempt_ids)].tolist() == pytest.approx(expected, abs=1e-6)

    # The same meta-episodes, one row each (the full-context layout), give the same per-attempt advantages.
    whole = per_attempt_advantages(
        torch.tensor([r for _, r, _ in episodes]),
        torch.tensor([[int(AttemptStatus.COMPLETE if p else AttemptStatus.ABSENT) for p in q] for _, _, q in episodes]),
        [g for g, _, _ in episodes],
        AdvantageConfig(),
    )
    assert whole.flatten().tolist() == pytest.approx([a for row in want for a in row], abs=1e-6)


def test_without_episode_ids_the_rows_would_count_as_several_meta_episodes() -> None:
    # Group of two meta-episodes: one right at attempt 1 trained as three rows, one wrong in one row.
    rewards = torch.tensor([[1.0]] * 3 + [[0.0]])
    status = torch.full((4, 1), int(AttemptStatus.COMPLETE))
    uids = ["q"] * 4
    counted_once = per_attempt_advantages(rewards, status, uids, AdvantageConfig(), torch.tensor([7, 7, 7, 9]))
    assert counted_once.flatten().tolist() == [1.0, 1.0, 1.0, -1.0]  # 1 - 0 and 0 - 1, as for two rows
    counted_thrice = per_attempt_advantages(rewards, status, uids, AdvantageConfig())
    assert counted_thrice.flatten().tolist() != counted_once.flatten().tolist()


def test_rows_of_one_meta_episode_must_agree_on_its_rewards() -> None:
    rewards = torch.tensor([[1.0, 0.0], [1.0, 1.0]])
    status = torch.full((2, 2), int(AttemptStatus.COMPLETE))
    with pytest.raises(ValueError, match=r"row 1 has attempt rewards \[1.0, 1.0\].*same uid and episode id"):
        per_attempt_advantages(rewards, status, ["q", "q"], AdvantageConfig(), torch.tensor([3, 3]))


def test_episode_rows_are_numbered_in_row_order_and_keyed_by_group() -> None:
    rows = episode_rows(["b", "a", "b", "a", "b"], torch.tensor([5, 5, 5, 2, 2]), 5)
    assert rows.first.tolist() == [0, 1, 3, 4]  # (b,5) (a,5) (a,2) (b,2): the same id in two groups is two episodes
    assert rows.of_row.tolist() == [0, 1, 0, 2, 3]
    plain = episode_rows(["a", "a"], None, 2)
    assert plain.first.tolist() == [0, 1] and plain.of_row.tolist() == [0, 1]
