"""The agent loop's output: verl's ``AgentLoopOutput`` plus the per-attempt contract columns, and its training rows."""

from __future__ import annotations

from typing import Any

import torch
from verl.experimental.agent_loop.agent_loop import AgentLoopOutput

from mr_search import contract
from mr_search.agent.segments import ContextSegment
from mr_search.agent.state import EpisodeState
from mr_search.contract import GENERATION_TIMEOUTS, SEARCH_RECORD, SEGMENT, AttemptStatus

# The meta-episode's own records: kept on its last row, zeroed on the others (summed per step by the trainer).
_EPISODE_RECORDS = {
    SEARCH_RECORD: {"run": 0, "failed": 0, "last_error": None},
    GENERATION_TIMEOUTS: 0,
    "mr_search_attempts": [],
}


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
    """How each of the K attempts ended (``mr_search.contract.AttemptStatus``)."""
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
    """Per-trajectory scalars (``em_at_k``, ``f1_at_k``, ``searches_at_k``, ``reflection_gain``, counts)."""
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


def training_rows(
    output: MRSearchAgentLoopOutput, segments: list[ContextSegment]
) -> MRSearchAgentLoopOutput | list[MRSearchAgentLoopOutput]:
    """``output`` itself when every turn saw the whole context, else one training row per segment."""
    length = len(output.response_ids)
    kept = [segment for segment in segments if segment.first < length]
    if len(kept) <= 1 and all(segment.context_start == 0 for segment in kept):
        return output
    if not kept or kept[0].first != 0:
        kept.insert(0, ContextSegment(context_start=0, first=0))
    ends = [segment.first for segment in kept[1:]] + [length]
    rows = []
    for index, (segment, end) in enumerate(zip(kept, ends, strict=True)):
        last = index == len(kept) - 1
        extra = dict(output.extra_fields)
        if not last:
            extra.update({key: _fresh(value) for key, value in _EPISODE_RECORDS.items()})
        extra[SEGMENT] = {"index": index, "count": len(kept)}
        span = slice(segment.first, end)
        rows.append(
            type(output)(
                prompt_ids=output.prompt_ids + output.response_ids[segment.context_start : segment.first],
                response_ids=output.response_ids[span],
                response_mask=output.response_mask[span],
                response_logprobs=output.response_logprobs[span] if output.response_logprobs is not None else None,
                attempt_ids=output.attempt_ids[span],
                attempt_rewards=list(output.attempt_rewards),
                attempt_status=list(output.attempt_status),
                episode_id=output.episode_id,
                reward_score=output.reward_score,
                num_turns=output.num_turns,
                metrics=output.metrics,
                extra_fields=extra,
            )
        )
    return rows


def _fresh(value: object) -> object:
    return dict(value) if isinstance(value, dict) else list(value) if isinstance(value, list) else value
