"""Cross-request micro-batching: a bounded queue of (query, future) drained by one worker task.

Each batch is ONE encode + ONE search, run in the model executor so the event loop keeps
accepting requests meanwhile; whatever arrives during a batch forms the next one, so batches
grow with load by themselves and `max_wait_ms` only matters when the server is nearly idle.
With `lanes` > 1, up to that many batches are computed at once (one executor thread each): on a
CPU, lanes of one intra-op thread each keep every core busy without OpenMP's barriers, and the
core of a lane that just finished serves HTTP while the other lanes compute.
"""

from __future__ import annotations

import asyncio
import logging
import math
import sys
import time
from collections import deque
from collections.abc import Callable
from concurrent.futures import Executor
from functools import partial

import numpy as np

from mr_search_retrieval.config import BatcherConfig
from mr_search_retrieval.metrics import Metrics

logger = logging.getLogger(__name__)

SearchFn = Callable[[list[str], int], tuple[np.ndarray, np.ndarray]]


class QueueFullError(RuntimeError):
    """The bounded queue cannot take the request; retry after `retry_after` seconds."""

    def __init__(self, depth: int, capacity: int, retry_after: int) -> None:
        super().__init__(f"server overloaded: {depth} queries queued (capacity {capacity}); retry in {retry_after}s")
        self.retry_after = retry_after


Hit = tuple[np.ndarray, np.ndarray]
_FOR_A_LANE = sys.maxsize  # `_wake_at` while the worker waits for a lane: no queue length wakes it, `_finish` does


class _Request:
    """One /retrieve call: one future for all its queries, resolved when the last of them is answered."""

    __slots__ = ("future", "hits", "pending")

    def __init__(self, future: asyncio.Future, n: int) -> None:
        self.future = future
        self.hits: list[Hit | None] = [None] * n
        self.pending = n


class _Item:
    __slots__ = ("enqueued", "k", "pos", "query", "request")

    def __init__(self, query: str, k: int, request: _Request, pos: int, enqueued: float) -> None:
        self.query, self.k, self.request, self.pos, self.enqueued = query, k, request, pos, enqueued


class MicroBatcher:
    """The worker sleeps on one future (`_waiter`) that `submit` resolves when the queue reaches `_wake_at`
    items (1 while idle, max_batch_size while a partial batch waits for company), or that a finishing batch
    resolves when all lanes were busy: no Event, no task per batch (a batch's end is a future callback)."""

    def __init__(
        self,
        search_fn: SearchFn,
        config: BatcherConfig,
        executor: Executor | None = None,
        metrics: Metrics | None = None,
    ) -> None:
        self.search_fn = search_fn
        self.config = config
        self.executor = executor
        self.metrics = metrics
        self._items: deque[_Item] = deque()
        self._waiter: asyncio.Future | None = None
        self._wake_at = 1
        self._task: asyncio.Task | None = None
        self._stopping = False
        self._batch_seconds = 0.05  # running mean of one batch, for Retry-After
        self._in_flight = 0  # batches being computed (at most config.lanes)

    @property
    def depth(self) -> int:
        return len(self._items)

    def start(self) -> None:
        """Start the worker on the running event loop."""
        self._stopping = False
        self._task = asyncio.get_running_loop().create_task(self._run(), name="mr-search-batcher")

    def _wake(self) -> None:
        if self._waiter is not None and not self._waiter.done():
            self._waiter.set_result(None)
        self._waiter = None

    async def stop(self) -> None:
        """Finish every queued query, then end the worker."""
        self._stopping = True
        self._wake()
        if self._task is not None:
            await self._task
            self._task = None

    async def submit(self, queries: list[str], k: int) -> list[Hit]:
        """Scores and row ids (each (k',), best first) per query, in order."""
        if self._task is None or self._stopping:
            raise RuntimeError("the batcher is not running (server starting up or shutting down)")
        items = self._items
        if len(items) + len(queries) > self.config.queue_size:
            batches_ahead = math.ceil(len(items) / self.config.max_batch_size) + 1
            retry = max(1, math.ceil(batches_ahead * self._batch_seconds / self.config.lanes))
            raise QueueFullError(len(items), self.config.queue_size, retry)
        future = asyncio.get_running_loop().create_future()
        request = _Request(future, len(queries))
        now = time.perf_counter()
        for pos, q in enumerate(queries):
            items.append(_Item(q, k, request, pos, now))
        if self._waiter is not None and len(items) >= self._wake_at:
            self._wake()
        return await future

    async def _sleep(self, wake_at: int, timeout: float | None) -> None:
        loop = asyncio.get_running_loop()
        self._wake_at = wake_at
        self._waiter = waiter = loop.create_future()
        timer = loop.call_later(timeout, self._wake) if timeout is not None else None
        try:
            await waiter
        finally:
            if timer is not None:
                timer.cancel()
            self._waiter = None

    async def _wait_for_batch(self) -> None:
        if len(self._items) >= self.config.max_batch_size or self._stopping:
            return
        remaining = self._items[0].enqueued + self.config.max_wait_ms / 1000 - time.perf_counter()
        if remaining > 0:
            await self._sleep(self.config.max_batch_size, remaining)

    def _take_batch(self) -> list[_Item]:
        batch: list[_Item] = []
        items, limit = self._items, self.config.max_batch_size
        while items and len(batch) < limit:
            item = items.popleft()
            if not item.request.future.done():  # a disconnected client's request was cancelled: skip its work
                batch.append(item)
        return batch

    @staticmethod
    def _fail(batch: list[_Item], err: BaseException) -> None:
        for item in batch:
            if not item.request.future.done():
                item.request.future.set_exception(err)

    @staticmethod
    def _answer(batch: list[_Item], scores: np.ndarray, ids: np.ndarray) -> None:
        for j, item in enumerate(batch):
            request = item.request
            if request.future.done():
                continue
            hit = (scores[j, : item.k], ids[j, : item.k])
            if request.pending == 1 and item.pos == 0 and len(request.hits) == 1:
                request.future.set_result([hit])
                continue
            request.hits[item.pos] = hit
            request.pending -= 1
            if request.pending == 0:
                request.future.set_result(request.hits)

    def _finish(self, batch: list[_Item], start: float, done: asyncio.Future) -> None:
        """Answer (or fail) a computed batch and free its lane; runs on the event loop."""
        self._in_flight -= 1
        if self._wake_at == _FOR_A_LANE:
            self._wake()
        err = RuntimeError("the batch was cancelled") if done.cancelled() else done.exception()
        if err is not None:  # one bad batch must not kill the worker: its requests get the error
            logger.error("search failed for a batch of %d queries", len(batch), exc_info=err)
            self._fail(batch, err)
            return
        scores, ids = done.result()
        elapsed = time.perf_counter() - start
        self._batch_seconds = 0.8 * self._batch_seconds + 0.2 * elapsed
        if self.metrics is not None:
            self.metrics.observe_batch(len(batch), elapsed)
        self._answer(batch, scores, ids)

    async def _run(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            if self._in_flight >= self.config.lanes:
                await self._sleep(_FOR_A_LANE, None)
                continue
            if not self._items:
                if self._stopping:
                    break
                await self._sleep(1, None)
                continue
            await self._wait_for_batch()
            batch = self._take_batch()
            if not batch:
                continue
            k = max(item.k for item in batch)
            self._in_flight += 1
            done = loop.run_in_executor(self.executor, self.search_fn, [i.query for i in batch], k)
            done.add_done_callback(partial(self._finish, batch, time.perf_counter()))
        while self._in_flight:  # stopping: the last batches are still being computed
            await self._sleep(_FOR_A_LANE, None)
