"""The search-worker process of `--http-workers N`: it alone owns the encoder, the index and the GPU.

Every HTTP front process holds one duplex `Connection` to it and sends `(queries, k)` per micro-batch
(one in flight per front); the worker takes whatever all fronts have sent, runs ONE encode+search for
the merged batch and sends each front its rows back as `(True, (scores, ids))` or `(False, message)`.
While a batch computes, the next ones queue in the pipes, so batches grow with load by themselves.

After the first front's batch arrives, the worker waits up to `gather_s` for the other idle fronts
(every batch has a fixed cost: encoder kernel launches, one pass over the whole index; so one batch of
all fronts beats one per front, and fronts answered together stay in phase). Up to `inflight` merged
batches can run at once (threads, each on its own CUDA stream): with the encoder replayed from CUDA
graphs, 2 serve 256-1024 clients 15-45% faster than 1 on an H100 (one batch's tokenizing and replies
overlap the other's GPU work; the GPU itself runs them nearly in turn), 1 is faster for a few clients
(32: each batch reads the whole index). Issue 7 has the figures.

On a GPU the worker runs torch with one intra-op CPU thread unless told otherwise: the GPU does the
work, and spare OpenMP threads only contend with the HTTP fronts. The tokenizer keeps its thread pool.
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
        self.waiting: set[int] = set()  # id() of connections whose front waits for a reply (sends nothing now)

    def snapshot(self) -> list[Connection]:
        with self.lock:
            return list(self.conns)

    def idle(self) -> list[Connection]:
        """Open connections whose front has no batch with us: only these can send a new batch."""
        with self.lock:
            return [c for c in self.conns if id(c) not in self.waiting]

    def drop(self, conn: Connection) -> None:
        with self.lock:
            if conn in self.conns:
                self.conns.remove(conn)


_REFRESH_S = 0.005
# One batch per tile configuration of the two-stage search kernel (<= 16, <= 64, more queries; triton_block_max.py).
WARM_UP_BATCHES = (1, 32, 128)
_HOLD_POLL_S = 0.0005


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


def _collect(live: _Live, gather_s: float, hold_s: float = 0.0) -> list[tuple[Connection, list[str], int]]:
    """Block until some front sends a batch; then take what the other idle fronts send within `gather_s`
    (ending early once every idle front has sent) and, while another merged batch is computing, until it is done
    (at most `hold_s` after the first batch arrived).

    The set of idle fronts is re-read every `_REFRESH_S` while waiting: with batches in flight, a front becomes idle
    (and may send) when its batch is answered, and it must not wait behind fronts that have nothing to send.
    """
    while True:
        if not live.snapshot():
            return []
        current = live.idle()
        if not current:  # every open front waits for a batch in flight; one of them is answered soon
            time.sleep(_REFRESH_S)
            continue
        ready = wait(current, timeout=_REFRESH_S)
        if ready:
            break
    requests = _receive(ready, live)
    start, heard = time.monotonic(), {id(c) for c in ready}
    while requests:
        now = time.monotonic()
        holding = live.busy > 0 and now < start + hold_s
        end = start + (max(hold_s, gather_s) if holding else gather_s)
        rest = [c for c in live.idle() if id(c) not in heard]
        if now >= end or not (rest or holding):
            break
        timeout = min(end - now, _HOLD_POLL_S) if holding else end - now  # notice the busy batch finishing
        if not rest:
            time.sleep(timeout)
            continue
        more = wait(rest, timeout=timeout)
        requests += _receive(more, live)
        heard.update(id(c) for c in more)
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
            live.waiting.difference_update(id(c) for c, _, _ in requests)
        slots.release()


def serve_batches(
    searcher: Searcher, conns: list[Connection], inflight: int = 1, gather_s: float = 0.0, hold_s: float = 0.0
) -> int:
    """Answer batches from every connection until all of them are closed; returns the number of merged batches.

    inflight: merged batches computing at once (threads; the searcher must be thread-safe for > 1).
    gather_s: after a front's batch arrives, how long to wait for the other idle fronts' batches (ends as soon as
    all of them have sent). Every batch has a fixed cost (kernel launches, one pass over the index), so merging
    fronts pays; it also keeps the fronts in phase: answered together, they send their next batches together.
    hold_s: while another merged batch is computing, keep gathering until it is done (at most this long after the
    first batch arrived). On one GPU the next batch's kernels wait behind the running search anyway (an H100's
    encode of 64 queries: 3 ms alone, 13 ms beside a search). Measured on an H100 (issue 7, 4 fronts, 2 in flight):
    50 ms took 32 clients from ~700 to ~1,070 q/s but cost 15-20% at 256-1024 clients, so the service default is 0.
    """
    if inflight < 1 or gather_s < 0 or hold_s < 0:
        raise ValueError(f"inflight must be >= 1, gather_s and hold_s >= 0, got {inflight}, {gather_s} and {hold_s}")
    live = _Live(conns)
    slots = threading.Semaphore(inflight)
    merged = 0
    with ThreadPoolExecutor(max_workers=inflight, thread_name_prefix="mr-search-batch") as pool:
        while True:
            slots.acquire()  # a batch thread is free
            if not live.snapshot():
                break
            requests = _collect(live, gather_s, hold_s)
            if not requests:
                slots.release()
                continue
            merged += 1
            with live.lock:
                live.busy += 1
                live.waiting.update(id(c) for c, _, _ in requests)
            pool.submit(_answer, searcher, requests, live, slots, inflight > 1)
    return merged


def _serves_on_gpu(config: ServerConfig) -> bool:
    """A dense searcher whose encoder and index both run on CUDA ('auto' resolves to it when a GPU is visible)."""
    if config.retriever != "dense":
        return False
    import torch

    def on_cuda(device: str) -> bool:
        return device in ("auto", "cuda") or device.startswith("cuda:")

    return torch.cuda.is_available() and on_cuda(config.encoder.device) and on_cuda(config.index_device)


def auto_inflight(on_gpu: bool) -> int:
    """Merged batches at once when not told: 2 on a GPU (one batch's CPU work overlaps the other's GPU work),
    else 1 (a CPU searcher such as BM25 need not be thread-safe, and the fronts need the cores)."""
    return 2 if on_gpu else 1


def _pad_id(searcher: Any) -> int:
    return int(getattr(getattr(searcher, "encoder", None), "pad_token_id", 0))


def run_search_worker(
    config: ServerConfig,
    loader: Loader,
    conns: list[Connection],
    status: Connection,
    log_level: str = "INFO",
    torch_threads: int = 0,
    inflight: int = 0,
    gather_s: float = 0.0,
    hold_s: float = 0.0,
    mode: str = "batches",
    tile: int = 0,
) -> None:
    """Process entry point: load (with the service's startup checks), report on `status`, then serve.

    mode: 'batches' (one batch in flight per front, `serve_batches`), 'stream' (stream_worker.py) or 'auto'
    (stream on a GPU). The ready message carries (num_docs, None) or, streamed, (num_docs, pickled tokenizer of
    the fronts or None)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C reaches the whole group: fronts drain through us first
    logging.basicConfig(level=log_level, format="%(asctime)s %(levelname)s %(name)s[worker]: %(message)s")
    try:
        on_gpu = _serves_on_gpu(config)
        inflight = inflight or auto_inflight(on_gpu)
        if torch_threads == 0 and on_gpu:
            # Measured on an H200 (issue 7): torch's 16 CPU threads tripled the eager encoder's time under HTTP
            # load; the GPU needs one thread to feed it. The tokenizer's own pool pays (H100, CUDA graphs, 4 fronts,
            # 256 clients: 4.2k q/s and p99 77 ms with it, 3.7-4.0k and p99 107-111 ms without; 128 queries
            # tokenize in 2.4 vs 6.3 ms).
            torch_threads = 1
        if torch_threads > 0:  # on a CPU box the fronts need cores too: oversubscribed OpenMP threads crawl
            import torch

            torch.set_num_threads(torch_threads)
        searcher, corpus = loader(config)
        num_docs = len(corpus)
        corpus.close()  # the fronts read passages; the worker only searches
        for n in WARM_UP_BATCHES:  # first-call costs (kernel compiles, cuBLAS plans) before the first request
            searcher.search(["warm up"] * n, 1)
        stream = mode == "stream" or (mode == "auto" and on_gpu)
        front: bytes | None = None
        tokenizer = None
        if stream:
            import pickle

            from mr_search_retrieval.stream_worker import front_tokenizer

            tokenizer = front_tokenizer(searcher)
            if tokenizer is not None:  # the token path's own first calls too
                from mr_search_retrieval.token_rows import merge_token_rows

                for n in WARM_UP_BATCHES:
                    searcher.search_tokens(merge_token_rows([tokenizer(["warm up"] * n)], _pad_id(searcher)), 1)
            front = pickle.dumps(tokenizer)
    except Exception as err:
        logger.exception("the search worker failed to start")
        status.send(("error", f"{type(err).__name__}: {err}"))
        status.close()
        return
    status.send(("ready", (num_docs, front)))
    status.close()
    if stream:
        from mr_search_retrieval.stream_worker import serve_stream

        logger.info(
            "search worker ready: %d passages, streamed from %d HTTP front processes (%s)",
            num_docs,
            len(conns),
            "tokenized in the fronts" if tokenizer is not None else "strings",
        )
        merged = serve_stream(searcher, conns, gather_s, pad_token_id=_pad_id(searcher), tile=tile)
        logger.info("search worker stopped after %d merged batches", merged)
        return
    logger.info(
        "search worker ready: %d passages, serving %d HTTP front processes, %d batches in flight",
        num_docs,
        len(conns),
        inflight,
    )
    merged = serve_batches(searcher, conns, inflight, gather_s, hold_s)
    logger.info("search worker stopped after %d merged batches", merged)
