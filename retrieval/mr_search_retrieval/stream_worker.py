"""The protocol between the HTTP fronts and the search worker of `--http-workers N`: fronts keep several batches in
flight, the worker keeps the GPU on one merged batch at a time, made of everything that has arrived.

It replaced a protocol with one batch in flight per front (1.23-1.47x its throughput on H100s at 256 clients): there a
query that reached a front just after the front sent its batch waited for that whole round trip before it was even
sent, the fronts' batches split the clients into ragged groups, and two overlapping merged batches made the GPU
alternate between two small batches (each one a full pass over the index). Here instead:

- A front (`StreamRemoteSearcher`) sends each micro-batch at once, up to `front_lanes` per front in flight, with
  a request id; a reader thread hands each reply to its caller. With the encoder's `QueryTokenizer` (shipped by
  the worker) the front sends token rows instead of strings, so tokenizing runs on the fronts' cores.
- The worker (`serve_stream`) receives on one thread into an inbox; its GPU loop takes everything in the inbox
  (at most `max_queries`), runs one encode + search (token rows: `search_tokens`, the embeddings never leave the
  GPU) and hands the results to a reply thread, so replying overlaps the next batch. When the GPU finds the
  inbox empty it waits `gather_s` after the first arrival for company.

Batches thus grow with the load by themselves and the index is read once per merged batch.
"""

from __future__ import annotations

import contextlib
import itertools
import logging
import queue
import threading
import time
from collections import deque
from multiprocessing.connection import Connection, wait
from typing import Any

import numpy as np

from mr_search_retrieval.search_worker import SearchWorkerError
from mr_search_retrieval.token_rows import QueryTokenizer, TokenRows, merge_token_rows

logger = logging.getLogger(__name__)

MAX_MERGED_QUERIES = 1024  # queries per merged batch; the search is compute-bound well before this
_POLL_S = 0.1  # how often the receiving thread re-reads which connections are open

Request = tuple[Connection, int, int, Any]  # (connection, request id, k, list of strings or TokenRows)


class _Slot:
    __slots__ = ("event", "reply")

    def __init__(self) -> None:
        self.event = threading.Event()
        self.reply: tuple[bool, Any] = (False, "no reply")


class StreamRemoteSearcher:
    """A front's `Searcher`: any number of threads may search at once over the one connection to the worker."""

    def __init__(self, conn: Connection, num_docs: int, tokenizer: QueryTokenizer | None = None) -> None:
        self.num_docs = num_docs
        self.tokenizer = tokenizer
        self._conn = conn
        self._lock = threading.Lock()  # sending, and the table of waiting calls
        self._waiting: dict[int, _Slot] = {}
        self._ids = itertools.count()
        self._gone: str | None = None
        self._reader = threading.Thread(target=self._read, name="mr-search-replies", daemon=True)
        self._reader.start()

    def search(self, queries: list[str], k: int) -> tuple[np.ndarray, np.ndarray]:
        payload: Any = self.tokenizer(queries) if self.tokenizer is not None else list(queries)
        slot = _Slot()
        with self._lock:
            if self._gone is not None:
                raise SearchWorkerError(self._gone)
            rid = next(self._ids)
            self._waiting[rid] = slot
            try:
                self._conn.send((rid, k, payload))
            except OSError as err:
                del self._waiting[rid]
                raise SearchWorkerError(f"the search worker process is gone ({type(err).__name__})") from err
        slot.event.wait()
        ok, result = slot.reply
        if not ok:
            raise result if isinstance(result, SearchWorkerError) else SearchWorkerError(f"search worker: {result}")
        return result

    def close(self) -> None:
        """Say goodbye to the worker (it stops listening to this front), end the reader, close the connection.
        (A front process that just exits needs none of this: its end of the pipe closes with it.)"""
        with self._lock:
            if self._gone is None:
                with contextlib.suppress(OSError):
                    self._conn.send(None)
        self._reader.join(5)
        self._conn.close()

    def _read(self) -> None:
        while True:
            try:
                message = self._conn.recv()
                if message is None:  # the worker's answer to close()
                    raise EOFError
                rid, ok, result = message
            except (EOFError, OSError) as err:
                with self._lock:
                    self._gone = f"the search worker process is gone ({type(err).__name__})"
                    waiting, self._waiting = self._waiting, {}
                for slot in waiting.values():
                    slot.reply = (False, SearchWorkerError(self._gone))
                    slot.event.set()
                return
            with self._lock:
                slot = self._waiting.pop(rid, None)
            if slot is not None:
                slot.reply = (ok, result)
                slot.event.set()


