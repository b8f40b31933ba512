"""The search worker with two batches in flight: they really overlap, replies reach the right fronts, gathering."""

from __future__ import annotations

import multiprocessing as mp
import threading
import time

import numpy as np
import pytest

from mr_search_retrieval.multiproc import FrontOptions
from mr_search_retrieval.search_worker import RemoteSearcher, auto_inflight, serve_batches


class MeetingSearcher:
    """Each batch waits (up to 5 s) until `meet` batches are inside search() at once: proves they overlap."""

    num_docs = 1000

    def __init__(self, meet: int) -> None:
        self.barrier = threading.Barrier(meet, timeout=5)
        self.batches: list[list[str]] = []
        self.lock = threading.Lock()

    def search(self, queries: list[str], k: int) -> tuple[np.ndarray, np.ndarray]:
        with self.lock:
            self.batches.append(list(queries))
        if self.barrier.parties > 1:
            self.barrier.wait()
        ids = np.array([[int(q.split()[-1]) + j for j in range(k)] for q in queries], dtype=np.int64)
        return -ids.astype(np.float32), ids


def _start(searcher: object, n: int, inflight: int, gather_s: float = 0.0, hold_s: float = 0.0):
    pipes = [mp.Pipe(duplex=True) for _ in range(n)]
    worker = threading.Thread(target=serve_batches, args=(searcher, [w for w, _ in pipes], inflight, gather_s, hold_s))
    worker.start()
    return worker, [RemoteSearcher(front, 1000) for _, front in pipes], [front for _, front in pipes]


def test_two_batches_in_flight_overlap_and_each_front_gets_its_own_rows() -> None:
    searcher = MeetingSearcher(meet=2)
    worker, remotes, fronts = _start(searcher, 2, inflight=2)
    results: dict[int, object] = {}

    def ask(i: int) -> None:
        results[i] = remotes[i].search([f"q {10 * i}", f"q {10 * i + 1}"], 2)

    first = threading.Thread(target=ask, args=(0,))
    first.start()
    time.sleep(0.3)  # front 0's batch is computing (waiting for company) before front 1 sends
    ask(1)  # would time out the barrier if the worker computed one batch at a time
    first.join(10)
    assert len(searcher.batches) == 2  # two separate batches, computing at the same time
    assert results[0][1].tolist() == [[0, 1], [1, 2]]
    assert results[1][1].tolist() == [[10, 11], [11, 12]]
    for f in fronts:
        f.close()
    worker.join(10)
    assert not worker.is_alive()


def test_the_worker_waits_for_the_other_fronts_but_goes_as_soon_as_all_have_sent() -> None:
    searcher = MeetingSearcher(meet=1)
    worker, _, fronts = _start(searcher, 3, inflight=1, gather_s=30.0)  # a window far longer than the test
    fronts[0].send((["q 1"], 1))
    time.sleep(0.2)
    fronts[1].send((["q 2"], 1))
    time.sleep(0.1)
    fronts[2].send((["q 3"], 1))
    assert all(f.poll(10) for f in fronts), "the merged batch must not wait out the window once every front sent"
    assert [f.recv()[1][1].tolist() for f in fronts] == [[[1]], [[2]], [[3]]]
    assert searcher.batches == [["q 1", "q 2", "q 3"]]  # one encode+search for the three fronts
    for f in fronts:
        f.close()
    worker.join(10)


def test_while_a_batch_is_in_flight_the_idle_fronts_are_merged_into_the_next() -> None:
    searcher = MeetingSearcher(meet=1)
    release = threading.Event()
    plain_search = searcher.search

    def slow_first(queries: list[str], k: int):
        if queries == ["q 0"]:
            release.wait(5)  # batch 1 stays in flight while fronts 1 and 2 send
        return plain_search(queries, k)

    searcher.search = slow_first  # type: ignore[method-assign]
    worker, remotes, fronts = _start(searcher, 3, inflight=2, gather_s=0.3)
    t0 = threading.Thread(target=remotes[0].search, args=(["q 0"], 1))
    t0.start()
    time.sleep(0.6)  # batch 1 (front 0 alone: the others sent nothing within the window) is computing
    fronts[1].send((["q 5"], 1))
    time.sleep(0.05)  # within the gather window of the second batch
    fronts[2].send((["q 7"], 1))
    assert fronts[1].recv()[1][1].tolist() == [[5]] and fronts[2].recv()[1][1].tolist() == [[7]]
    assert not release.is_set()  # answered while batch 1 is still in flight
    release.set()
    t0.join(10)
    assert sorted(searcher.batches) == [["q 0"], ["q 5", "q 7"]]  # fronts 1 and 2 merged (q 0 is recorded last)
    for f in fronts:
        f.close()
    worker.join(10)


