"""Service metrics in Prometheus text format (no client library needed): counters, a gauge, histograms."""

from __future__ import annotations

import bisect
import threading
from collections import defaultdict
from collections.abc import Callable, Sequence

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

    def render(self) -> list[str]:
        lines = [f"# HELP {self.name} {self.help}", f"# TYPE {self.name} histogram"]
        cumulative = 0
        for bound, count in zip(self.buckets, self.counts, strict=False):
            cumulative += count
            lines.append(f'{self.name}_bucket{{le="{bound}"}} {cumulative}')
        lines.append(f'{self.name}_bucket{{le="+Inf"}} {self.n}')
        lines += [f"{self.name}_sum {self.total}", f"{self.name}_count {self.n}"]
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

    def render(self) -> str:
        with self._lock:
            lines = [
                f"# HELP {PREFIX}_requests_total /retrieve requests by HTTP status.",
                f"# TYPE {PREFIX}_requests_total counter",
            ]
            lines += [f'{PREFIX}_requests_total{{status="{s}"}} {n}' for s, n in sorted(self.requests.items())]
            lines += [
                f"# HELP {PREFIX}_queries_total Queries answered.",
                f"# TYPE {PREFIX}_queries_total counter",
                f"{PREFIX}_queries_total {self.queries}",
                f"# HELP {PREFIX}_batches_total Encode+search batches run.",
                f"# TYPE {PREFIX}_batches_total counter",
                f"{PREFIX}_batches_total {self.batches}",
                f"# HELP {PREFIX}_queue_depth Queries waiting for a batch.",
                f"# TYPE {PREFIX}_queue_depth gauge",
                f"{PREFIX}_queue_depth {self.queue_depth()}",
            ]
            for hist in (self.latency, self.batch_size, self.batch_seconds):
                lines += hist.render()
        return "\n".join(lines) + "\n"
