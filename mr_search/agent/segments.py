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
