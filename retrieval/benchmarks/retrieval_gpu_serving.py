"""Serve a searcher through the service's real `create_app` + uvicorn (in a thread); load it from client processes."""

from __future__ import annotations

import asyncio
import json
import logging
import resource
import socket
import subprocess
import sys
import threading
import time
import urllib.request
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
from fastapi import FastAPI, Request, Response

from mr_search_retrieval.app import create_app
from mr_search_retrieval.config import BatcherConfig, ServerConfig
from mr_search_retrieval.corpus import CorpusStore

logger = logging.getLogger(__name__)

LOADGEN = Path(__file__).resolve().parent / "retrieval_loadgen.py"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def post_retrieve(url: str, payload: dict) -> dict:
    """POST `payload` to the service's /retrieve at `url`; the decoded JSON answer."""
    req = urllib.request.Request(
        f"{url}/retrieve", data=json.dumps(payload).encode(), headers={"content-type": "application/json"}
    )
    with urllib.request.urlopen(req, timeout=120) as resp:
        return json.loads(resp.read())


class NullSearcher:
    """No model, no index: fixed pseudo-random row ids. Serving it measures the HTTP/JSON side alone."""

    def __init__(self, num_docs: int) -> None:
        self.num_docs = num_docs

    def search(self, queries: list[str], k: int) -> tuple[np.ndarray, np.ndarray]:
        ids = np.array([[(hash(q) + j * 7919) % self.num_docs for j in range(k)] for q in queries], dtype=np.int64)
        return np.ones(ids.shape, dtype=np.float32), ids


def _cpu_seconds() -> float:
    ru = resource.getrusage(resource.RUSAGE_SELF)
    return ru.ru_utime + ru.ru_stime


def _thread_cpu(native_id: int | None) -> float | None:
    try:
        import psutil
    except ImportError:
        return None
    for t in psutil.Process().threads():
        if t.id == native_id:
            return t.user_time + t.system_time
    return None


def _store(corpus_path: Path, spans_in_ram: bool) -> CorpusStore:
    store = CorpusStore(corpus_path)
    if spans_in_ram:
        # What-if for a one-line CorpusStore change: its line spans as a plain ndarray rather than an np.memmap,
        # whose __getitem__/__array_finalize__ cost ~10x more per passage.
        store._spans = np.asarray(store._spans)
    return store


def service_app(
    searcher: Any,
    corpus_path: Path,
    max_batch_size: int,
    max_wait_ms: float,
    queue_size: int,
    label: str,
    spans_in_ram: bool = False,
) -> Any:
    """The project's real app: create_app with a loader handing in the prebuilt searcher and a CorpusStore."""
    config = ServerConfig(
        index_dir=f"<in-memory {label}>",
        corpus=str(corpus_path),
        batcher=BatcherConfig(max_batch_size=max_batch_size, max_wait_ms=max_wait_ms, queue_size=queue_size),
    )
    # A fresh CorpusStore per app: the lifespan closes the one it was given at shutdown.
    return create_app(config, loader=lambda _cfg: (searcher, _store(corpus_path, spans_in_ram)))


def trivial_app() -> Any:
    """FastAPI with one POST /retrieve that reads the body and answers a constant: the framework's own ceiling."""
    app = FastAPI()
    answer = b'{"result": [[]]}'

    @app.post("/retrieve")
    async def retrieve(request: Request) -> Response:
        await request.body()
        return Response(answer, media_type="application/json")

    return app


class ServedApp:
    """An ASGI app run by uvicorn on 127.0.0.1 (a free port) in a background thread of this process."""

    def __init__(self, app: Any, label: str) -> None:
        import uvicorn

        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.app = app
        self.server = uvicorn.Server(
            uvicorn.Config(app, host="127.0.0.1", port=self.port, log_level="warning", access_log=False, backlog=4096)
        )
        self.thread = threading.Thread(target=self.server.run, name=f"uvicorn-{label}", daemon=True)
        self.loop_thread_id: int | None = None

    def __enter__(self) -> ServedApp:
        self.thread.start()
        deadline = time.monotonic() + 600
        while not self.server.started:
            if not self.thread.is_alive():
                raise RuntimeError("the retrieval service failed to start; see the log above")
            if time.monotonic() > deadline:
                raise RuntimeError("the retrieval service did not start within 600 s")
            time.sleep(0.05)
        self.loop_thread_id = self.thread.native_id
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.should_exit = True
        self.thread.join(timeout=120)

    def loop(self) -> asyncio.AbstractEventLoop:
        """The event loop uvicorn serves on (its listening server's loop)."""
        return self.server.servers[0].get_loop()

    def post(self, payload: dict) -> dict:
        return post_retrieve(self.url, payload)

    def batch_stats(self) -> tuple[int, float, float]:
        m = getattr(self.app.state, "metrics", None)
        return (m.batch_size.n, m.batch_size.total, m.batch_seconds.total) if m is not None else (0, 0.0, 0.0)


def check_consistency(
    served: ServedApp, direct: Callable[[list[str], int], Any], queries: list[str], topk: int
) -> dict[str, Any]:
    """The served documents are the corpus lines of the rows the searcher finds for the same queries."""
    body = served.post({"queries": queries, "topk": topk, "return_scores": True})
    _, ids = direct(queries, topk)
    served_ids = [[int(item["document"]["id"]) for item in hits] for hits in body["result"]]
    expected = [[int(i) for i in row if i >= 0] for row in ids]
    has_contents = all("contents" in item["document"] for hits in body["result"] for item in hits)
    return {
        "same_ids": served_ids == expected,
        "documents_have_contents": has_contents,
        "example": body["result"][0][0]["document"]["contents"][:60],
    }


