"""The retrieval client against a real aiohttp server on 127.0.0.1 with injected faults."""

from __future__ import annotations

import asyncio
import socket
from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest
from aiohttp import web

from mr_search.agent.retrieval_client import RetrievalClient, RetrievalError, RetrieverConfig, shared_client

DOC = {"document": {"id": "7", "contents": '"Paris"\nParis is the capital of France.'}, "score": 0.9}
SLOW_S = 4.0  # the slow fault's delay


class FaultServer:
    """Answers /retrieve with the scripted behaviours in order, then with success."""

    def __init__(self) -> None:
        self.script: list[str] = []
        self.bodies: list[dict[str, Any]] = []
        self.url = ""

    async def handle(self, request: web.Request) -> web.StreamResponse:
        body = await request.json()
        self.bodies.append(body)
        action = self.script.pop(0) if self.script else "ok"
        if action == "500":
            return web.Response(status=500, text="boom")
        if action == "429":
            return web.Response(status=429, headers={"Retry-After": "0.01"}, text="busy")
        if action == "422":
            return web.Response(status=422, text="query too long")
        if action == "garbage":
            return web.Response(status=200, text="{not json", content_type="application/json")
        if action == "wrong_shape":
            return web.json_response({"result": "nope"})
        if action == "slow":
            await asyncio.sleep(SLOW_S)
        return web.json_response({"result": [[DOC] * body["topk"] for _ in body["queries"]]})


@pytest.fixture
async def server() -> AsyncIterator[FaultServer]:
    fault = FaultServer()
    app = web.Application()
    app.router.add_post("/retrieve", fault.handle)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]
    fault.url = f"http://127.0.0.1:{port}/retrieve"
    yield fault
    await runner.cleanup()


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _timeout(fault: str) -> dict[str, float]:
    """The slow fault's cases time out at a quarter of its delay; the others keep _client's."""
    return {"timeout_s": SLOW_S / 4} if fault == "slow" else {}


def _client(url: str, sleeps: list[float] | None = None, **overrides: Any) -> RetrievalClient:
    waits = sleeps if sleeps is not None else []

    async def fake_sleep(seconds: float) -> None:
        waits.append(seconds)

    # A reply the loaded CI box is slow to give must not count as a timeout: 10 s, but for the slow fault's cases.
    settings = {"url": url, "timeout_s": 10.0, "max_retries": 2, "backoff_s": 0.01, "backoff_max_s": 0.05}
    settings.update(overrides)
    return RetrievalClient(RetrieverConfig(**settings), sleep=fake_sleep)


async def test_success_sends_the_standard_request(server: FaultServer) -> None:
    client = _client(server.url)
    outcome = await client.search("capital of France", topk=3)
    await client.close()
    assert not outcome.failed
    assert outcome.documents == [DOC] * 3
    assert server.bodies == [{"queries": ["capital of France"], "topk": 3, "return_scores": True}]


@pytest.mark.parametrize("fault", ["500", "429", "garbage", "wrong_shape", "slow"])
async def test_transient_faults_are_retried(server: FaultServer, fault: str) -> None:
    server.script = [fault]
    sleeps: list[float] = []
    client = _client(server.url, sleeps, **_timeout(fault))
    outcome = await client.search("q", topk=2)
    await client.close()
    assert not outcome.failed, outcome.error
    assert len(outcome.documents) == 2
    assert client.retries == 1 and client.failures == 0
    assert len(sleeps) == 1 and 0 <= sleeps[0] <= 0.05


@pytest.mark.parametrize("fault", ["500", "429", "garbage", "slow"])
async def test_persistent_faults_give_a_failed_outcome_and_count(server: FaultServer, fault: str) -> None:
    server.script = [fault] * 3
    client = _client(server.url, **_timeout(fault))
    outcome = await client.search("q", topk=3)
    await client.close()
    assert outcome.failed and outcome.documents == []
    assert client.failures == 1 and client.retries == 2 and client.requests == 3


async def test_client_error_is_not_retried(server: FaultServer) -> None:
    server.script = ["422"]
    client = _client(server.url)
    outcome = await client.search("q" * 10, topk=3)
    await client.close()
    assert outcome.failed and "422" in (outcome.error or "")
    assert client.requests == 1 and client.retries == 0 and client.failures == 1


async def test_refused_connection_fails_without_raising() -> None:
    sleeps: list[float] = []
    client = _client(f"http://127.0.0.1:{_free_port()}/retrieve", sleeps)
    outcome = await client.search("q", topk=3)
    await client.close()
    assert outcome.failed
    assert client.failures == 1 and client.requests == 3
    assert sleeps[1] >= sleeps[0] * 0.5  # exponential backoff with jitter
    with pytest.raises(RetrievalError):
        await client.retrieve(["q"], 3)
    await client.close()


async def test_backoff_is_capped_and_retry_after_honoured() -> None:
    client = _client("http://127.0.0.1:1/retrieve", backoff_s=1.0, backoff_max_s=2.0)
    assert all(client._backoff(attempt, None) <= 2.0 for attempt in range(10))
    assert client._backoff(0, 0.3) == 0.3
    assert client._backoff(0, 100.0) == 2.0


async def test_connections_are_reused(server: FaultServer) -> None:
    client = _client(server.url)
    await asyncio.gather(*(client.search(f"q{i}", topk=1) for i in range(20)))
    session = client._session
    await client.search("again", topk=1)
    assert client._session is session
    await client.close()
    assert len(server.bodies) == 21


async def test_shared_client_is_one_per_loop_and_config() -> None:
    config = RetrieverConfig(url="http://127.0.0.1:1/retrieve")
    assert shared_client(config) is shared_client(config)
    assert shared_client(config) is not shared_client(RetrieverConfig(url="http://127.0.0.1:2/retrieve"))


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        ({"url": "localhost:8000"}, "http://"),
        ({"timeout_s": 0}, "timeout_s"),
        ({"max_retries": -1}, "max_retries"),
        ({"backoff_s": 2.0, "backoff_max_s": 1.0}, "backoff"),
    ],
)
def test_config_rejects_bad_values(settings: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        RetrieverConfig(**settings)


def test_config_from_mapping() -> None:
    make: Callable[[Any], RetrieverConfig] = RetrieverConfig.from_config
    assert make(None) == RetrieverConfig()
    assert make({"url": "http://h:1/retrieve"}).url == "http://h:1/retrieve"
    with pytest.raises(ValueError, match="valid keys"):
        make({"uri": "http://h"})
