"""The per-attempt data contract between the meta-episode rollout and the attempt-level advantage.

The agent loop (``mr_search.agent``) writes these columns into every trajectory's output
(``AgentLoopOutput.as_dict()``); verl's V1 trainer stores them in TransferQueue unchanged, and the
trainer subclass (``mr_search.trainer``) fetches them for the advantage estimator
(``mr_search.advantage``). Names carry an ``mr_`` prefix so that no dataset column collides.

For one trajectory (row) with ``L`` response tokens and ``K`` configured attempts:

* ``ATTEMPT_IDS`` -- int64 ``[L]``: the attempt (0-based) each response token belongs to. Model
  tokens and environment tokens (passages, corrective and reflection turns) of attempt ``s`` all
  carry ``s``; the loss mask decides which are trained. The reflection the model writes at the
  start of attempt ``s`` belongs to attempt ``s``. After padding, positions past the row's length
  hold ``PAD_ATTEMPT_ID`` (-1), never 0.
* ``ATTEMPT_REWARDS`` -- float32 ``[K]``: the reward of each attempt (0.0 where absent).
* ``ATTEMPT_STATUS`` -- int64 ``[K]``: how each attempt ended, an ``AttemptStatus`` code. The advantage
  decides from it which attempts count (``mr_search.advantage.credited_attempts``).

* ``EPISODE_ID`` -- int64 ``[1]``: the meta-episode the row belongs to (unique within its uid group). When the
  sampler generated from a cut context (``mr_search.episode.context=previous_attempt``, ``max_context_tokens``),
  one meta-episode becomes several training rows, one per context the engine saw (``mr_search.agent.segments``);
  they carry the same id and the same ``ATTEMPT_REWARDS`` / ``ATTEMPT_STATUS``, and the advantage counts the
  meta-episode once in its group's baseline. Absent, each row is a meta-episode of its own.

The advantage never reads rewards from token positions, so a zero reward is never confused with "no reward".
"""

from __future__ import annotations

import enum
from typing import Final


class AttemptStatus(enum.IntEnum):
    """How an attempt of a meta-episode ended."""

    ABSENT = 0
    """It never ran and carries nothing (verl's padding rows; attempts beyond a row's K)."""
    COMPLETE = 1
    """It ended by its own rules: an answer, or its turns ran out."""
    TRUNCATED = 2
    """It could not complete: the response budget ran out during it, or left no room to start it."""
    CARRIED = 3
    """It was skipped by the early stop after a correct attempt, whose reward it carries."""


ATTEMPT_IDS: Final = "mr_attempt_ids"
ATTEMPT_REWARDS: Final = "mr_attempt_rewards"
ATTEMPT_STATUS: Final = "mr_attempt_status"
EPISODE_ID: Final = "mr_episode_id"
PAD_ATTEMPT_ID: Final = -1

# Not a column: the key of each trajectory's search record in its ``extra_fields``,
# ``{"run": searches sent, "failed": of them failed after retries, "last_error": str | None}``; the trainer stops
# a run whose step fails too many (``mr_search.trainer.search_health``).
SEARCH_RECORD: Final = "mr_search_searches"
# Not a column: the key of the number of model turns that waited longer than ``generate_timeout_s`` for the engine
# (the meta-episode then ended, truncated); the trainer stops a run whose step has any (``mr_search.trainer``).
GENERATION_TIMEOUTS: Final = "mr_search_generation_timeouts"

# Not a column: the key of ``{"index": i, "count": n}`` in the ``extra_fields`` of each of the n training rows of
# a meta-episode; the episode's own records (``SEARCH_RECORD``, ``GENERATION_TIMEOUTS``, ``reward_extra_info``) are
# read from its last row only (``mr_search.trainer.metrics.trajectory_fields``).
SEGMENT: Final = "mr_search_segment"

# Not a column: a dataset row's own K, an int the agent loop plays in place of ``mr_search.episode.attempts``. The
# trainer puts it on every validation row when ``mr_search.episode.val_attempts`` asks for another K there.
ROW_ATTEMPTS: Final = "mr_attempts"

COLUMNS: Final = (ATTEMPT_IDS, ATTEMPT_REWARDS, ATTEMPT_STATUS, EPISODE_ID)
