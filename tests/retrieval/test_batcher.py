"""The micro-batcher coalesces concurrent requests into one search, keeps answers in order, and bounds its queue."""

from __future__ import annotations

import asyncio
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest

from mr_search_retrieval.batcher import MicroBatcher, QueueFullError
from mr_search_retrieval.config import BatcherConfig
from mr_search_retrieval.metrics import Metrics


class RecordingSearch:
    """search_fn fake: row id = the number in the query text; records batch sizes and the thread it runs on."""

    def __init__(self, delay: float = 0.0, fail_on: str | None = None) -> None:
        self.batches: list[list[str]] = []
        self.threads: set[str] = set()
        self.delay, self.fail_on = delay, fail_on

    def __call__(self, queries: list[str], k: int) -> tuple[np.ndarray, np.ndarray]:
        self.batches.append(list(queries))
        self.threads.add(threading.current_thread().name)
        if self.fail_on in queries:
            raise RuntimeError(f"cannot search {self.fail_on!r}")
        time.sleep(self.delay)
        ids = np.array([[int(q.split()[-1]) + j for j in range(k)] for q in queries], dtype=np.int64)
        return -ids.astype(np.float32), ids


async def test_concurrent_requests_share_one_batch_and_get_their_own_answers() -> None:
    search = RecordingSearch()
    metrics = Metrics()
    executor = ThreadPoolExecutor(1, thread_name_prefix="model")
    batcher = MicroBatcher(search, BatcherConfig(max_batch_size=64, max_wait_ms=50), executor, metrics)
    batcher.start()
    results = await asyncio.gather(*(batcher.submit([f"q {i}"], k=1 + i % 3) for i in range(40)))
    await batcher.stop()
    assert len(search.batches) == 1 and len(search.batches[0]) == 40  # one encode+search for all 40
    for i, [(_, ids)] in enumerate(results):
        assert ids.tolist() == [i + j for j in range(1 + i % 3)]  # own topk, own rows
    assert search.threads == {"model_0"}  # model calls run off the event loop, in the one executor
    assert metrics.batch_size.n == 1 and "mr_search_retrieval_batch_size_count 1" in metrics.render()


async def test_batches_never_exceed_max_batch_size_and_multi_query_requests_stay_ordered() -> None:
    search = RecordingSearch(delay=0.01)
    batcher = MicroBatcher(search, BatcherConfig(max_batch_size=8, max_wait_ms=5))
    batcher.start()
    results = await asyncio.gather(*(batcher.submit([f"q {10 * r + j}" for j in range(5)], 1) for r in range(6)))
    await batcher.stop()
    assert max(len(b) for b in search.batches) <= 8
    assert sum(len(b) for b in search.batches) == 30
    for r, hits in enumerate(results):
        assert [int(ids[0]) for _, ids in hits] == [10 * r + j for j in range(5)]


async def test_full_queue_refuses_with_retry_after_and_recovers() -> None:
    search = RecordingSearch(delay=0.2)
    batcher = MicroBatcher(search, BatcherConfig(max_batch_size=2, max_wait_ms=0, queue_size=4))
    batcher.start()
    first = asyncio.ensure_future(batcher.submit(["q 1", "q 2", "q 3", "q 4"], 1))
    await asyncio.sleep(0)
    with pytest.raises(QueueFullError, match="capacity 4") as err:
        await batcher.submit(["q 5"], 1)
    assert err.value.retry_after >= 1
    assert len(await first) == 4
    assert [int(ids[0]) for _, ids in await batcher.submit(["q 6"], 1)] == [6]  # accepted again once drained
    await batcher.stop()


async def test_a_failing_batch_fails_its_requests_but_not_the_worker() -> None:
    search = RecordingSearch(fail_on="q 13")
    batcher = MicroBatcher(search, BatcherConfig(max_wait_ms=0))
    batcher.start()
    with pytest.raises(RuntimeError, match="cannot search 'q 13'"):
        await batcher.submit(["q 13"], 1)
    assert int((await batcher.submit(["q 2"], 1))[0][1][0]) == 2
    await batcher.stop()


async def test_stop_answers_queued_queries_before_ending() -> None:
    search = RecordingSearch(delay=0.05)
    batcher = MicroBatcher(search, BatcherConfig(max_batch_size=1, max_wait_ms=0))
    batcher.start()
    pending = [asyncio.ensure_future(batcher.submit([f"q {i}"], 1)) for i in range(4)]
    await asyncio.sleep(0.01)
    await batcher.stop()
    assert [int(hits[0][1][0]) for hits in await asyncio.gather(*pending)] == [0, 1, 2, 3]
    with pytest.raises(RuntimeError, match="not running"):
        await batcher.submit(["q 9"], 1)


class ConcurrencyProbe(RecordingSearch):
    """RecordingSearch that also records how many calls ran at the same time."""

    def __init__(self, delay: float) -> None:
        super().__init__(delay)
        self.lock, self.running, self.peak = threading.Lock(), 0, 0

    def __call__(self, queries: list[str], k: int) -> tuple[np.ndarray, np.ndarray]:
        with self.lock:
            self.running += 1
            self.peak = max(self.peak, self.running)
        try:
            return super().__call__(queries, k)
        finally:
            with self.lock:
                self.running -= 1


@pytest.mark.parametrize("lanes", [1, 2, 3])
async def test_lanes_compute_that_many_batches_at_once_and_answer_each_request(lanes: int) -> None:
    search = ConcurrencyProbe(delay=0.05)
    executor = ThreadPoolExecutor(lanes, thread_name_prefix="model")
    batcher = MicroBatcher(search, BatcherConfig(max_batch_size=4, max_wait_ms=0, lanes=lanes), executor)
    batcher.start()
    results = await asyncio.gather(*(batcher.submit([f"q {i}"], 1) for i in range(24)))
    assert [int(hits[0][1][0]) for hits in results] == list(range(24))
    assert search.peak == lanes  # never more batches at once than lanes, and all lanes get used
    assert max(len(b) for b in search.batches) <= 4 and sum(len(b) for b in search.batches) == 24
    # stop() with batches in flight on every lane: their queries and the queued ones are still answered
    pending = [asyncio.ensure_future(batcher.submit([f"q {100 + i}"], 1)) for i in range(4 * lanes + 2)]
    await asyncio.sleep(0.01)
    await batcher.stop()
    assert [int(hits[0][1][0]) for hits in await asyncio.gather(*pending)] == [100 + i for i in range(4 * lanes + 2)]
    executor.shutdown()


async def test_a_failing_batch_on_one_lane_leaves_the_other_lanes_serving() -> None:
    search = RecordingSearch(delay=0.02, fail_on="q 13")
    batcher = MicroBatcher(search, BatcherConfig(max_batch_size=1, max_wait_ms=0, lanes=2), ThreadPoolExecutor(2))
    batcher.start()
    bad, good = await asyncio.gather(batcher.submit(["q 13"], 1), batcher.submit(["q 7"], 1), return_exceptions=True)
    assert isinstance(bad, RuntimeError) and "cannot search 'q 13'" in str(bad)
    assert int(good[0][1][0]) == 7
    assert int((await batcher.submit(["q 2"], 1))[0][1][0]) == 2
    await batcher.stop()
