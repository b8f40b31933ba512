"""The engine benchmark's phases: the agent loop on the engine (recording its calls) and the engine replaying them.

Used by ``bench_engine_loop.py`` in its own process (``--loop-workers 0``) and by ``loop_workers.py`` in each
agent-loop worker process. A phase's ``started`` is ``time.perf_counter()``, the system-wide monotonic clock on
Linux, so phases run in several processes at once combine into one (``combine``).
"""

from __future__ import annotations

import asyncio
import dataclasses
import statistics
import time
from collections.abc import Mapping, Sequence
from typing import Any

from engine_adapters import Engine
from verl.workers.rollout.replica import TokenOutput

from mr_search.agent.parsing import STOP_STRINGS
from mr_search.contract import SEARCH_RECORD

SAMPLING = {"temperature": 1.0, "top_p": 1.0, "logprobs": True}  # the trainer's rollout sampling


@dataclasses.dataclass
class Call:
    prompt_ids: list[int]
    sampled: int
    pause_s: float  # seconds from the meta-episode's previous engine answer (or its start) to this call


class RecordingServer:
    """The server manager the loop sees: forwards to the engine and records each call per meta-episode."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine
        self.calls: dict[str, list[Call]] = {}
        self.started = time.perf_counter()
        self._answered: dict[str, float] = {}  # request id -> when its last engine answer came back
        self.strings_only = False  # phase 4: the tags as stop strings instead of stop token ids

    def clear(self) -> None:
        self.calls.clear()
        self._answered.clear()
        self.started = time.perf_counter()

    async def generate(self, request_id: str, *, prompt_ids: list[int], sampling_params: dict[str, Any], **_: Any):
        pause = time.perf_counter() - self._answered.get(request_id, self.started)
        if self.strings_only:  # what the loop sends with mr_search.episode.stop_token_ids=false
            sampling_params = {k: v for k, v in sampling_params.items() if k != "stop_token_ids"}
            sampling_params.update(stop=list(STOP_STRINGS), include_stop_str_in_output=True)
        output: TokenOutput = await self.engine.generate(
            request_id, prompt_ids=prompt_ids, sampling_params=sampling_params
        )
        self._answered[request_id] = time.perf_counter()
        self.calls.setdefault(request_id, []).append(Call(list(prompt_ids), len(output.token_ids), pause))
        return output


@dataclasses.dataclass
class Phase:
    seconds: float
    tokens: int
    calls: int
    generate_s: float = 0.0  # loop only: mean seconds a meta-episode waited for the engine
    tools_s: float = 0.0  # loop only: mean seconds a meta-episode spent on searches, parsing and env tokens
    searches: int = 0  # loop only: searches the meta-episodes ran
    service_s: float = 0.0  # loop only, with the service's /metrics: mean latency of a request as the service saw it
    started: float = 0.0  # time.perf_counter() at the phase's start
    episodes: int = 0  # meta-episodes played or replayed

    @property
    def tokens_per_s(self) -> float:
        return self.tokens / self.seconds


def combine(phases: Sequence[Phase]) -> Phase:
    """One phase run as shares in several processes at once: from the first start to the last end, sums of the
    work, per-meta-episode means weighted by each share's meta-episodes."""
    shares = [p for p in phases if p.episodes]
    if not shares:
        raise ValueError("no share of the phase played a meta-episode")
    start = min(p.started for p in shares)
    episodes = sum(p.episodes for p in shares)
    return Phase(
        seconds=max(p.started + p.seconds for p in shares) - start,
        tokens=sum(p.tokens for p in shares),
        calls=sum(p.calls for p in shares),
        generate_s=sum(p.generate_s * p.episodes for p in shares) / episodes,
        tools_s=sum(p.tools_s * p.episodes for p in shares) / episodes,
        searches=sum(p.searches for p in shares),
        started=start,
        episodes=episodes,
    )


