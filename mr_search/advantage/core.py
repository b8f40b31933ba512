"""Pure, vectorized attempt-level advantage (formula and worked example: docs/method.md#the-attempt-level-advantage)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

import numpy as np
import torch

from mr_search.advantage.config import BASELINES

GroupIds = torch.Tensor | np.ndarray | Sequence[str] | Sequence[int]


def group_codes(group_ids: GroupIds, num_rows: int, device: torch.device | None = None) -> tuple[torch.Tensor, int]:
    """Dense int64 codes in ``[0, G)`` for each row's group id (verl ``uid``), and G."""
    if isinstance(group_ids, torch.Tensor):
        if group_ids.dtype.is_floating_point or group_ids.dtype.is_complex or group_ids.dtype == torch.bool:
            raise ValueError(f"group_ids must be an integer tensor or a sequence of uids, got dtype {group_ids.dtype}")
        flat = group_ids.reshape(-1)
        _, codes = torch.unique(flat, return_inverse=True)
        codes = codes.to(torch.int64)
    else:
        array = np.asarray(group_ids, dtype=object) if not isinstance(group_ids, np.ndarray) else group_ids
        flat_np = array.reshape(-1)
        if flat_np.dtype == object:
            flat_np = flat_np.astype(str)
        _, inverse = np.unique(flat_np, return_inverse=True)
        codes = torch.as_tensor(inverse.reshape(-1), dtype=torch.int64)
    if codes.numel() != num_rows:
        raise ValueError(f"group_ids has {codes.numel()} entries but rewards have {num_rows} rows; give one per row")
    codes = codes.to(device) if device is not None else codes
    num_groups = int(codes.max().item()) + 1 if num_rows else 0
    return codes, num_groups


def _relative_rewards(
    rewards: torch.Tensor,
    present: torch.Tensor,
    codes: torch.Tensor,
    num_groups: int,
    baseline: str,
    std_normalize: bool,
    epsilon: float,
) -> torch.Tensor:
    """Baseline-subtracted rewards per column: ``[B, C]`` -> ``[B, C]``; 0 where absent, alone or all-equal."""
    num_cols = rewards.shape[1]
    weight = present.to(rewards.dtype)
    shape = (num_groups, num_cols)

    def per_row(per_group: torch.Tensor) -> torch.Tensor:
        # index_select, not advanced indexing: the latter goes multi-threaded on tiny tensors and stalls on busy CPUs.
        return per_group.index_select(0, codes)

    count = per_row(rewards.new_zeros(shape).index_add_(0, codes, weight))
    total = per_row(rewards.new_zeros(shape).index_add_(0, codes, rewards * weight))
    mean = total / count.clamp(min=1.0)
    centred = rewards - mean
    if baseline == "loo":
        # r - mean(others) = n/(n-1) (r - mean), the form verl's rloo uses.
        relative = centred * count / (count - 1.0).clamp(min=1.0)
    else:
        relative = centred
        if std_normalize:
            squares = per_row(rewards.new_zeros(shape).index_add_(0, codes, centred.square() * weight))
            std = (squares / (count - 1.0).clamp(min=1.0)).sqrt()  # unbiased, as torch.std in verl's grpo
            relative = centred / (std + epsilon)
    # All-equal groups get exactly 0 (no float residue from the mean), as do lone and absent entries.
    index = codes[:, None].expand_as(rewards)
    inf = torch.full(shape, float("inf"), dtype=rewards.dtype, device=rewards.device)
    high = per_row((-inf).scatter_reduce(0, index, torch.where(present, rewards, float("-inf")), "amax"))
    low = per_row(inf.scatter_reduce(0, index, torch.where(present, rewards, float("inf")), "amin"))
    informative = present & (count >= 2) & (high != low)
    return torch.where(informative, relative, torch.zeros_like(relative))


