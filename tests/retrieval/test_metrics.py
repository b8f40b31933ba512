"""/metrics of a service with several HTTP fronts sums every front's counters, whichever front answers."""

from __future__ import annotations

import re
from pathlib import Path

from mr_search_retrieval.metrics import Metrics, SharedMetrics, merge_snapshots


def _value(text: str, name: str) -> float:
    match = re.search(rf"^{re.escape(name)} (\S+)$", text, flags=re.MULTILINE)
    assert match, f"{name} not in the metrics"
    return float(match.group(1))


def test_one_front_renders_what_it_observed() -> None:
    metrics = Metrics(queue_depth=lambda: 3)
    metrics.observe_request(200, 4, 0.004)
    metrics.observe_request(429, 1, 0.001)
    metrics.observe_batch(4, 0.003)
    text = metrics.render()
    assert _value(text, 'mr_search_retrieval_requests_total{status="200"}') == 1
    assert _value(text, 'mr_search_retrieval_requests_total{status="429"}') == 1
    assert _value(text, "mr_search_retrieval_queries_total") == 4  # only answered queries count
    assert _value(text, "mr_search_retrieval_queue_depth") == 3
    assert _value(text, 'mr_search_retrieval_request_latency_seconds_bucket{le="0.005"}') == 2
    assert _value(text, "mr_search_retrieval_request_latency_seconds_sum") == 0.005
    assert metrics.render(metrics.snapshot()) == text


def test_every_front_answers_with_the_sum_of_all_fronts(tmp_path: Path) -> None:
    fronts = [Metrics(queue_depth=lambda i=i: i) for i in range(3)]
    shared = [SharedMetrics(m, tmp_path, i) for i, m in enumerate(fronts)]
    for i, metrics in enumerate(fronts):
        for _ in range(i + 1):  # 1, 2 and 3 requests
            metrics.observe_request(200, 2, 0.02)
        metrics.observe_batch(2 * (i + 1), 0.01)
        shared[i].publish()
    fronts[0].observe_request(500, 1, 0.2)  # not published yet: front 0 renders it, the others see it a second later
    own = shared[0].render()
    assert _value(own, 'mr_search_retrieval_requests_total{status="200"}') == 6
    assert _value(own, 'mr_search_retrieval_requests_total{status="500"}') == 1
    assert _value(own, "mr_search_retrieval_queries_total") == 12
    assert _value(own, "mr_search_retrieval_batches_total") == 3
    assert _value(own, "mr_search_retrieval_queue_depth") == 0 + 1 + 2
    assert _value(own, 'mr_search_retrieval_request_latency_seconds_bucket{le="0.025"}') == 6
    assert _value(own, 'mr_search_retrieval_request_latency_seconds_bucket{le="+Inf"}') == 7
    assert _value(own, "mr_search_retrieval_batch_size_count") == 3
    # Front 0 published while rendering: the others now agree with it.
    assert shared[2].render() == shared[1].render() == own
    # A front's file that cannot be read (a front gone mid-write) is left out, not an error.
    (tmp_path / "front-9.json").write_text("{not json")
    assert shared[1].render() == own


def test_merging_nothing_but_one_snapshot_is_that_snapshot() -> None:
    metrics = Metrics()
    metrics.observe_request(200, 1, 0.5)
    assert merge_snapshots([metrics.snapshot()]) == metrics.snapshot()


def test_a_front_whose_folder_is_gone_still_answers_with_its_own_counters(tmp_path: Path) -> None:
    metrics = Metrics()
    metrics.observe_request(200, 1, 0.01)
    shared = SharedMetrics(metrics, tmp_path / "removed", 0)
    assert shared.render() == metrics.render()