def _slow_on(searcher: MeetingSearcher, query: str, release: threading.Event) -> None:
    """The batch holding `query` stays in flight until `release` is set."""
    plain_search = searcher.search

    def search(queries: list[str], k: int):
        if query in queries:
            release.wait(5)
        return plain_search(queries, k)

    searcher.search = search  # type: ignore[method-assign]


@pytest.mark.parametrize("hold_s", [10.0, 0.3])
def test_while_a_batch_computes_the_next_is_held_until_it_is_done_at_most_hold_s(hold_s: float) -> None:
    searcher, release = MeetingSearcher(meet=1), threading.Event()
    _slow_on(searcher, "q 0", release)
    worker, remotes, fronts = _start(searcher, 3, inflight=2, gather_s=0.05, hold_s=hold_s)
    t0 = threading.Thread(target=remotes[0].search, args=(["q 0"], 1))
    t0.start()
    time.sleep(0.2)  # batch 1 (front 0) is computing
    fronts[1].send((["q 5"], 1))
    time.sleep(0.15)  # past the gather window: without holding, q 5 would have gone alone
    fronts[2].send((["q 7"], 1))
    if hold_s > 1:  # held while batch 1 computes; dispatched, merged, as soon as it is done
        assert not fronts[1].poll(0.3)
        release.set()
    answers = [fronts[1].recv()[1][1].tolist(), fronts[2].recv()[1][1].tolist()]
    assert answers == [[[5]], [[7]]]
    assert release.is_set() == (hold_s > 1)  # a short hold ends at hold_s with batch 1 still in flight
    release.set()
    t0.join(10)
    assert sorted(searcher.batches) == [["q 0"], ["q 5", "q 7"]]  # one pass for fronts 1 and 2
    for f in fronts:
        f.close()
    worker.join(10)


def test_worker_options_reject_bad_values() -> None:
    with pytest.raises(ValueError, match="worker_inflight must be >= 0"):
        FrontOptions(worker_inflight=-1)
    assert FrontOptions().worker_inflight == 0  # auto: 2 batches at once on a GPU, 1 elsewhere
    assert (auto_inflight(True), auto_inflight(False)) == (2, 1)
    with pytest.raises(ValueError, match="worker_gather_ms must be >= 0"):
        FrontOptions(worker_gather_ms=-1)
    with pytest.raises(ValueError, match="inflight must be >= 1"):
        serve_batches(MeetingSearcher(1), [], inflight=0)
    with pytest.raises(ValueError, match="worker_hold_ms must be >= 0"):
        FrontOptions(worker_hold_ms=-1)
    with pytest.raises(ValueError, match="hold_s >= 0"):
        serve_batches(MeetingSearcher(1), [], hold_s=-1)


def test_a_front_freed_by_a_finished_batch_is_heard_while_the_other_front_stays_silent() -> None:
    # With a batch in flight the worker listens to the idle fronts only; when that batch is answered its front must
    # join the listening at once, even if the front the worker was listening to never sends (this hung before).
    class SlowFirst(MeetingSearcher):
        def search(self, queries: list[str], k: int) -> tuple[np.ndarray, np.ndarray]:
            if not self.batches:
                time.sleep(0.3)  # the worker goes back to listening (to front 1) while this batch computes
            return super().search(queries, k)

    searcher = SlowFirst(meet=1)
    worker, remotes, fronts = _start(searcher, 2, inflight=2)
    try:
        assert remotes[0].search(["q 1"], 1)[1].tolist() == [[1]]
        done = threading.Event()
        answer: list[object] = []

        def again() -> None:
            answer.append(remotes[0].search(["q 7"], 1))
            done.set()

        threading.Thread(target=again, daemon=True).start()
        assert done.wait(5), "front 0's second batch was never answered while front 1 stayed silent"
        assert answer[0][1].tolist() == [[7]]
    finally:
        for f in fronts:
            f.close()
        worker.join(10)
    assert not worker.is_alive()
