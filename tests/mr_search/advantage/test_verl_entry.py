"""Through verl's own advantage entry: registered as `mr_search`, equal to verl's rloo/grpo when K = 1, and an
error (not a fallback) without the per-attempt columns."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from verl.protocol import DataProto
from verl.trainer.ppo import core_algos
from verl.trainer.ppo.core_algos import AdvantageEstimator
from verl.trainer.ppo.ray_trainer import compute_advantage

import mr_search.advantage as advantage
from mr_search.advantage import ESTIMATOR_NAME, AdvantageConfig, compute_mr_search_advantage
from mr_search.contract import AttemptStatus


def _batch(seed: int, reward_values: tuple[float, ...]) -> DataProto:
    """A batch as the trainer builds it: right-padded responses, the outcome reward on each row's last token,
    uids of groups of 2-5 rows, shuffled (verl's batch balancing reorders rows)."""
    generator = torch.Generator().manual_seed(seed)
    sizes = [2, 3, 5, 4, 2]
    uids = np.array([f"{seed}-{g}" for g, size in enumerate(sizes) for _ in range(size)], dtype=object)
    order = torch.randperm(len(uids), generator=generator)
    uids = uids[order.numpy()]
    rows, width = len(uids), 12
    lengths = torch.randint(1, width + 1, (rows,), generator=generator)
    mask = (torch.arange(width)[None, :] < lengths[:, None]).to(torch.int64)
    mask[:, 0] = 1
    mask[torch.rand(rows, width, generator=generator) < 0.2] = 0  # environment tokens inside the response
    values = torch.tensor(reward_values, dtype=torch.float32)
    scores = values[torch.randint(0, len(values), (rows,), generator=generator)]
    token_rewards = torch.zeros(rows, width)
    token_rewards[torch.arange(rows), lengths - 1] = scores
    data = DataProto.from_dict(tensors={"token_level_rewards": token_rewards, "response_mask": mask})
    data.non_tensor_batch["uid"] = uids
    return data


def _single_attempt(data: DataProto, config: AdvantageConfig) -> torch.Tensor:
    """Our estimator on the batch as K = 1 meta-episodes: one complete attempt per row, its reward the row's."""
    rewards = data.batch["token_level_rewards"].sum(dim=-1, keepdim=True)
    advantages, _ = compute_mr_search_advantage(
        token_level_rewards=data.batch["token_level_rewards"],
        response_mask=data.batch["response_mask"],
        index=data.non_tensor_batch["uid"],
        config=config,
        attempt_ids=torch.zeros_like(data.batch["response_mask"]),
        attempt_rewards=rewards,
        attempt_status=torch.full_like(rewards, int(AttemptStatus.COMPLETE), dtype=torch.int64),
    )
    return advantages


def _advantages(data: DataProto, estimator: object, **kwargs: object) -> torch.Tensor:
    copy = DataProto.from_dict(
        tensors={k: v.clone() for k, v in data.batch.items()}, non_tensors=dict(data.non_tensor_batch)
    )
    return compute_advantage(copy, adv_estimator=estimator, **kwargs).batch["advantages"]


def test_registered_under_mr_search() -> None:
    advantage.register()
    assert core_algos.get_adv_estimator_fn(ESTIMATOR_NAME) is compute_mr_search_advantage


def test_register_is_idempotent_even_after_a_reimport() -> None:
    import importlib

    import mr_search.advantage.estimator as estimator_module

    advantage.register()
    advantage.register()
    reloaded = importlib.reload(estimator_module)  # a retried plugin import builds a new function object
    reloaded.register()
    assert core_algos.get_adv_estimator_fn(ESTIMATOR_NAME).__qualname__ == "compute_mr_search_advantage"


@pytest.mark.parametrize("seed", [0, 1, 2])
@pytest.mark.parametrize("values", [(0.0, 1.0), (-1.5, 0.25, 2.0, 3.0)])
def test_k1_loo_equals_verl_rloo(seed: int, values: tuple[float, ...]) -> None:
    advantage.register()
    data = _batch(seed, values)
    ours = _single_attempt(data, AdvantageConfig(baseline="loo"))
    verl = _advantages(data, AdvantageEstimator.RLOO, config=None)
    assert torch.count_nonzero(verl) > 0
    assert torch.allclose(ours, verl, atol=1e-6)


@pytest.mark.parametrize("seed", [0, 1, 2])
@pytest.mark.parametrize("std", [False, True])
@pytest.mark.parametrize("values", [(0.0, 1.0), (-1.5, 0.25, 2.0, 3.0)])
def test_k1_grpo_equals_verl_grpo(seed: int, std: bool, values: tuple[float, ...]) -> None:
    advantage.register()
    data = _batch(seed, values)
    ours = _single_attempt(data, AdvantageConfig(baseline="grpo", std_normalize=std))
    verl = _advantages(data, AdvantageEstimator.GRPO, norm_adv_by_std_in_grpo=std, config=None)
    assert torch.count_nonzero(verl) > 0
    assert torch.allclose(ours, verl, atol=1e-5)


def test_attempt_columns_reach_the_estimator() -> None:
    # The trainer passes the per-attempt columns: K = 2, worked example of docs/method.md#the-attempt-level-advantage.
    mask = torch.tensor([[1, 1, 0, 1, 1], [1, 0, 1, 1, 0]])
    ids = torch.tensor([[0, 0, 0, 1, 1], [0, 0, 1, 1, -1]])
    advantages, returns = compute_mr_search_advantage(
        token_level_rewards=torch.zeros(2, 5),
        response_mask=mask,
        index=np.array(["q", "q"], dtype=object),
        config=AdvantageConfig(gamma=0.0),
        attempt_ids=ids,
        attempt_rewards=torch.tensor([[0.0, 1.0], [0.0, 0.0]]),
        attempt_status=torch.tensor([[1, 1], [1, 1]]),
    )
    assert advantages.tolist() == [[0.0, 0.0, 0.0, 1.0, 1.0], [0.0, 0.0, -1.0, -1.0, 0.0]]
    assert torch.equal(advantages, returns)


def test_given_attempt_advantages_are_spread_not_computed_again() -> None:
    # The MR-Search trainer computes them once (it logs them too) and hands them over with the columns.
    mask = torch.tensor([[1, 1, 0, 1, 1], [1, 0, 1, 1, 0]])
    ids = torch.tensor([[0, 0, 0, 1, 1], [0, 0, 1, 1, -1]])
    columns = {
        "token_level_rewards": torch.zeros(2, 5),
        "response_mask": mask,
        "index": np.array(["q", "q"], dtype=object),
        "config": AdvantageConfig(gamma=0.0),
        "attempt_ids": ids,
        "attempt_rewards": torch.tensor([[0.0, 1.0], [0.0, 0.0]]),
        "attempt_status": torch.tensor([[1, 1], [1, 1]]),
    }
    computed, _ = compute_mr_search_advantage(**columns)
    per_attempt = advantage.per_attempt_advantages(
        columns["attempt_rewards"], columns["attempt_status"], columns["index"], columns["config"]
    )
    given, _ = compute_mr_search_advantage(**columns, per_attempt=per_attempt)
    assert torch.equal(given, computed)
    spread, _ = compute_mr_search_advantage(**columns, per_attempt=torch.tensor([[2.0, 3.0], [4.0, 5.0]]))
    assert spread.tolist() == [[2.0, 2.0, 0.0, 3.0, 3.0], [4.0, 0.0, 5.0, 5.0, 0.0]]


def test_without_attempt_columns_it_is_an_error_not_a_fallback() -> None:
    # algorithm.adv_estimator=mr_search under verl's own trainer (trainer.v1.trainer_mode=sync): verl's
    # compute_advantage passes no per-attempt columns, and the estimator must refuse rather than train
    # outcome-only credit on meta-episodes.
    advantage.register()
    with pytest.raises(ValueError, match=r"trainer\.v1\.trainer_mode=mr_search"):
        _advantages(_batch(0, (0.0, 1.0)), ESTIMATOR_NAME, config=None)


def test_partial_attempt_columns_are_rejected() -> None:
    with pytest.raises(ValueError, match="per-attempt columns"):
        compute_mr_search_advantage(torch.zeros(1, 2), torch.ones(1, 2), index=["a"], attempt_rewards=torch.zeros(1, 1))
