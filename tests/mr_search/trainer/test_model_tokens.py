"""``mr_search/model_tokens``: the tokens the policy wrote in a step, the budget the lab's comparison matches."""

from __future__ import annotations

import torch

from mr_search.trainer.metrics import attempt_statistics


def _plain_model_tokens(response_mask: list[list[int]], is_padding: list[bool]) -> int:
    total = 0
    for row, padding in zip(response_mask, is_padding, strict=True):
        if padding:
            continue
        for flag in row:
            total += flag == 1
    return total


def _random_step(seed: int) -> dict[str, torch.Tensor]:
    gen = torch.Generator().manual_seed(seed)
    rows, width, attempts = 7, 23, 3
    attempt_ids = torch.randint(-1, attempts, (rows, width), generator=gen)
    # Environment tokens (passages, reflection turns) have mask 0; padding (id -1) too.
    response_mask = (torch.rand(rows, width, generator=gen) < 0.4).to(torch.int64) * (attempt_ids >= 0)
    return {
        "advantages": torch.randn(rows, attempts, generator=gen),
        "rewards": torch.randint(0, 2, (rows, attempts), generator=gen).float(),
        "present": torch.ones(rows, attempts, dtype=torch.bool),
        "token_advantages": torch.randn(rows, width, generator=gen),
        "attempt_ids": attempt_ids,
        "response_mask": response_mask,
        "is_padding": torch.rand(rows, generator=gen) < 0.3,
    }


def test_model_tokens_count_only_what_the_policy_wrote_on_real_rows() -> None:
    for seed in range(5):
        step = _random_step(seed)
        metrics = attempt_statistics(**step)
        want = _plain_model_tokens(step["response_mask"].tolist(), step["is_padding"].tolist())
        assert metrics["mr_search/model_tokens"] == want
        # The per-attempt counts add up to it: every written token belongs to exactly one attempt.
        per_attempt = sum(metrics[f"mr_search/attempt_{k}/trained_tokens"] for k in (1, 2, 3))
        assert per_attempt == want


def test_environment_tokens_do_not_count() -> None:
    step = _random_step(0)
    written = attempt_statistics(**step)["mr_search/model_tokens"]
    # Longer passages (more mask-0 tokens) change the sampled response length, not the model-written count.
    wider = {
        **step,
        "attempt_ids": torch.cat([step["attempt_ids"], torch.zeros(7, 40, dtype=torch.int64)], dim=1),
        "response_mask": torch.cat([step["response_mask"], torch.zeros(7, 40, dtype=torch.int64)], dim=1),
        "token_advantages": torch.cat([step["token_advantages"], torch.zeros(7, 40)], dim=1),
    }
    assert attempt_statistics(**wider)["mr_search/model_tokens"] == written
