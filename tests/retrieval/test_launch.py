"""The real service, started by retrieval_launch.sh on 127.0.0.1: contract, load, overload (429), shutdown, errors."""

from __future__ import annotations

import asyncio
import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import aiohttp
import pytest

pytestmark = pytest.mark.slow

QUESTION = "Where was Pekrul Zuk born?"
BENCH = Path(__file__).resolve().parents[2] / "retrieval" / "benchmarks" / "bench_retrieval_server.py"


def _bench_load(url: str, questions: str, clients: int, seconds: float) -> dict:
    """The load generator of bench_retrieval_server.py (its own process), as the benchmark runs it."""
    cmd = [sys.executable, str(BENCH), "--loadgen", f"{url}/retrieve", "--clients", str(clients), "--warmup", "0.5"]
    cmd += ["--duration", str(seconds), "--questions", questions]
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=120, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


@pytest.fixture(scope="module")
def server(launch, dense_index: Path):  # dense_index: the embedded default is built (and cached) before launching
    return launch()


async def _post(session: aiohttp.ClientSession, url: str, payload: dict) -> tuple[int, dict, dict]:
    async with session.post(f"{url}/retrieve", json=payload) as r:
        return r.status, await r.json(), dict(r.headers)


@pytest.mark.parametrize(
    ("payload", "k", "scores"),
    [
        ({"queries": [QUESTION]}, 3, False),
        ({"queries": [QUESTION], "topk": None, "return_scores": False}, 3, False),
        ({"queries": [QUESTION, "a painter"], "topk": 4, "return_scores": True}, 4, True),
    ],
)
async def test_contract_over_http(server, payload: dict, k: int, scores: bool) -> None:
    async with aiohttp.ClientSession() as s:
        status, body, _ = await _post(s, server.url, payload)
    assert status == 200
    assert len(body["result"]) == len(payload["queries"])
    for items in body["result"]:
        assert len(items) == k
        docs = [i["document"] for i in items] if scores else items
        assert all(isinstance(d["id"], str) and d["contents"] for d in docs)
        if scores:
            assert [i["score"] for i in items] == sorted((i["score"] for i in items), reverse=True)


async def test_bad_input_over_http_is_422_and_docs_metrics_respond(server) -> None:
    async with aiohttp.ClientSession() as s:
        status, body, _ = await _post(s, server.url, {"queries": [], "topk": 3})
        assert status == 422 and "queries is empty" in body["detail"]
        async with s.post(f"{server.url}/retrieve", data=b"{oops") as r:
            assert r.status == 422 and "not valid JSON" in (await r.json())["detail"]
        async with s.get(f"{server.url}/docs") as r:
            assert r.status == 200
        async with s.get(f"{server.url}/metrics") as r:
            assert "mr_search_retrieval_requests_total" in await r.text()
        async with s.get(f"{server.url}/health") as r:
            assert r.status == 200 and (await r.json())["ready"] is True


async def test_256_concurrent_clients_get_no_failures(server) -> None:
    """256 clients, each sending single-query requests back to back for a bounded time: every one answers 200."""
    statuses: list[int] = []
    stop_at = time.monotonic() + 6.0

    async def client(session: aiohttp.ClientSession, i: int) -> None:
        while time.monotonic() < stop_at:
            status, body, _ = await _post(session, server.url, {"queries": [f"{QUESTION} {i}"], "topk": 3})
            statuses.append(status)
            assert status != 200 or len(body["result"][0]) == 3

    connector = aiohttp.TCPConnector(limit=256)
    timeout = aiohttp.ClientTimeout(total=60)
    async with aiohttp.ClientSession(connector=connector, timeout=timeout) as s:
        await asyncio.gather(*(client(s, i) for i in range(256)))
    assert len(statuses) >= 256
    assert set(statuses) == {200}, f"non-200 answers: {[x for x in statuses if x != 200][:10]}"


def test_benchmark_load_generator_counts_answers_and_latencies(server, world) -> None:
    """bench_retrieval_server.py's minimal HTTP client reads every response of the real service."""
    result = _bench_load(server.url, world.test, clients=16, seconds=1.5)
    assert result["errors"] == {}
    assert result["requests"] > 16 and result["answered_total"] >= result["requests"]
    assert 0 < result["p50_s"] <= result["p99_s"] < 60
    assert re.search(r"\d+ batch lane\(s\)", server.log.read_text())  # the server said how it computes


async def test_tiny_queue_answers_429_with_retry_after_and_survives(launch, world) -> None:
    server = launch("--queue-size", "4", "--max-queries-per-request", "4", "--max-batch-size", "2")
    async with aiohttp.ClientSession() as s:
        results = await asyncio.gather(*(_post(s, server.url, {"queries": [f"q {i}"] * 4}) for i in range(24)))
        statuses = [r[0] for r in results]
        assert set(statuses) <= {200, 429}
        assert statuses.count(429) > 0 and statuses.count(200) > 0
        refused = next(r for r in results if r[0] == 429)
        assert int(refused[2]["Retry-After"]) >= 1 and "overloaded" in refused[1]["detail"]
        status, body, _ = await _post(s, server.url, {"queries": [QUESTION]})
        assert status == 200 and len(body["result"][0]) == 3
        async with s.get(f"{server.url}/metrics") as r:
            assert re.search(r'requests_total\{status="429"\} [1-9]', await r.text())
    # the benchmark's load generator counts refusals as errors, by status
    result = _bench_load(server.url, world.test, clients=32, seconds=1.0)
    assert result["errors"].get("429", 0) > 0 and set(result["errors"]) == {"429"}


async def test_bm25_through_the_launcher_and_graceful_stop(launch, bm25_index: Path, test_questions) -> None:
    server = launch(env={"RETRIEVER_TYPE": "bm25"})
    q = next(q for q in test_questions if q["hops"] == 1)
    async with aiohttp.ClientSession() as s:
        in_flight = [asyncio.ensure_future(_post(s, server.url, {"queries": [q["question"]] * 8})) for _ in range(16)]
        await asyncio.sleep(0.05)
        pid = int(re.search(r"Started server process \[(\d+)\]", server.log.read_text()).group(1))
        server.proc.terminate()  # SIGTERM to the script: its trap stops the server, which drains first
        done = await asyncio.gather(*in_flight, return_exceptions=True)
    answered = [d for d in done if not isinstance(d, BaseException)]
    assert answered and all(status == 200 for status, _, _ in answered)
    assert q["gold_doc_ids"][0] in [d["id"] for d in answered[0][1]["result"][0]]
    assert server.proc.wait(30) != 0  # stopped by a signal
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)  # the server the script started is gone too


def test_mismatched_index_fails_fast_naming_the_file(launch, bm25_index: Path) -> None:
    with pytest.raises(pytest.fail.Exception) as err:
        launch(env={"RETRIEVER_TYPE": "dense", "RETRIEVER_INDEX": str(bm25_index)}, timeout=120)
    message = str(err.value)
    assert "exited with 1" in message
    assert f"{bm25_index}/metadata.json describes a bm25 index" in message
