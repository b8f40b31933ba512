"""On-policy training rows of a meta-episode generated from cut contexts: one row per context the engine saw.

With ``mr_search.episode.context=previous_attempt`` or ``max_context_tokens`` the engine generates some turns from
the question plus only the newest part of the meta-episode. Scoring the whole meta-episode as one sequence would
give the trainer log-probs of a context the sampler never saw (an off-policy update). Instead, the turns are grouped
into segments, consecutive turns generated from the same cut (the same first response position kept after the
question); each segment becomes one training row whose prompt is exactly the ids the engine was given at the
segment's first turn and whose response runs from that turn to the next segment. Every later turn of a segment
saw the segment's prompt plus the response before it, so the trainer's log-probs are the sampler's.

The rows' responses, concatenated, are the meta-episode's response: each token is trained once, with its mask and
attempt id; every row carries the meta-episode's per-attempt rewards, statuses and id (``mr_search.contract``), so
each token gets its attempt's advantage and the group baseline counts the meta-episode once.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from mr_search.contract import GENERATION_TIMEOUTS, SEARCH_RECORD, SEGMENT

if TYPE_CHECKING:  # output.py imports the episode state, which holds the segments
    from mr_search.agent.output import MRSearchAgentLoopOutput

# The meta-episode's own records: kept on its last row, zeroed on the others (summed per step by the trainer).
_EPISODE_RECORDS = {
    SEARCH_RECORD: {"run": 0, "failed": 0, "last_error": None},
    GENERATION_TIMEOUTS: 0,
    "mr_search_attempts": [],
}


@dataclass(frozen=True)
class ContextSegment:
    """Consecutive model turns generated from one cut of the meta-episode.

    Attributes:
        context_start: response position from which the engine's context continues after the question
            (0: the whole meta-episode so far).
        first: response position of the segment's first sampled token.
    """

    context_start: int
    first: int


def note_turn(segments: list[ContextSegment], context_start: int, position: int) -> None:
    """Records a model turn that sampled tokens at ``position`` from a context cut at ``context_start``:
    it continues the current segment when the cut is the same, else opens a new one."""
    if not segments or segments[-1].context_start != context_start:
        segments.append(ContextSegment(context_start=context_start, first=position))


def training_rows(
    output: MRSearchAgentLoopOutput, segments: list[ContextSegment]
) -> MRSearchAgentLoopOutput | list[MRSearchAgentLoopOutput]:
    """The training rows of a meta-episode: ``output`` itself when every turn saw the whole context, else one row
    per segment (see the module docstring).

    Args:
        output: the whole meta-episode as one sequence (what evaluation reads).
        segments: the segments of its model turns, in order (``note_turn``); the first starts at position 0.

    Returns:
        ``output`` unchanged for one segment with the whole context; else the list of rows, in order.
    """
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