async def loop_phase(
    make_loop: Any, rows: Sequence[Mapping[str, Any]], n: int, server: RecordingServer, *, strings_only: bool = False
) -> Phase:
    """``rows`` x ``n`` meta-episodes through the agent loop at once; ``server`` records every engine call."""
    from mr_search.eval.runner import loop_inputs

    server.clear()
    server.strings_only = strings_only

    async def one(row: Mapping[str, Any]) -> Any:
        # play(): the whole meta-episode as one sequence, whatever contexts its turns saw
        return await make_loop().play(dict(SAMPLING), **loop_inputs(row))

    started = time.perf_counter()
    outputs = await asyncio.gather(*(one(row) for row in rows for _ in range(n)))
    seconds = time.perf_counter() - started
    calls = [c for chain in server.calls.values() for c in chain]
    timing = [o.metrics for o in outputs]
    return Phase(
        seconds,
        sum(c.sampled for c in calls),
        len(calls),
        statistics.fmean(t.generate_sequences for t in timing),
        statistics.fmean(t.tool_calls for t in timing),
        sum(int(o.extra_fields[SEARCH_RECORD]["run"]) for o in outputs),
        started=started,
        episodes=len(outputs),
    )


def replay_params(sampled: int, *, stops: bool) -> dict[str, Any]:
    """Sampling parameters that make the engine sample exactly ``sampled`` tokens; ``stops``: with the loop's stop
    strings, held off until then by ``min_tokens`` (vLLM checks stop strings only past it)."""
    params = {**SAMPLING, "max_tokens": sampled, "ignore_eos": True}
    if stops:
        params.update(stop=list(STOP_STRINGS), include_stop_str_in_output=True, min_tokens=sampled)
    return params


async def raw_phase(
    engine: Engine, chains: Mapping[str, Sequence[Call]], *, pauses: bool = False, stops: bool = False
) -> Phase:
    """Replays each meta-episode's calls in order (same prompts, same lengths), all meta-episodes at once;
    ``pauses``: each call first waits as long as the loop did before it; ``stops``: see ``replay_params``."""
    sampled = 0
    tag = "paused" if pauses else "stops" if stops else "raw"

    async def chain(key: str, calls: Sequence[Call]) -> None:
        nonlocal sampled
        for i, call in enumerate(calls):
            if pauses:
                await asyncio.sleep(call.pause_s)
            if call.sampled == 0:
                continue
            params = replay_params(call.sampled, stops=stops)
            request = f"{tag}-{key}-{i}"
            output = await engine.generate(request, prompt_ids=call.prompt_ids, sampling_params=params)
            sampled += len(output.token_ids)

    started = time.perf_counter()
    await asyncio.gather(*(chain(key, calls) for key, calls in chains.items()))
    seconds = time.perf_counter() - started
    return Phase(seconds, sampled, sum(len(c) for c in chains.values()), started=started, episodes=len(chains))


def pause_sums(chains: Mapping[str, Sequence[Call]]) -> list[float]:
    """Seconds each meta-episode spent between its engine calls."""
    return [sum(c.pause_s for c in calls) for calls in chains.values()]


class InProcessRunner:
    """The agent loop in the engine's own process (one event loop, one GIL, shared with the engine's front end)."""

    workers = 1

    def __init__(self, engine: Engine, make_loop_for: Any) -> None:
        """``make_loop_for(server)`` builds a fresh agent loop on ``server`` (verl builds one per trajectory)."""
        self.engine = engine
        self.server = RecordingServer(engine)
        self.make_loop = make_loop_for(self.server)
        self.chains: dict[str, list[Call]] = {}

    async def loop(self, rows: Sequence[Mapping[str, Any]], n: int, *, strings_only: bool = False) -> Phase:
        if not rows:  # a worker with no share this time: nothing of its own to replay either
            if not strings_only:
                self.chains = {}
            return Phase(0.0, 0, 0)
        phase = await loop_phase(self.make_loop, rows, n, self.server, strings_only=strings_only)
        if not strings_only:  # the replays replay the default loop's calls
            self.chains = {key: list(calls) for key, calls in self.server.calls.items()}
        return phase

    async def raw(self, *, pauses: bool = False, stops: bool = False) -> Phase:
        return await raw_phase(self.engine, self.chains, pauses=pauses, stops=stops)

    def pause_sums(self) -> list[float]:
        return pause_sums(self.chains)

    async def close(self) -> None:
        return None
