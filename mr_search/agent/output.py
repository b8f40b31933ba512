"""The agent loop's output: verl's ``AgentLoopOutput`` plus the per-attempt contract columns."""

from __future__ import annotations

from typing import Any

import torch
from verl.experimental.agent_loop.agent_loop import AgentLoopOutput

from mr_search import contract
from mr_search.agent.state import EpisodeState


class MRSearchAgentLoopOutput(AgentLoopOutput):
    """``as_dict()`` adds ``mr_search.contract``'s columns, which verl's V1 worker stores unchanged."""

    attempt_ids: list[int]
    """Attempt (0-based) of every response token; same length as ``response_ids``."""
    attempt_rewards: list[float]
    """Reward of each of the K configured attempts (0.0 where absent)."""
    attempt_present: list[int]
    """1 where the attempt has response tokens, 0 where the meta-episode ended before it."""

    def as_dict(self) -> dict[str, Any]:
        output = super().as_dict()
        output[contract.ATTEMPT_IDS] = torch.tensor(output.pop("attempt_ids"), dtype=torch.int64)
        output[contract.ATTEMPT_REWARDS] = torch.tensor(output.pop("attempt_rewards"), dtype=torch.float32)
        output[contract.ATTEMPT_PRESENT] = torch.tensor(output.pop("attempt_present"), dtype=torch.int64)
        return output


def episode_metrics(state: EpisodeState, attempts: int) -> dict[str, float]:
    """Per-trajectory scalars (verl averages ``reward_extra_info`` per data source in validation).

    ``em_at_k`` / ``f1_at_k`` / ``searches_at_k`` for k = 1..K (0 for attempts that never ran),
    ``reflection_gain`` = EM at K minus EM at 1, ``invalid_turns``, ``search_failures``,
    ``truncated`` (1 when the response budget ended the meta-episode early), ``attempts_present``.
    """
    records = {record.index: record for record in state.attempts}
    metrics: dict[str, float] = {}
    for k in range(attempts):
        record = records.get(k)
        metrics[f"em_at_{k + 1}"] = record.em if record else 0.0
        metrics[f"f1_at_{k + 1}"] = record.f1 if record else 0.0
        metrics[f"searches_at_{k + 1}"] = float(record.searches) if record else 0.0
    metrics["reflection_gain"] = metrics[f"em_at_{attempts}"] - metrics["em_at_1"]
    metrics["invalid_turns"] = float(sum(r.invalid_turns for r in state.attempts))
    metrics["search_failures"] = float(sum(r.search_failures for r in state.attempts))
    metrics["truncated"] = float(state.truncated)
    metrics["attempts_present"] = float(len(state.attempts))
    return metrics


def aggregate_metrics(per_trajectory: list[dict[str, float]], prefix: str = "mr_search/") -> dict[str, float]:
    """Means over a step's trajectories, with namespaced names (e.g. ``mr_search/em_at_1``)."""
    if not per_trajectory:
        return {}
    keys = sorted({key for metrics in per_trajectory for key in metrics})
    return {f"{prefix}{key}": sum(m.get(key, 0.0) for m in per_trajectory) / len(per_trajectory) for key in keys}
