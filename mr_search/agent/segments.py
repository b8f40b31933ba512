"""On-policy training rows of a meta-episode generated from cut contexts: one row per context the engine saw.

Scoring it as one sequence would be off-policy; each row's prompt is what the engine saw.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class ContextSegment:
    """Turns from one cut: ``context_start`` (0: whole context) and ``first``, its first sampled position."""

    context_start: int
    first: int


def note_turn(segments: list[ContextSegment], context_start: int, position: int) -> None:
    """Records a model turn sampled at ``position`` from a context cut at ``context_start``: same cut, same segment."""
    if not segments or segments[-1].context_start != context_start:
        segments.append(ContextSegment(context_start=context_start, first=position))
