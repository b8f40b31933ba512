"""The engine in its own process, as verl runs it: agent-loop workers send their engine calls over a Unix socket.

verl runs each rollout server (vLLM's or SGLang's front end) as a Ray actor and the agent loops in separate
``AgentLoopWorker`` processes that call it. ``serve_engine`` answers ``generate`` calls for the engine of this
process; ``RemoteEngine`` is the engine as a worker process sees it (the ``Engine`` protocol's ``generate``). Frames
are a 4-byte length and a pickle: ``(call_id, request_id, prompt_ids, sampling_params)`` one way, ``(call_id,
TokenOutput or None, error or None)`` the other; calls on one connection run concurrently.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import os
import pickle
import struct
from typing import Any

from engine_adapters import Engine
from verl.workers.rollout.replica import TokenOutput

logger = logging.getLogger(__name__)
_LENGTH = struct.Struct("!I")


async def read_frame(reader: asyncio.StreamReader) -> Any:
    (size,) = _LENGTH.unpack(await reader.readexactly(_LENGTH.size))
    return pickle.loads(await reader.readexactly(size))


def write_frame(writer: asyncio.StreamWriter, message: Any) -> None:
    data = pickle.dumps(message, protocol=pickle.HIGHEST_PROTOCOL)
    writer.write(_LENGTH.pack(len(data)) + data)


class EngineHost:
    """Serves ``engine.generate`` on a Unix socket at ``path``; ``peers`` holds the pid each connection said."""

    def __init__(self, engine: Engine, path: str) -> None:
        self.engine = engine
        self.path = path
        self.peers: list[int] = []
        self._server: asyncio.Server | None = None
        self._connections: set[asyncio.Task[Any]] = set()

    async def start(self) -> None:
        self._server = await asyncio.start_unix_server(self._serve, path=self.path)

    async def close(self) -> None:
        if self._server is not None:
            self._server.close()
            if self._connections:  # connections end when their workers close them; past that, cut them
                _, open_ = await asyncio.wait(self._connections, timeout=5)
                for task in open_:
                    task.cancel()
            await self._server.wait_closed()
        if os.path.exists(self.path):
            os.unlink(self.path)

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        tasks: set[asyncio.Task[None]] = set()
        this = asyncio.current_task()
        if this is not None:
            self._connections.add(this)
            this.add_done_callback(self._connections.discard)

        async def answer(call_id: int, request_id: str, prompt_ids: list[int], params: dict[str, Any]) -> None:
            try:
                output = await self.engine.generate(request_id, prompt_ids=prompt_ids, sampling_params=params)
                write_frame(writer, (call_id, output, None))
            except Exception as error:  # the worker raises it in the call that made it
                write_frame(writer, (call_id, None, f"{type(error).__name__}: {error}"))

        try:
            self.peers.append(await read_frame(reader))  # the worker's hello: its pid
            while True:
                call = await read_frame(reader)
                task = asyncio.create_task(answer(*call))
                tasks.add(task)
                task.add_done_callback(tasks.discard)
        except asyncio.IncompleteReadError:
            pass  # the worker closed its end
        finally:
            for task in tasks:
                task.cancel()
            writer.close()


class RemoteEngine:
    """``generate`` through an ``EngineHost``'s socket (in an agent-loop worker process)."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self._reader, self._writer = reader, writer
        self._pending: dict[int, asyncio.Future[TokenOutput]] = {}
        self._ids = itertools.count()
        self._listener = asyncio.create_task(self._listen())

    @classmethod
    async def connect(cls, path: str) -> RemoteEngine:
        reader, writer = await asyncio.open_unix_connection(path)
        write_frame(writer, os.getpid())
        return cls(reader, writer)

    async def generate(self, request_id: str, *, prompt_ids: list[int], sampling_params: dict[str, Any]) -> TokenOutput:
        call_id = next(self._ids)
        future: asyncio.Future[TokenOutput] = asyncio.get_running_loop().create_future()
        self._pending[call_id] = future
        write_frame(self._writer, (call_id, request_id, list(prompt_ids), dict(sampling_params)))
        return await future

    async def _listen(self) -> None:
        try:
            while True:
                call_id, output, error = await read_frame(self._reader)
                future = self._pending.pop(call_id)
                if error is None:
                    future.set_result(output)
                else:
                    future.set_exception(RuntimeError(f"engine process: {error}"))
        except asyncio.IncompleteReadError:
            for future in self._pending.values():
                future.set_exception(RuntimeError("the engine process closed the connection"))
            self._pending.clear()

    async def close(self) -> None:
        self._writer.close()
        self._listener.cancel()
