"""A rollout engine that never answers: the meta-episode ends within the time limit, truncated, and says so."""

from __future__ import annotations

import asyncio
import time
from types import SimpleNamespace
from typing import Any

from mr_search.contract import GENERATION_TIMEOUTS, AttemptStatus


class HungEngine:
    """Answers the first ``answered`` calls from a script, then never again (a stuck engine)."""

    def __init__(self, server: Any, answered: int) -> None:
        self.server, self.answered, self.calls = server, answered, 0

    async def generate(self, request_id: str, **kwargs: Any) -> Any:
        self.calls += 1
        if self.calls > self.answered:
            await asyncio.Event().wait()
        return await self.server.generate(request_id, **kwargs)


async def test_a_hung_engine_ends_the_episode_within_the_limit(kit: SimpleNamespace) -> None:
    loop, server, _ = kit.make_loop(["<answer>Paris</answer>"] * 3, {"generate_timeout_s": 0.2})
    loop.server_manager = HungEngine(server, answered=1)
    started = time.perf_counter()
    output = await loop.run(dict(kit.sampling), **kit.row())
    assert time.perf_counter() - started < 5
    assert output.extra_fields[GENERATION_TIMEOUTS] == 1
    assert output.attempt_status[0] == AttemptStatus.COMPLETE and output.attempt_rewards[0] == 1.0
    assert output.attempt_status[1] == AttemptStatus.TRUNCATED  # the hung turn's attempt could not complete
    kit.check(output, 4096)


async def test_an_answering_engine_records_no_timeout(kit: SimpleNamespace) -> None:
    loop, _, _ = kit.make_loop(["<answer>Paris</answer>"] * 3)
    output = await loop.run(dict(kit.sampling), **kit.row())
    assert output.extra_fields[GENERATION_TIMEOUTS] == 0
    assert loop.episode.generate_timeout_s == 600.0
