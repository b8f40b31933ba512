"""The search-worker process of `--http-workers N`: it alone owns the encoder, the index and the GPU.

Every HTTP front process holds one duplex `Connection` to it and sends `(queries, k)` per micro-batch
(one in flight per front); the worker takes whatever all fronts have sent, runs ONE encode+search for
the merged batch and sends each front its rows back as `(True, (scores, ids))` or `(False, message)`.
While a batch computes, the next ones queue in the pipes, so batches grow with load by themselves.
"""

from __future__ import annotations

import logging
import signal
import threading
from collections.abc import Callable
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


def _receive(ready: list[Any], live: list[Connection]) -> list[tuple[Connection, list[str], int]]:
    requests = []
    for conn in ready:
        try:
            queries, k = conn.recv()
        except (EOFError, OSError):  # that front has exited
            live.remove(conn)
            continue
        requests.append((conn, queries, k))
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


def serve_batches(searcher: Searcher, conns: list[Connection]) -> int:
    """Answer batches from every connection until all of them are closed; returns the number of merged batches."""
    live = list(conns)
    merged = 0
    while live:
        requests = _receive(wait(live), live)
        if not requests:
            continue
        merged += 1
        for (conn, _, _), reply in zip(requests, _replies(searcher, requests), strict=True):
            try:
                conn.send(reply)
            except OSError:
                if conn in live:
                    live.remove(conn)
    return merged


def run_search_worker(
    config: ServerConfig,
    loader: Loader,
    conns: list[Connection],
    status: Connection,
    log_level: str = "INFO",
    torch_threads: int = 0,
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
    logger.info("search worker ready: %d passages, serving %d HTTP front processes", num_docs, len(conns))
    merged = serve_batches(searcher, conns)
    logger.info("search worker stopped after %d merged batches", merged)
