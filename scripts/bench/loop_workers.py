"""Agent loops in worker processes, the engine in this one: the benchmark's phases laid out as verl runs them.

verl plays meta-episodes in ``AgentLoopWorker`` processes (``actor_rollout_ref.rollout.agent.num_workers``, 8 by
default) that call the rollout server, a process of its own. ``WorkerPool`` starts that many spawned workers, each
with its own tokenizer, retrieval client and event loop, sends each a share of the rows (``rows[i::workers]``) and
combines their phases (``engine_phases.combine``); every engine call, the replays' too, goes through the engine's
socket (``engine_host``), so the loop and its replays pay the same hop between processes.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import dataclasses
import logging
import multiprocessing as mp
import os
import tempfile
import traceback
from collections.abc import Mapping, Sequence
from multiprocessing.connection import Connection
from typing import Any

from engine_adapters import Engine
from engine_host import EngineHost, RemoteEngine
from engine_phases import InProcessRunner, Phase, combine


@dataclasses.dataclass(frozen=True)
class LoopSpec:
    """What a worker needs to build the agent loop: the model folder (its tokenizer), the retrieval URL, the
    evaluation settings (``mr_search.eval.runner.EvalConfig``)."""

    model: str
    retriever_url: str
    config: Any


def _worker(conn: Connection, socket_path: str, spec: LoopSpec) -> None:
    logging.basicConfig(level=logging.ERROR)
    logging.getLogger("verl.utils.tokenizer.continuous_token_wiring").setLevel(logging.ERROR)
    asyncio.run(_serve_commands(conn, socket_path, spec))


async def _serve_commands(conn: Connection, socket_path: str, spec: LoopSpec) -> None:
    from transformers import AutoTokenizer

    from mr_search.agent.retrieval_client import RetrievalClient, RetrieverConfig
    from mr_search.eval.runner import InlineExecutor, agent_loop_factory

    loop = asyncio.get_running_loop()
    loop.set_default_executor(InlineExecutor())  # one thread for the tokenizer (runner.py)
    receiver = concurrent.futures.ThreadPoolExecutor(1)
    engine = await RemoteEngine.connect(socket_path)
    retriever = RetrievalClient(RetrieverConfig(url=spec.retriever_url))
    try:
        tokenizer = AutoTokenizer.from_pretrained(spec.model)
        runner = InProcessRunner(engine, lambda server: agent_loop_factory(tokenizer, server, retriever, spec.config))
        conn.send(("ready", os.getpid()))
        while True:
            kind, options = await loop.run_in_executor(receiver, conn.recv)
            if kind == "stop":
                return
            try:
                if kind == "loop":
                    conn.send(("phase", await runner.loop(**options), runner.pause_sums()))
                else:
                    conn.send(("phase", await runner.raw(**options), []))
            except Exception:
                conn.send(("error", traceback.format_exc()))
    except Exception:
        conn.send(("error", traceback.format_exc()))
    finally:
        await retriever.close()
        await engine.close()
        receiver.shutdown(wait=False)


class WorkerPool:
    """``workers`` agent-loop processes on the engine of this process; the runner interface of ``InProcessRunner``
    (``loop``, ``raw``, ``pause_sums``) after ``await start()``; ``await close()`` stops them."""

    def __init__(self, engine: Engine, spec: LoopSpec, workers: int) -> None:
        if workers < 1:
            raise ValueError(f"workers={workers}: a pool needs at least one worker process")
        self.engine, self.spec, self.workers = engine, spec, workers
        self._dir = tempfile.mkdtemp(prefix="mr-search-engine-")
        self.host = EngineHost(engine, os.path.join(self._dir, "engine.sock"))
        self._conns: list[Connection] = []
        self._processes: list[Any] = []
        self._receivers = concurrent.futures.ThreadPoolExecutor(workers)
        self._pauses: list[float] = []
        self.pids: list[int] = []

    async def start(self) -> None:
        await self.host.start()
        context = mp.get_context("spawn")  # the engine's process holds CUDA and threads: never fork it
        for _ in range(self.workers):
            parent, child = context.Pipe()
            process = context.Process(target=_worker, args=(child, self.host.path, self.spec), daemon=True)
            process.start()
            child.close()  # the worker's end lives in the worker: its exit is then an EOF here, not a hang
            self._conns.append(parent)
            self._processes.append(process)
        self.pids = [pid for (pid,) in await asyncio.gather(*(self._receive(c) for c in self._conns))]

    async def _receive(self, conn: Connection) -> tuple[Any, ...]:
        try:
            message = await asyncio.get_running_loop().run_in_executor(self._receivers, conn.recv)
        except EOFError:
            raise self._gone() from None
        if message[0] == "error":
            raise RuntimeError(f"an agent-loop worker failed:\n{message[1]}")
        return message[1:]

    async def _each(self, commands: Sequence[tuple[str, Mapping[str, Any]]]) -> list[tuple[Any, ...]]:
        for conn, command in zip(self._conns, commands, strict=True):
            try:
                conn.send(command)
            except (BrokenPipeError, ConnectionResetError):
                raise self._gone() from None
        return await asyncio.gather(*(self._receive(c) for c in self._conns))

    def _gone(self) -> RuntimeError:
        codes = [process.exitcode for process in self._processes]
        return RuntimeError(f"an agent-loop worker exited without answering (exit codes {codes}); its log is above")

    async def loop(self, rows: Sequence[Mapping[str, Any]], n: int, *, strings_only: bool = False) -> Phase:
        shares = [list(rows[i :: self.workers]) for i in range(self.workers)]
        results = await self._each([("loop", {"rows": s, "n": n, "strings_only": strings_only}) for s in shares])
        if not strings_only:
            self._pauses = [p for _, pauses in results for p in pauses]
        return combine([phase for phase, _ in results])

    async def raw(self, *, pauses: bool = False, stops: bool = False) -> Phase:
        results = await self._each([("raw", {"pauses": pauses, "stops": stops})] * self.workers)
        return combine([phase for phase, _ in results])

    def pause_sums(self) -> list[float]:
        return list(self._pauses)

    async def close(self) -> None:
        for conn in self._conns:
            with contextlib.suppress(BrokenPipeError, OSError):  # that worker is gone already
                conn.send(("stop", {}))
        loop = asyncio.get_running_loop()
        for process in self._processes:  # joined off the event loop: the host still reads the workers' goodbyes
            await loop.run_in_executor(self._receivers, process.join, 30)
            if process.is_alive():
                process.kill()
        self._receivers.shutdown(wait=False)
        await self.host.close()
        os.rmdir(self._dir)
