"""Service metrics in Prometheus text format (no client library needed): counters, a gauge, histograms.

With several HTTP front processes (``--http-workers``) each front keeps its own ``Metrics``; ``SharedMetrics``
publishes a front's snapshot to a folder the fronts share and answers ``/metrics`` with the sum over all of them
(the answering front's counters current, the others' as they last published, at most ``interval`` seconds old).
"""

from __future__ import annotations

import bisect
import contextlib
import json
import os
import threading
from collections import defaultdict
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any

PREFIX = "mr_search_retrieval"
LATENCY_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)
BATCH_BUCKETS = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024)


class Histogram:
    def __init__(self, name: str, help_text: str, buckets: Sequence[float]) -> None:
        self.name, self.help, self.buckets = name, help_text, tuple(buckets)
        self.counts = [0] * (len(self.buckets) + 1)
        self.total = 0.0
        self.n = 0

    def observe(self, value: float) -> None:
        self.counts[bisect.bisect_left(self.buckets, value)] += 1
        self.total += value
        self.n += 1

    def snapshot(self) -> dict[str, Any]:
        return {"counts": list(self.counts), "total": self.total, "n": self.n}

    def render(self, snapshot: dict[str, Any] | None = None) -> list[str]:
        """The histogram's lines, of ``snapshot`` (its ``snapshot()`` shape) where given, else of its own counts."""
        state = self.snapshot() if snapshot is None else snapshot
        lines = [f"# HELP {self.name} {self.help}", f"# TYPE {self.name} histogram"]
        cumulative = 0
        for bound, count in zip(self.buckets, state["counts"], strict=False):
            cumulative += count
            lines.append(f'{self.name}_bucket{{le="{bound}"}} {cumulative}')
        lines.append(f'{self.name}_bucket{{le="+Inf"}} {state["n"]}')
        lines += [f"{self.name}_sum {state['total']}", f"{self.name}_count {state['n']}"]
        return lines


class Metrics:
    """What /metrics reports. `queue_depth` is read live from the batcher through a callable."""

    def __init__(self, queue_depth: Callable[[], int] = lambda: 0) -> None:
        self._lock = threading.Lock()
        self.requests: dict[str, int] = defaultdict(int)  # by HTTP status code
        self.queries = 0
        self.batches = 0
        self.queue_depth = queue_depth
        self.latency = Histogram(f"{PREFIX}_request_latency_seconds", "Latency of /retrieve requests.", LATENCY_BUCKETS)
        self.batch_size = Histogram(f"{PREFIX}_batch_size", "Queries per encode+search batch.", BATCH_BUCKETS)
        self.batch_seconds = Histogram(f"{PREFIX}_batch_seconds", "Time of one encode+search batch.", LATENCY_BUCKETS)

    def observe_request(self, status: int, n_queries: int, seconds: float) -> None:
        with self._lock:
            self.requests[str(status)] += 1
            if status == 200:
                self.queries += n_queries
            self.latency.observe(seconds)

    def observe_batch(self, size: int, seconds: float) -> None:
        with self._lock:
            self.batches += 1
            self.batch_size.observe(size)
            self.batch_seconds.observe(seconds)

    def snapshot(self) -> dict[str, Any]:
        """Every counter, the queue depth now and the histograms, as plain JSON-able values."""
        with self._lock:
            return {
                "requests": dict(self.requests),
                "queries": self.queries,
                "batches": self.batches,
                "queue_depth": self.queue_depth(),
                **{key: hist.snapshot() for key, hist in self._histograms().items()},
            }

    def _histograms(self) -> dict[str, Histogram]:
        return {"latency": self.latency, "batch_size": self.batch_size, "batch_seconds": self.batch_seconds}

    def render(self, snapshot: dict[str, Any] | None = None) -> str:
        """Prometheus text of ``snapshot`` (``snapshot()``'s shape, e.g. ``merge_snapshots``'), else of this one."""
        state = self.snapshot() if snapshot is None else snapshot
        lines = [
            f"# HELP {PREFIX}_requests_total /retrieve requests by HTTP status.",
            f"# TYPE {PREFIX}_requests_total counter",
        ]
        lines += [f'{PREFIX}_requests_total{{status="{s}"}} {n}' for s, n in sorted(state["requests"].items())]
        lines += [
            f"# HELP {PREFIX}_queries_total Queries answered.",
            f"# TYPE {PREFIX}_queries_total counter",
            f"{PREFIX}_queries_total {state['queries']}",
            f"# HELP {PREFIX}_batches_total Encode+search batches run.",
            f"# TYPE {PREFIX}_batches_total counter",
            f"{PREFIX}_batches_total {state['batches']}",
            f"# HELP {PREFIX}_queue_depth Queries waiting for a batch.",
            f"# TYPE {PREFIX}_queue_depth gauge",
            f"{PREFIX}_queue_depth {state['queue_depth']}",
        ]
        for key, hist in self._histograms().items():
            lines += hist.render(state[key])
        return "\n".join(lines) + "\n"


def merge_snapshots(snapshots: Iterable[dict[str, Any]]) -> dict[str, Any]:
    """The sum of several fronts' ``Metrics.snapshot()``s (counters, queue depths, histogram buckets)."""
    merged: dict[str, Any] = {"requests": defaultdict(int), "queries": 0, "batches": 0, "queue_depth": 0}
    for snap in snapshots:
        for status, n in snap["requests"].items():
            merged["requests"][status] += n
        for key in ("queries", "batches", "queue_depth"):
            merged[key] += snap[key]
        for key in ("latency", "batch_size", "batch_seconds"):
            hist = merged.setdefault(key, {"counts": [0] * len(snap[key]["counts"]), "total": 0.0, "n": 0})
            hist["counts"] = [a + b for a, b in zip(hist["counts"], snap[key]["counts"], strict=True)]
            hist["total"] += snap[key]["total"]
            hist["n"] += snap[key]["n"]
    merged["requests"] = dict(merged["requests"])
    return merged


class SharedMetrics:
    """One front's ``Metrics`` shared with the other fronts of a service through ``directory``."""

    def __init__(self, metrics: Metrics, directory: str | Path, index: int, interval: float = 1.0) -> None:
        self.metrics, self.directory, self.index, self.interval = metrics, Path(directory), index, interval

    def publish(self) -> None:
        """Writes this front's snapshot (atomically: a reader sees the old one or the new one)."""
        self._write(self.metrics.snapshot())

    def _write(self, snapshot: dict[str, Any]) -> None:
        path = self.directory / f"front-{self.index}.json"
        tmp = path.with_suffix(f".tmp{os.getpid()}")
        tmp.write_text(json.dumps(snapshot))
        os.replace(tmp, path)

    def render(self) -> str:
        """The service's metrics: this front's now, every other front's as last published."""
        own = self.metrics.snapshot()
        snapshots = [own]
        with contextlib.suppress(OSError):  # the others then see a copy up to a publish interval old
            self._write(own)
        for path in sorted(self.directory.glob("front-*.json")):
            if path.name == f"front-{self.index}.json":
                continue
            try:
                snapshots.append(json.loads(path.read_text()))
            except (OSError, ValueError):  # a front that is gone, or (never: replace is atomic) a torn file
                continue
        return self.metrics.render(merge_snapshots(snapshots))
