"""--http-workers N: one search-worker process behind N HTTP fronts on one port: contract, load, merge, errors, stop."""

from __future__ import annotations

import asyncio
import multiprocessing as mp
import os
import re
import threading
import time
from pathlib import Path

import aiohttp
import numpy as np
import pytest

from mr_search_retrieval.config import ServerConfig
from mr_search_retrieval.search_worker import SearchWorkerError
from mr_search_retrieval.stream_worker import StreamRemoteSearcher, serve_stream

QUESTION = "Where was Pekrul Zuk born?"


class CountingSearcher:
    """Row id = the number in the query; records the merged batches it was given."""

    num_docs = 1000

    def __init__(self) -> None:
        self.batches: list[list[str]] = []

    def search(self, queries: list[str], k: int) -> tuple[np.ndarray, np.ndarray]:
        self.batches.append(list(queries))
        if "boom" in queries:
            raise RuntimeError("cannot search 'boom'")
        ids = np.array([[int(q.split()[-1]) + j for j in range(k)] for q in queries], dtype=np.int64)
        return -ids.astype(np.float32), ids


def test_search_worker_merges_batches_of_all_fronts_and_reports_errors() -> None:
    searcher = CountingSearcher()
    pipes = [mp.Pipe(duplex=True) for _ in range(3)]
    for _, front in pipes:  # all three fronts have a batch waiting before the worker looks: (request id, k, queries)
        front.send((0, 2, ["q 0", "q 1"]))
    worker = threading.Thread(target=serve_stream, args=(searcher, [w for w, _ in pipes], 0.2))
    worker.start()
    first = [front.recv() for _, front in pipes]
    assert len(searcher.batches) == 1 and len(searcher.batches[0]) == 6  # one encode+search for three fronts
    assert all(ok for _, ok, _ in first)
    assert [ids[:, 0].tolist() for _, _, (_, ids) in first] == [[0, 1]] * 3
    remotes = [StreamRemoteSearcher(front, 1000) for _, front in pipes]
    scores, ids = remotes[1].search(["q 7", "q 40"], 3)
    assert ids.tolist() == [[7, 8, 9], [40, 41, 42]] and scores.shape == (2, 3)
    with pytest.raises(SearchWorkerError, match="cannot search 'boom'"):
        remotes[0].search(["boom"], 1)
    assert remotes[2].search(["q 5"], 1)[1].tolist() == [[5]]  # the worker survived the bad batch
    for remote in remotes:
        remote.close()
    worker.join(10)
    assert not worker.is_alive(), "the worker stops once every front has closed its connection"


def test_http_workers_must_not_be_negative(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="http_workers must be >= 0"):
        ServerConfig(index_dir=str(tmp_path), corpus=str(tmp_path / "c.jsonl"), http_workers=-1)


@pytest.fixture(scope="module")
def multi(launch, dense_index: Path):
    return launch(env={"RETRIEVER_HTTP_WORKERS": "2"})


async def _post(session: aiohttp.ClientSession, url: str, payload: dict) -> tuple[int, dict]:
    async with session.post(f"{url}/retrieve", json=payload) as r:
        return r.status, await r.json()


@pytest.mark.slow
async def test_multi_process_service_answers_the_contract(multi) -> None:
    async with aiohttp.ClientSession() as s:
        status, body = await _post(s, multi.url, {"queries": [QUESTION, "a painter"], "topk": 4, "return_scores": True})
        assert status == 200 and [len(items) for items in body["result"]] == [4, 4]
        scores = [i["score"] for i in body["result"][0]]
        assert scores == sorted(scores, reverse=True)
        assert "Pekrul Zuk" in " ".join(i["document"]["contents"] for i in body["result"][0])
        status, body = await _post(s, multi.url, {"queries": [QUESTION], "topk": None, "return_scores": False})
        assert status == 200 and len(body["result"][0]) == 3 and all("contents" in d for d in body["result"][0])
        status, body = await _post(s, multi.url, {"queries": [], "topk": 3})
        assert status == 422 and "queries is empty" in body["detail"]
        async with s.get(f"{multi.url}/health") as r:
            assert r.status == 200 and (await r.json())["ready"] is True
        async with s.get(f"{multi.url}/metrics") as r:
            assert "mr_search_retrieval_requests_total" in await r.text()
    log = multi.log.read_text()
    assert "search worker + 2 HTTP front processes" in log
    assert "[front 0]" in log and "[front 1]" in log


@pytest.mark.slow
async def test_multi_process_service_under_concurrent_load_has_no_failures(multi) -> None:
    statuses: list[int] = []
    stop_at = time.monotonic() + 5.0

    async def client(session: aiohttp.ClientSession, i: int) -> None:
        while time.monotonic() < stop_at:
            status, body = await _post(session, multi.url, {"queries": [f"{QUESTION} {i}"], "topk": 3})
            statuses.append(status)
            assert status != 200 or len(body["result"][0]) == 3

    # force_close: a new connection per request, so the kernel spreads them over both fronts
    connector = aiohttp.TCPConnector(limit=128, force_close=True)
    async with aiohttp.ClientSession(connector=connector, timeout=aiohttp.ClientTimeout(total=60)) as s:
        await asyncio.gather(*(client(s, i) for i in range(128)))
    assert len(statuses) >= 128
    assert set(statuses) == {200}, f"non-200 answers: {[x for x in statuses if x != 200][:10]}"
    # /metrics counts the whole service whichever front answers: the others' counters are published each second, so
    # once the load is over six reads in a row agree (polled: a front the loaded box runs late publishes late).
    totals: list[int] = []
    deadline = time.monotonic() + 30
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(force_close=True)) as s:
        while time.monotonic() < deadline and not (len(totals) >= 6 and len(set(totals[-6:])) == 1):
            async with s.get(f"{multi.url}/metrics") as r:
                text = await r.text()
            totals.append(
                int(re.search(r'^mr_search_retrieval_requests_total\{status="200"\} (\d+)$', text, re.M).group(1))
            )
            await asyncio.sleep(0.2)
    assert len(set(totals[-6:])) == 1 and totals[-1] >= len(statuses), totals  # one front answered about half


@pytest.mark.slow
async def test_multi_process_service_stops_gracefully_and_leaves_no_process(multi) -> None:
    pid = int(re.search(r"Started server process \[(\d+)\]", multi.log.read_text()).group(1))  # a front
    async with aiohttp.ClientSession() as s:
        in_flight = [asyncio.ensure_future(_post(s, multi.url, {"queries": [QUESTION] * 8})) for _ in range(16)]
        await asyncio.sleep(0.05)
        multi.proc.terminate()
        done = await asyncio.gather(*in_flight, return_exceptions=True)
    answered = [d for d in done if not isinstance(d, BaseException)]
    assert answered and all(status == 200 for status, _ in answered)
    multi.proc.wait(60)
    log = multi.log.read_text()
    assert "search worker stopped after" in log  # the worker outlived the fronts' drain, then exited
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)


@pytest.mark.slow
def test_multi_process_startup_error_names_the_file(launch, bm25_index: Path) -> None:
    with pytest.raises(pytest.fail.Exception) as err:
        env = {"RETRIEVER_TYPE": "dense", "RETRIEVER_INDEX": str(bm25_index), "RETRIEVER_HTTP_WORKERS": "2"}
        launch(env=env, timeout=120)
    assert f"{bm25_index}/metadata.json describes a bm25 index" in str(err.value)
