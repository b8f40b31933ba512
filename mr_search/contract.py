"""The per-attempt columns between the agent loop and the advantage: rewards per attempt, never on token positions."""

from __future__ import annotations

import enum
from typing import Final


class AttemptStatus(enum.IntEnum):
    """How an attempt of a meta-episode ended."""

    ABSENT = 0  # never ran, carries nothing (verl's padding rows; attempts beyond a row's K)
    COMPLETE = 1  # ended by its own rules: an answer, or its turns ran out
    TRUNCATED = 2  # the response budget ran out during it, or left no room to start it
    CARRIED = 3  # skipped by the early stop after a correct attempt, whose reward it carries


ATTEMPT_IDS: Final = "mr_attempt_ids"
ATTEMPT_REWARDS: Final = "mr_attempt_rewards"
ATTEMPT_STATUS: Final = "mr_attempt_status"
EPISODE_ID: Final = "mr_episode_id"
PAD_ATTEMPT_ID: Final = -1

# Keys in a trajectory's ``extra_fields``, not columns. The search record ``{"run", "failed", "last_error"}`` and the
# count of turns past ``generate_timeout_s``: the trainer stops a step with too many failures or any timeout.
SEARCH_RECORD: Final = "mr_search_searches"
GENERATION_TIMEOUTS: Final = "mr_search_generation_timeouts"
# ``{"index": i, "count": n}`` on each of a meta-episode's n rows; its records are read from its last row only.
SEGMENT: Final = "mr_search_segment"
# A dataset row's own K, played in place of ``mr_search.episode.attempts`` (validation at ``val_attempts``).
ROW_ATTEMPTS: Final = "mr_attempts"

COLUMNS: Final = (ATTEMPT_IDS, ATTEMPT_REWARDS, ATTEMPT_STATUS, EPISODE_ID)
