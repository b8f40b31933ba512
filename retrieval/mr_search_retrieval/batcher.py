"""Cross-request micro-batching: a bounded queue of (query, future) drained by one worker task.

Each batch is ONE encode + ONE search, run in the model executor so the event loop keeps
accepting requests meanwhile; whatever arrives during a batch forms the next one, so batches
grow with load by themselves and `max_wait_ms` only matters when the server is nearly idle.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
import time
from collections import deque
from collections.abc import Callable
from concurrent.futures import Executor
from dataclasses import dataclass

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


@dataclass
class _Item:
    query: str
    k: int
    future: asyncio.Future
    enqueued: float


class MicroBatcher:
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
        self._has_items: asyncio.Event | None = None
        self._full: asyncio.Event | None = None
        self._task: asyncio.Task | None = None
        self._stopping = False
        self._batch_seconds = 0.05  # running mean of one batch, for Retry-After

    @property
    def depth(self) -> int:
        return len(self._items)

    def start(self) -> None:
        """Start the worker on the running event loop."""
        self._has_items, self._full = asyncio.Event(), asyncio.Event()
        self._stopping = False
        self._task = asyncio.get_running_loop().create_task(self._run(), name="mr-search-batcher")

    async def stop(self) -> None:
        """Finish every queued query, then end the worker."""
        self._stopping = True
        if self._has_items is not None:
            self._has_items.set()
        if self._task is not None:
            await self._task
            self._task = None

    async def submit(self, queries: list[str], k: int) -> list[tuple[np.ndarray, np.ndarray]]:
        """Scores and row ids (each (k',), best first) per query, in order."""
        if self._task is None or self._stopping:
            raise RuntimeError("the batcher is not running (server starting up or shutting down)")
        if len(self._items) + len(queries) > self.config.queue_size:
            batches_ahead = math.ceil(len(self._items) / self.config.max_batch_size) + 1
            retry = max(1, math.ceil(batches_ahead * self._batch_seconds))
            raise QueueFullError(len(self._items), self.config.queue_size, retry)
        loop = asyncio.get_running_loop()
        now = time.perf_counter()
        futures = []
        for q in queries:
            fut = loop.create_future()
            self._items.append(_Item(q, k, fut, now))
            futures.append(fut)
        self._has_items.set()
        if len(self._items) >= self.config.max_batch_size:
            self._full.set()
        return list(await asyncio.gather(*futures))

    async def _wait_for_batch(self) -> None:
        if len(self._items) >= self.config.max_batch_size or self._stopping:
            return
        remaining = self._items[0].enqueued + self.config.max_wait_ms / 1000 - time.perf_counter()
        if remaining > 0:
            self._full.clear()
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(self._full.wait(), remaining)

    def _take_batch(self) -> list[_Item]:
        batch = []
        while self._items and len(batch) < self.config.max_batch_size:
            item = self._items.popleft()
            if not item.future.done():  # a disconnected client's request was cancelled: skip its work
                batch.append(item)
        return batch

    async def _run(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            if not self._items:
                if self._stopping:
                    return
                self._has_items.clear()
                await self._has_items.wait()
                continue
            await self._wait_for_batch()
            batch = self._take_batch()
            if not batch:
                continue
            k = max(item.k for item in batch)
            start = time.perf_counter()
            try:
                scores, ids = await loop.run_in_executor(self.executor, self.search_fn, [i.query for i in batch], k)
            except Exception as err:  # one bad batch must not kill the worker: its requests get the error
                logger.exception("search failed for a batch of %d queries", len(batch))
                for item in batch:
                    if not item.future.done():
                        item.future.set_exception(err)
                continue
            elapsed = time.perf_counter() - start
            self._batch_seconds = 0.8 * self._batch_seconds + 0.2 * elapsed
            if self.metrics is not None:
                self.metrics.observe_batch(len(batch), elapsed)
            for j, item in enumerate(batch):
                if not item.future.done():
                    item.future.set_result((scores[j, : item.k], ids[j, : item.k]))
