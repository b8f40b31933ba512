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
* ``ATTEMPT_PRESENT`` -- int64 ``[K]``: 1 where the attempt started (has at least one response
  token after truncation to the response budget), 0 where the meta-episode ended before it.

These three are the whole contract: the advantage never reads rewards from token positions, so a
zero reward is never confused with "no reward".
"""

from __future__ import annotations

from typing import Final

ATTEMPT_IDS: Final = "mr_attempt_ids"
ATTEMPT_REWARDS: Final = "mr_attempt_rewards"
ATTEMPT_PRESENT: Final = "mr_attempt_present"
PAD_ATTEMPT_ID: Final = -1

COLUMNS: Final = (ATTEMPT_IDS, ATTEMPT_REWARDS, ATTEMPT_PRESENT)
