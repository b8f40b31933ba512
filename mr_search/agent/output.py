"""The agent loop's output: verl's ``AgentLoopOutput`` plus the per-attempt contract columns."""

from __future__ import annotations

from typing import Any

import torch
from verl.experimental.agent_loop.agent_loop import AgentLoopOutput

from mr_search import contract
from mr_search.agent.state import EpisodeState
from mr_search.contract import AttemptStatus


class MRSearchAgentLoopOutput(AgentLoopOutput):
    """``as_dict()`` adds ``mr_search.contract``'s columns, which verl's V1 worker stores unchanged."""

    attempt_ids: list[int]
    """Attempt (0-based) of every response token; same length as ``response_ids``."""
    attempt_rewards: list[float]
    """Reward of each of the K configured attempts (0.0 where absent)."""
    attempt_status: list[int]
    """``mr_search.contract.AttemptStatus`` code of each of the K configured attempts."""
    episode_id: int
    """The meta-episode's id (non-negative, < 2**60), the same on each of its training rows."""

    def as_dict(self) -> dict[str, Any]:
        output = super().as_dict()
        output[contract.ATTEMPT_IDS] = torch.tensor(output.pop("attempt_ids"), dtype=torch.int64)
        output[contract.ATTEMPT_REWARDS] = torch.tensor(output.pop("attempt_rewards"), dtype=torch.float32)
        output[contract.ATTEMPT_STATUS] = torch.tensor(output.pop("attempt_status"), dtype=torch.int64)
        output[contract.EPISODE_ID] = torch.tensor([output.pop("episode_id")], dtype=torch.int64)
        return output


def attempt_statuses(state: EpisodeState, attempts: int, length: int) -> list[AttemptStatus]:
    """How each of the K attempts ended (``mr_search.contract.AttemptStatus``).

    An attempt that ran is ``COMPLETE`` unless the response budget cut it (``TRUNCATED``; also when its first
    token lies past the kept ``length``). The attempts after the last one that ran are ``TRUNCATED`` when the
    budget ended the meta-episode (no room for the reflection turn, or the last attempt was cut), ``CARRIED``
    after an early stop on a correct attempt, else ``ABSENT``.
    """
    status = [AttemptStatus.ABSENT] * attempts
    for record in state.attempts:
        cut = record.truncated or record.start >= length
        status[record.index] = AttemptStatus.TRUNCATED if cut else AttemptStatus.COMPLETE
    after = max((record.index for record in state.attempts), default=-1) + 1
    if state.truncated:
        rest = AttemptStatus.TRUNCATED
    elif state.stopped_early:
        rest = AttemptStatus.CARRIED
    else:
        rest = AttemptStatus.ABSENT
    for index in range(after, attempts):
        status[index] = rest
    return status


def episode_metrics(state: EpisodeState, attempts: int) -> dict[str, float]:
    """Per-trajectory scalars (verl averages ``reward_extra_info`` per data source in validation).

    ``em_at_k`` / ``f1_at_k`` / ``searches_at_k`` for k = 1..K (0 for attempts that never ran; after an early
    stop the correct attempt's EM and F1 carry to the attempts it skipped, as its answer stands),
    ``reflection_gain`` = EM at K minus EM at 1, ``invalid_turns``, ``search_failures``,
    ``truncated`` (1 when the response budget ended the meta-episode early), ``attempts_present``.
    """
    records = {record.index: record for record in state.attempts}
    metrics: dict[str, float] = {}
    carried = state.attempts[-1] if state.stopped_early and state.attempts else None
    for k in range(attempts):
        record = records.get(k)
        scored = record or carried
        metrics[f"em_at_{k + 1}"] = scored.em if scored else 0.0
        metrics[f"f1_at_{k + 1}"] = scored.f1 if scored else 0.0
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
