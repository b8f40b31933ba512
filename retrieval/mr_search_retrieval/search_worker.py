"""The search-worker process of `--http-workers N`: it alone owns the encoder, the index and the GPU.

Every HTTP front process holds one duplex `Connection` to it and sends `(queries, k)` per micro-batch
(one in flight per front); the worker takes whatever all fronts have sent, runs ONE encode+search for
the merged batch and sends each front its rows back as `(True, (scores, ids))` or `(False, message)`.
While a batch computes, the next ones queue in the pipes, so batches grow with load by themselves.

Up to `inflight` merged batches run at once (threads of this process): while one batch's GPU work runs,
the next is tokenized and its kernels are queued, so the GPU does not wait on the CPU side. While
another batch is in flight, a new one gathers requests for up to `gather_s` after the first arrives
(more fronts per batch: every batch reads the whole index once, so few larger batches beat many small).
"""

from __future__ import annotations

import contextlib
import logging
import signal
import sys
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from multiprocessing.connection import Connection, wait
from typing import TYPE_CHECKING, Any

import numpy as np

from mr_search_retrieval.config import ServerConfig

if TYPE_CHECKING:
    from mr_search_retrieval.corpus import CorpusStore
    from mr_search_retrieval.retriever import Searcher

logger = logging.getLogger(__name__)

Loader = Callable[[ServerConfig], "tuple[Searcher, CorpusStore]"]
Reply = tuple[bool, Any]


class SearchWorkerError(RuntimeError):
    """The search worker could not answer a batch (its message says why) or is gone."""


class RemoteSearcher:
    """A `Searcher` for an HTTP front: forwards each batch to the search worker over its connection."""

    def __init__(self, conn: Connection, num_docs: int) -> None:
        self.num_docs = num_docs
        self._conn = conn
        self._lock = threading.Lock()  # one batch in flight per connection

    def search(self, queries: list[str], k: int) -> tuple[np.ndarray, np.ndarray]:
        with self._lock:
            try:
                self._conn.send((queries, k))
                ok, payload = self._conn.recv()
            except (EOFError, OSError) as err:
                raise SearchWorkerError(f"the search worker process is gone ({type(err).__name__})") from err
        if not ok:
            raise SearchWorkerError(f"search worker: {payload}")
        return payload


class _Live:
    """The connections still open, shared by the receiving thread and the batch threads that reply."""

    def __init__(self, conns: list[Connection]) -> None:
        self.conns = list(conns)
        self.lock = threading.Lock()
        self.busy = 0  # merged batches computing now

    def snapshot(self) -> list[Connection]:
        with self.lock:
            return list(self.conns)

    def drop(self, conn: Connection) -> None:
        with self.lock:
            if conn in self.conns:
                self.conns.remove(conn)


def _receive(ready: list[Any], live: _Live) -> list[tuple[Connection, list[str], int]]:
    requests = []
    for conn in ready:
        try:
            queries, k = conn.recv()
        except (EOFError, OSError):  # that front has exited
            live.drop(conn)
            continue
        requests.append((conn, queries, k))
    return requests


def _collect(live: _Live, gather_s: float) -> list[tuple[Connection, list[str], int]]:
    """Block until some front sends a batch; then, if `gather_s` > 0, take what other fronts send within it."""
    current = live.snapshot()
    if not current:
        return []
    ready = wait(current)
    requests = _receive(ready, live)
    if gather_s <= 0 or not requests:
        return requests
    deadline = time.monotonic() + gather_s
    rest = [c for c in current if c not in ready]
    while rest and (left := deadline - time.monotonic()) > 0:
        more = wait(rest, timeout=left)
        if not more:
            break
        requests += _receive(more, live)
        rest = [c for c in rest if c not in more]
    return requests


