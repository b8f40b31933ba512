"""The state of one meta-episode: the phases of the state machine and what each attempt did."""

from __future__ import annotations

import enum
from dataclasses import dataclass, field

from mr_search.agent.parsing import TurnAction
from mr_search.agent.segments import ContextSegment
from mr_search.agent.tokens import Transcript
from mr_search.agent.trace import EpisodeTrace


class Phase(enum.Enum):
    GENERATING = "generating"  # one model turn
    ACTING = "acting"  # carry out the turn's search / answer / invalid action
    ATTEMPT_END = "attempt_end"  # score the attempt, decide whether another follows
    REFLECTING = "reflecting"  # append the between-attempts user turn
    DONE = "done"


@dataclass
class AttemptRecord:
    """One attempt (inner episode)."""

    index: int
    start: int  # response position of its first token
    turns: int = 0
    searches: int = 0
    search_failures: int = 0
    invalid_turns: int = 0
    queries: list[str] = field(default_factory=list)
    answer: str | None = None
    reward: float = 0.0
    em: float = 0.0
    f1: float = 0.0
    truncated: bool = False  # the response budget ended it before it could complete


@dataclass
class EpisodeState:
    """Everything one meta-episode accumulates; the loop's handlers read and update it."""

    transcript: Transcript
    golds: list[str]
    request_id: str
    k: int  # the attempts this meta-episode plays: mr_search.episode.attempts, or its row's own (contract.ROW_ATTEMPTS)
    question: str | None = None  # the prompt's question, kept when the reflection turn restates it
    attempts: list[AttemptRecord] = field(default_factory=list)
    segments: list[ContextSegment] = field(default_factory=list)  # the contexts the turns saw (agent/segments.py)
    action: TurnAction | None = None
    last_turn_ended_with_eos: bool = False
    truncated: bool = False
    stopped_early: bool = False  # mr_search.episode.early_stop_when_correct ended it after a correct attempt
    searches_run: int = 0
    last_search_error: str | None = None
    generation_timeouts: int = 0
    model_turns: int = 0
    env_turns: int = 0
    min_global_steps: int | None = None
    max_global_steps: int | None = None
    trace: EpisodeTrace | None = None  # set when MR_SEARCH_TRACE_DIR is (mr_search/agent/trace.py)

    @property
    def current(self) -> AttemptRecord:
        return self.attempts[-1]