class _Inbox:
    """What the fronts have sent and the GPU loop has not taken; filled by one receiving thread."""

    def __init__(self, conns: list[Connection]) -> None:
        self.conns = list(conns)
        self.items: deque[Request] = deque()
        self.cond = threading.Condition()
        self.closed = not self.conns
        self.thread = threading.Thread(target=self._receive, name="mr-search-inbox", daemon=True)
        self.thread.start()

    def _receive(self) -> None:
        while self.conns:
            ready: list[Request] = []  # every front readable at once goes in together: take() sees all or none
            for conn in wait(self.conns, timeout=_POLL_S):
                try:
                    message = conn.recv()  # type: ignore[union-attr]
                    if message is None:  # the front closes: acknowledge so that its reader thread ends
                        conn.send(None)  # type: ignore[union-attr]
                        raise EOFError
                    rid, k, payload = message
                except (EOFError, OSError):  # that front has exited or closed
                    self.conns.remove(conn)  # type: ignore[arg-type]
                    continue
                ready.append((conn, rid, k, payload))  # type: ignore[arg-type]
            if ready:
                with self.cond:
                    self.items.extend(ready)
                    self.cond.notify()
        with self.cond:
            self.closed = True
            self.cond.notify()

    def take(self, gather_s: float, max_queries: int, tile: int = 0) -> list[Request]:
        """Everything received (at most `max_queries` queries, at least one request); [] once all fronts closed.
        If nothing was waiting, wait for the first request and then `gather_s` more for company. With `tile`, a
        batch at most a quarter tile over a multiple of `tile` queries is cut back to that multiple (the rest waits
        for the next batch): GPU time steps up at each multiple (search kernel tiles, encoder graph buckets)."""
        with self.cond:
            idle = not self.items
            while not self.items and not self.closed:
                self.cond.wait()
            if not self.items:
                return []
        if idle and gather_s > 0:
            time.sleep(gather_s)
        taken, n = [], 0
        with self.cond:
            limit, pending = max_queries, sum(len(item[3]) for item in self.items)
            if tile and pending > tile and pending % tile <= tile // 4:
                limit = min(limit, pending - pending % tile)
            while self.items and (not taken or n + len(self.items[0][3]) <= limit):
                item = self.items.popleft()
                taken.append(item)
                n += len(item[3])
        return taken


def _compute(searcher: Any, requests: list[Request], pad_token_id: int) -> tuple[bool, Any]:
    k = max(r[2] for r in requests)
    payloads = [r[3] for r in requests]
    try:
        if all(isinstance(p, TokenRows) for p in payloads):
            return True, searcher.search_tokens(merge_token_rows(payloads, pad_token_id), k)
        if any(isinstance(p, TokenRows) for p in payloads):
            raise ValueError("a merged batch mixes token rows and strings (fronts of two kinds)")
        return True, searcher.search([q for p in payloads for q in p], k)
    except Exception as err:  # one bad batch must not kill the worker: its fronts get the message
        logger.exception("search failed for a merged batch of %d requests", len(requests))
        return False, f"{type(err).__name__}: {err}"


def _reply(outbox: queue.Queue) -> None:
    while (job := outbox.get()) is not None:
        requests, (ok, result) = job
        start = 0
        for conn, rid, k, payload in requests:
            if ok:
                end = start + len(payload)
                reply = (rid, True, (result[0][start:end, :k], result[1][start:end, :k]))
                start = end
            else:
                reply = (rid, False, result)
            with contextlib.suppress(OSError):  # that front has exited; the inbox drops its connection
                conn.send(reply)


def serve_stream(
    searcher: Any,
    conns: list[Connection],
    gather_s: float = 0.0,
    max_queries: int = MAX_MERGED_QUERIES,
    pad_token_id: int = 0,
    tile: int = 0,
) -> int:
    """Answer every front's requests until all connections are closed; returns the number of merged batches.

    searcher: `search(strings, k)`, and `search_tokens(arrays, k)` when the fronts send TokenRows.
    tile: cut batches just over a multiple of this many queries back to it (0: off; see _Inbox.take).
    """
    if gather_s < 0 or max_queries < 1 or tile < 0:
        raise ValueError(
            f"gather_s must be >= 0, max_queries >= 1 and tile >= 0, got {gather_s}, {max_queries} and {tile}"
        )
    inbox = _Inbox(conns)
    outbox: queue.Queue = queue.Queue()
    replier = threading.Thread(target=_reply, args=(outbox,), name="mr-search-reply", daemon=True)
    replier.start()
    merged = 0
    while requests := inbox.take(gather_s, max_queries, tile):
        merged += 1
        outbox.put((requests, _compute(searcher, requests, pad_token_id)))
    outbox.put(None)
    replier.join()
    return merged


def front_tokenizer(searcher: Any) -> QueryTokenizer | None:
    """The tokenizer the fronts should run for `searcher`, or None (they send strings): only a searcher with
    `search_tokens` over an encoder with `embed_tokens` and an index with `search_tensor` takes token rows."""
    encoder, index = getattr(searcher, "encoder", None), getattr(searcher, "index", None)
    if not (hasattr(searcher, "search_tokens") and hasattr(index, "search_tensor")):
        return None
    make = getattr(encoder, "query_tokenizer", None)
    return make() if make is not None and hasattr(encoder, "embed_tokens") else None