def _model_thread_id() -> int | None:
    """Native id of the service's model executor thread (create_app names it mr-search-model_N)."""
    for t in threading.enumerate():
        if t.name.startswith("mr-search-model"):
            return t.native_id
    return None


class StackSampler:
    """Samples one thread's Python stack every `interval` s (sys._current_frames): a py-spy-like profile.

    cProfile cannot do this on Python 3.12 (it profiles every thread through sys.monitoring). A sample
    whose innermost frame is the event loop's own run() means time in C: uvloop I/O, httptools, or idle.
    """

    def __init__(self, thread_id: int, interval: float = 0.0005) -> None:
        self.thread_id, self.interval = thread_id, interval
        self.own: Counter[str] = Counter()
        self.inclusive: Counter[str] = Counter()
        self.samples = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="stack-sampler", daemon=True)

    @staticmethod
    def _name(frame: Any) -> str:
        return f"{Path(frame.f_code.co_filename).name}:{frame.f_code.co_name}"

    def _run(self) -> None:
        while not self._stop.is_set():
            frame = sys._current_frames().get(self.thread_id)
            if frame is not None:
                self.samples += 1
                self.own[self._name(frame)] += 1
                seen = set()
                while frame is not None:
                    seen.add(self._name(frame))
                    frame = frame.f_back
                self.inclusive.update(seen)
            time.sleep(self.interval)

    def start(self) -> None:
        self._thread.start()

    def stop(self, top: int = 25) -> dict[str, Any]:
        self._stop.set()
        self._thread.join()
        n = max(1, self.samples)
        return {
            "samples": self.samples,
            "own": [(k, c / n) for k, c in self.own.most_common(top)],
            "inclusive": [(k, c / n) for k, c in self.inclusive.most_common(top + 8)],
        }


def drive(
    served: ServedApp,
    concurrency: int,
    procs: int,
    duration: float,
    warmup: float,
    topk: int,
    per_request: int = 1,
    profile: bool = False,
) -> dict[str, Any]:
    """Closed-loop load from `procs` client processes; queries/s, latency percentiles, CPU of both sides.

    profile: sample the Python stack of the server's event-loop thread during the window.
    """
    procs = max(1, min(procs, concurrency))
    shares = [concurrency // procs + (1 if i < concurrency % procs else 0) for i in range(procs)]
    cmd = [
        sys.executable,
        str(LOADGEN),
        "--url",
        f"{served.url}/retrieve",
        "--duration",
        str(duration),
        "--warmup",
        str(warmup),
        "--start-at",
        "stdin",
        "--topk",
        str(topk),
        "--queries-per-request",
        str(per_request),
    ]
    children = [
        subprocess.Popen(
            [*cmd, "--concurrency", str(n), "--seed", str(i)], stdin=subprocess.PIPE, stdout=subprocess.PIPE
        )
        for i, n in enumerate(shares)
    ]
    # One window for all, set once the slowest client process is up: a fixed lead can pass on a loaded machine
    # before a process has imported aiohttp, and that process would measure nothing.
    for child in children:
        if (line := child.stdout.readline()) != b"ready\n":
            for other in children:
                other.kill()
            raise RuntimeError(f"load generator did not start (exit {child.poll()}, said {line[:200]!r})")
    start_at = time.time() + 0.2
    for child in children:
        child.stdin.write(f"{start_at!r}\n".encode())
        child.stdin.flush()
    model_tid = _model_thread_id()
    sampler = StackSampler(served.thread.ident) if profile else None
    time.sleep(max(0.0, start_at + warmup - time.time()))
    if sampler is not None:
        sampler.start()
    server_cpu = getattr(served, "cpu_seconds", _cpu_seconds)  # a multi-process service counts its processes
    cpu0, loop0, (n0, tot0, sec0) = server_cpu(), _thread_cpu(served.loop_thread_id), served.batch_stats()
    model0 = _thread_cpu(model_tid)
    time.sleep(duration)
    cpu1, loop1, (n1, tot1, sec1) = server_cpu(), _thread_cpu(served.loop_thread_id), served.batch_stats()
    model1 = _thread_cpu(model_tid)
    loop_profile = sampler.stop() if sampler is not None else None
    reports = []
    for child in children:
        out, _ = child.communicate(timeout=duration + warmup + 180)
        if child.returncode != 0:
            raise RuntimeError(f"load generator exited with {child.returncode}")
        reports.append(json.loads(out))
    lat = np.array([x for r in reports for x in r["latencies_ms"]], dtype=np.float64)
    statuses: dict[str, int] = {}
    for r in reports:
        for code, n in r["statuses"].items():
            statuses[code] = statuses.get(code, 0) + n
    batches = n1 - n0
    return {
        "concurrency": concurrency,
        "client_procs": procs,
        "queries_per_request": per_request,
        "queries_per_s": sum(r["queries"] for r in reports) / duration,
        "requests_ok": int(lat.size),
        "statuses": statuses,
        "bad_bodies": sum(r["bad_bodies"] for r in reports),
        "p50_ms": float(np.percentile(lat, 50)) if lat.size else None,
        "p99_ms": float(np.percentile(lat, 99)) if lat.size else None,
        "mean_batch": (tot1 - tot0) / batches if batches else None,
        "mean_batch_ms": 1000 * (sec1 - sec0) / batches if batches else None,
        "server_cpu_cores": (cpu1 - cpu0) / duration,
        "server_loop_thread_cores": (loop1 - loop0) / duration if loop0 is not None and loop1 is not None else None,
        "server_model_thread_cores": (model1 - model0) / duration
        if model0 is not None and model1 is not None
        else None,
        "loadgen_cpu_cores": sum(r["cpu_s"] for r in reports) / duration,
        "loop_profile": loop_profile,
    }