def attempt_advantages(
    rewards: torch.Tensor,
    present: torch.Tensor,
    group_ids: GroupIds,
    *,
    gamma: float = 1.0,
    baseline: Literal["loo", "grpo"] = "loo",
    std_normalize: bool = False,
    epsilon: float = 1e-6,
    shaping: float = 0.0,
    outcome_only: bool = False,
) -> torch.Tensor:
    """Attempt-level advantages ``[B, K]`` of the multi-turn GRPO estimator (docs/method.md).

    Per attempt index over a group's present attempts: optional shaping, the ``loo`` or ``grpo`` baseline (0 when alone
    or all equal), then the discounted sum over later attempts; absent attempts get 0. Rows group by id, not position.
    """
    if rewards.dim() != 2:
        raise ValueError(f"rewards must be [B, K], got shape {tuple(rewards.shape)}")
    if present.shape != rewards.shape:
        raise ValueError(f"present must have the shape of rewards {tuple(rewards.shape)}, got {tuple(present.shape)}")
    if baseline not in BASELINES:
        raise ValueError(f"baseline={baseline!r} is not valid; choose one of {list(BASELINES)}")
    if std_normalize and baseline != "grpo":
        raise ValueError("std_normalize=True needs baseline='grpo'")
    if not 0.0 <= gamma <= 1.0:
        raise ValueError(f"gamma={gamma!r} is not valid; use a number in [0, 1]")
    if not rewards.dtype.is_floating_point:
        rewards = rewards.to(torch.float32)
    out_dtype = rewards.dtype
    # float64 inside: a float32 baseline leaves +-6e-8 where later advantages cancel (see _discounted_sums).
    rewards = rewards.to(torch.float64)
    num_rows, num_attempts = rewards.shape
    present = present.to(device=rewards.device, dtype=torch.bool)
    codes, num_groups = group_codes(group_ids, num_rows, rewards.device)
    zero = torch.zeros_like(rewards)
    if num_rows == 0 or num_attempts == 0:
        return zero.to(out_dtype)

    shaped = torch.where(present, rewards, zero)
    if shaping != 0.0:
        previous = torch.cat([zero[:, :1], shaped[:, :-1]], dim=1)
        previous_present = torch.cat([present[:, :1] & False, present[:, :-1]], dim=1)
        shaped = shaped + shaping * torch.where(present & previous_present, shaped - previous, zero)

    if outcome_only:
        any_present = present.any(dim=1, keepdim=True)
        positions = torch.arange(1, num_attempts + 1, device=rewards.device)
        last = (present.to(torch.int64) * positions).argmax(dim=1, keepdim=True)
        final = shaped.gather(1, last)
        relative = _relative_rewards(final, any_present, codes, num_groups, baseline, std_normalize, epsilon)
        return torch.where(present, relative.expand(-1, num_attempts), zero).to(out_dtype)

    relative = _relative_rewards(shaped, present, codes, num_groups, baseline, std_normalize, epsilon)
    advantages = _discounted_sums(relative, gamma) if num_attempts > 1 and gamma != 0.0 else relative
    return torch.where(present, advantages, zero).to(out_dtype)


def _discounted_sums(relative: torch.Tensor, gamma: float) -> torch.Tensor:
    """``sum_{s' >= s} gamma^(s'-s) relative[:, s']`` in float64; 0 within rounding error (else trained on)."""
    num_attempts = relative.shape[1]
    values = relative.to(torch.float64)
    steps = torch.arange(num_attempts, device=relative.device)
    lag = steps[:, None] - steps[None, :]  # [s', s] = s' - s
    discount = torch.where(
        lag >= 0, torch.tensor(gamma, dtype=torch.float64, device=relative.device) ** lag.clamp(min=0), 0.0
    )
    # A broadcast product, as a [B, K] x [K, K] BLAS call costs more in thread start-up than it computes.
    sums = (values[:, :, None] * discount[None, :, :]).sum(dim=1)
    scale = (values.abs()[:, :, None] * discount[None, :, :]).sum(dim=1)
    tolerance = 4 * num_attempts * torch.finfo(torch.float64).eps * scale
    return torch.where(sums.abs() <= tolerance, torch.zeros_like(sums), sums)


def spread_to_tokens(advantages: torch.Tensor, attempt_ids: torch.Tensor, response_mask: torch.Tensor) -> torch.Tensor:
    """Each response token's attempt advantage times its mask; 0 on padding (id -1), ValueError outside ``-1..K-1``."""
    if (
        attempt_ids.shape != response_mask.shape
        or attempt_ids.dim() != 2
        or attempt_ids.shape[0] != advantages.shape[0]
    ):
        raise ValueError(
            f"attempt_ids {tuple(attempt_ids.shape)} and response_mask {tuple(response_mask.shape)} must both be "
            f"[B, T] with B = {advantages.shape[0]} rows, as advantages {tuple(advantages.shape)}"
        )
    # Column 0 stands for padding (id -1 -> index 0), so a single gather needs no branch.
    table = torch.cat([advantages.new_zeros(advantages.shape[0], 1), advantages], dim=1)
    index = attempt_ids.to(device=table.device, dtype=torch.int64) + 1
    try:
        tokens = torch.gather(table, 1, index)
    except (RuntimeError, IndexError) as error:
        raise ValueError(
            f"attempt ids must lie in 0..{advantages.shape[1] - 1}, or be -1 on padding: {error}"
        ) from error
    return tokens.mul_(response_mask.to(tokens.device))  # as verl's estimators: advantage * mask