def _replies(searcher: Searcher, requests: list[tuple[Connection, list[str], int]]) -> list[Reply]:
    queries = [q for _, qs, _ in requests for q in qs]
    try:
        scores, ids = searcher.search(queries, max(k for _, _, k in requests))
    except Exception as err:  # one bad batch must not kill the worker: its fronts get the message
        logger.exception("search failed for a merged batch of %d queries", len(queries))
        return [(False, f"{type(err).__name__}: {err}")] * len(requests)
    replies: list[Reply] = []
    start = 0
    for _, qs, k in requests:
        end = start + len(qs)
        replies.append((True, (scores[start:end, :k], ids[start:end, :k])))
        start = end
    return replies


_local = threading.local()


def _batch_stream() -> contextlib.AbstractContextManager:
    """This batch thread's own CUDA stream when the searcher uses CUDA (its GPU work then overlaps the other
    batch's instead of queueing behind it, and its final copy to the host waits for its own kernels only)."""
    torch = sys.modules.get("torch")  # imported by a GPU searcher; a BM25 worker never loads torch
    if torch is None or not torch.cuda.is_available():
        return contextlib.nullcontext()
    if getattr(_local, "stream", None) is None:
        _local.stream = torch.cuda.Stream()
    return torch.cuda.stream(_local.stream)


def _answer(
    searcher: Searcher,
    requests: list[tuple[Connection, list[str], int]],
    live: _Live,
    slots: threading.Semaphore,
    own_stream: bool,
) -> None:
    try:
        with _batch_stream() if own_stream else contextlib.nullcontext():
            replies = _replies(searcher, requests)
        for (conn, _, _), reply in zip(requests, replies, strict=True):
            try:
                conn.send(reply)  # a front has one batch in flight: no other thread sends on this connection now
            except OSError:
                live.drop(conn)
    finally:
        with live.lock:
            live.busy -= 1
        slots.release()


def serve_batches(searcher: Searcher, conns: list[Connection], inflight: int = 1, gather_s: float = 0.0) -> int:
    """Answer batches from every connection until all of them are closed; returns the number of merged batches.

    inflight: merged batches computing at once (threads; the searcher must be thread-safe for > 1).
    gather_s: while another batch is in flight, how long a new batch waits for more fronts after the first.
    """
    if inflight < 1 or gather_s < 0:
        raise ValueError(f"inflight must be >= 1 and gather_s >= 0, got {inflight} and {gather_s}")
    live = _Live(conns)
    slots = threading.Semaphore(inflight)
    merged = 0
    with ThreadPoolExecutor(max_workers=inflight, thread_name_prefix="mr-search-batch") as pool:
        while True:
            slots.acquire()  # a batch thread is free
            if not live.snapshot():
                break
            with live.lock:
                busy = live.busy
            requests = _collect(live, gather_s if busy else 0.0)
            if not requests:
                slots.release()
                continue
            merged += 1
            with live.lock:
                live.busy += 1
            pool.submit(_answer, searcher, requests, live, slots, inflight > 1)
    return merged


def run_search_worker(
    config: ServerConfig,
    loader: Loader,
    conns: list[Connection],
    status: Connection,
    log_level: str = "INFO",
    torch_threads: int = 0,
    inflight: int = 1,
    gather_s: float = 0.0,
) -> None:
    """Process entry point: load (with the service's startup checks), report on `status`, then serve."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C reaches the whole group: fronts drain through us first
    logging.basicConfig(level=log_level, format="%(asctime)s %(levelname)s %(name)s[worker]: %(message)s")
    try:
        if torch_threads > 0:  # on a CPU box the fronts need cores too: oversubscribed OpenMP threads crawl
            import torch

            torch.set_num_threads(torch_threads)
        searcher, corpus = loader(config)
        num_docs = len(corpus)
        corpus.close()  # the fronts read passages; the worker only searches
        searcher.search(["warm up"], 1)
    except Exception as err:
        logger.exception("the search worker failed to start")
        status.send(("error", f"{type(err).__name__}: {err}"))
        status.close()
        return
    status.send(("ready", num_docs))
    status.close()
    logger.info(
        "search worker ready: %d passages, serving %d HTTP front processes, %d batches in flight",
        num_docs,
        len(conns),
        inflight,
    )
    merged = serve_batches(searcher, conns, inflight, gather_s)
    logger.info("search worker stopped after %d merged batches", merged)
