"""The service's multi-process mode (`--http-workers N`) under load: one search worker + N HTTP fronts.

The search worker is spawned by the service's own `serve_multiprocess` and builds its encoder and the
same seeded random index as the benchmark's parent process (RandomIndexLoader); the fronts read the
synthetic corpus. Driven by the same closed-loop client processes as the in-process service rows.
"""

from __future__ import annotations

import argparse
import itertools
import json
import logging
import os
import subprocess
import threading
import time
import urllib.request
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np
from retrieval_gpu_serving import check_consistency, drive, free_port, post_retrieve

from mr_search_retrieval.config import BatcherConfig, EncoderConfig, ServerConfig
from mr_search_retrieval.corpus import CorpusStore
from mr_search_retrieval.multiproc import FrontOptions, serve_multiprocess

logger = logging.getLogger(__name__)


class TimedSearcher:
    """In the search worker: the service's DenseSearcher, timing each merged batch (encode and index apart) and
    sampling the stacks of the threads that run batches; all of it written as JSON to `path` every 0.25 s."""

    def __init__(self, inner: Any, path: str, profile: bool = False) -> None:
        self.inner, self.path, self.num_docs, self.profile = inner, Path(path), inner.num_docs, profile
        self.lock = threading.Lock()
        self.stats = {"batches": 0, "queries": 0, "batch_s": 0.0, "encode_s": 0.0, "index_s": 0.0, "max_batch": 0}
        self.samplers: dict[int, Any] = {}
        self._written = 0.0
        self.encoder, self.index = inner.encoder, inner.index  # stream_worker.front_tokenizer looks at them
        for owner, name, key in ((inner.encoder, "encode_queries", "encode_s"), (inner.index, "search", "index_s")):
            setattr(owner, name, self._timed(getattr(owner, name), key))
        if hasattr(inner.encoder, "embed_tokens"):  # the streamed protocol's token path: host time of the encode
            inner.encoder.embed_tokens = self._timed(self._gpu_timed(inner.encoder.embed_tokens, 0), "encode_s")
            inner.index.search_tensor = self._gpu_timed(inner.index.search_tensor, 1)
        if hasattr(inner, "search_tokens"):
            self.search_tokens = self._search_tokens
        self._events: list[Any] = []
        self._launch_t0 = 0.0
        self._last_end = 0.0

    def _timed(self, fn: Any, key: str) -> Any:
        def timed(*a: Any) -> Any:
            t0 = time.perf_counter()
            try:
                return fn(*a)
            finally:
                with self.lock:
                    self.stats[key] += time.perf_counter() - t0

        return timed

    def _gpu_timed(self, fn: Any, step: int) -> Any:
        """CUDA events around the token path's two launches (step 0: encoder, 1: index): GPU-side spans per batch."""
        import torch

        if not torch.cuda.is_available():
            return fn

        def timed(*a: Any) -> Any:
            if step == 0:
                self._events = [torch.cuda.Event(enable_timing=True)]
                self._events[0].record()
                self._launch_t0 = time.perf_counter()
            out = fn(*a)
            if len(self._events) == step + 1:
                self._events.append(torch.cuda.Event(enable_timing=True))
                self._events[-1].record()
            if step == 1:
                self.stats["launch_s"] = self.stats.get("launch_s", 0.0) + time.perf_counter() - self._launch_t0
            return out

        return timed

    def _search_tokens(self, batch: dict[str, Any], k: int) -> Any:
        """The token path: encode_s is the embed_tokens call (host side: it does not wait for the GPU), index_s the
        rest (search launch and the wait for encoder and index kernels). With CUDA also the GPU-side spans of the
        encoder and the index (events), the host time to launch both, and the worker's gap between batches."""
        encode_before = self.stats["encode_s"]  # one GPU thread calls this: no other batch counts meanwhile
        t0 = time.perf_counter()
        out = self.inner.search_tokens(batch, k)
        with self.lock:
            self.stats["index_s"] += time.perf_counter() - t0 - (self.stats["encode_s"] - encode_before)
            if len(self._events) == 3:
                ev = self._events
                self.stats["gpu_encode_s"] = self.stats.get("gpu_encode_s", 0.0) + ev[0].elapsed_time(ev[1]) / 1000
                self.stats["gpu_index_s"] = self.stats.get("gpu_index_s", 0.0) + ev[1].elapsed_time(ev[2]) / 1000
            if self._last_end:
                self.stats["gap_s"] = self.stats.get("gap_s", 0.0) + t0 - self._last_end
        self._count(len(batch["attention_mask"]), t0)
        self._last_end = time.perf_counter()
        return out

    def search(self, queries: list[str], k: int) -> Any:
        t0 = time.perf_counter()
        out = self.inner.search(queries, k)
        self._count(len(queries), t0)
        return out

    def _count(self, n: int, t0: float) -> None:
        from retrieval_gpu_serving import StackSampler

        tid = threading.get_ident()
        if self.profile and tid not in self.samplers:  # the sampler takes the GIL every 2 ms: opt-in
            self.samplers[tid] = StackSampler(tid, interval=0.002)
            self.samplers[tid].start()
        with self.lock:
            st = self.stats
            st["batches"] += 1
            st["queries"] += n
            st["batch_s"] += time.perf_counter() - t0
            st["max_batch"] = max(st["max_batch"], n)
            if time.monotonic() - self._written > 0.25:
                self._written = time.monotonic()
                self._write()

    def _write(self) -> None:
        profiles = {}
        for tid, smp in self.samplers.items():
            n = max(1, smp.samples)
            profiles[str(tid)] = {
                "samples": smp.samples,
                "own": [(k, c / n) for k, c in smp.own.most_common(12)],
                "inclusive": [(k, c / n) for k, c in smp.inclusive.most_common(25)],
            }
        tmp = self.path.with_suffix(".tmp")
        tmp.write_text(json.dumps({**self.stats, "profiles": profiles}))
        tmp.replace(self.path)


@dataclass(frozen=True)
class RandomIndexLoader:
    """Picklable loader run in the search worker: the encoder directory and seeded random index of the parent."""

    encoder_dir: str
    device: str
    num_passages: int
    dim: int
    max_length: int = 256
    stats_path: str | None = None  # when set: the searcher is a TimedSearcher writing its stats there
    profile: bool = False  # TimedSearcher also samples the stacks of its batch threads
    cuda_graphs: bool = True  # the service's default encoder on CUDA (graph replay); False: eager

    def __call__(self, config: ServerConfig) -> tuple[Any, CorpusStore]:
        import torch

        from mr_search_retrieval.graph_encoder import make_encoder
        from mr_search_retrieval.indexes.torch_exact import TorchExactIndex
        from mr_search_retrieval.retriever import DenseSearcher

        encoder = make_encoder(
            EncoderConfig(
                model_dir=self.encoder_dir, device=self.device, max_length=self.max_length, cuda_graphs=self.cuda_graphs
            )
        )
        dtype = torch.float16 if self.device == "cuda" else torch.float32
        index = TorchExactIndex.from_random(self.num_passages, self.dim, device=self.device, dtype=dtype)
        searcher: Any = DenseSearcher(encoder, index)
        if self.stats_path:
            searcher = TimedSearcher(searcher, self.stats_path, self.profile)
        return searcher, CorpusStore(config.corpus)


def read_worker_stats(path: str | None) -> dict[str, Any]:
    if not path:
        return {}
    try:
        return json.loads(Path(path).read_text())
    except (OSError, ValueError):
        return {}


def _window(before: dict[str, Any], after: dict[str, Any]) -> dict[str, float]:
    """Per merged batch between two stats snapshots (about one load point, warm-up included): ms and queries."""
    n = after.get("batches", 0) - before.get("batches", 0)
    if n <= 0:
        return {}
    keys = ("encode_s", "index_s", "batch_s", "queries", "gpu_encode_s", "gpu_index_s", "launch_s", "gap_s")
    per = {key: (after.get(key, 0) - before.get(key, 0)) / n for key in keys}
    out = {
        "batches": n,
        "queries_per_batch": per["queries"],
        "encode_ms": 1000 * per["encode_s"],
        "index_ms": 1000 * per["index_s"],
        "batch_ms": 1000 * per["batch_s"],
    }
    if "gpu_index_s" in after:  # the streamed token path on CUDA: GPU spans, host launch time, gap between batches
        out.update({f"{key[:-2]}_ms": 1000 * per[key] for key in ("gpu_encode_s", "gpu_index_s", "launch_s", "gap_s")})
    return out


def _spawned_children_cpu() -> float:
    """CPU seconds of this process's spawned multiprocessing children (search worker and fronts), from /proc."""
    total, me, tick = 0.0, os.getpid(), os.sysconf("SC_CLK_TCK")
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            cmdline = (entry / "cmdline").read_bytes()
        except OSError:
            continue
        fields = stat[stat.rindex(")") + 2 :].split()
        if int(fields[1]) == me and b"spawn_main" in cmdline:
            total += (int(fields[11]) + int(fields[12])) / tick
    return total


def _gpu_memory_used() -> str:
    """nvidia-smi's used/total memory of the card while the service (its search worker) holds the index."""
    try:
        return subprocess.run(
            ["nvidia-smi", "--query-gpu=memory.used,memory.total", "--format=csv,noheader"],
            capture_output=True,
            text=True,
            timeout=30,
            check=True,
        ).stdout.strip()
    except (OSError, subprocess.SubprocessError) as err:
        return f"unavailable: {err}"


class MultiProcServed:
    """`serve_multiprocess` in a background thread of this process (its worker and fronts are processes)."""

    def __init__(
        self,
        config: ServerConfig,
        loader: RandomIndexLoader,
        fronts: int,
        gather_ms: float = 1.0,
        torch_threads: int = 0,
        front_lanes: int = 8,
        tile: int = 128,
    ) -> None:
        self.url = f"http://127.0.0.1:{config.port}"
        self.loop_thread_id = None
        self._stop = threading.Event()
        self._status: list[int] = []
        # On a CPU smoke run the worker shares 2 cores with the fronts: one intra-op thread avoids OpenMP thrash.
        self.stats_path = loader.stats_path
        self.options = FrontOptions(
            log_level="warning",
            torch_threads=torch_threads or (1 if loader.device == "cpu" else 0),
            worker_gather_ms=gather_ms,
            front_lanes=front_lanes,
            worker_tile=tile,
        )
        self.thread = threading.Thread(target=self._serve, args=(config, loader, fronts), daemon=True)

    def _serve(self, config: ServerConfig, loader: RandomIndexLoader, fronts: int) -> None:
        self._status.append(serve_multiprocess(config, fronts, loader, self.options, False, self._stop.is_set))

    def __enter__(self) -> MultiProcServed:
        self.thread.start()
        deadline = time.monotonic() + 900
        while True:
            if not self.thread.is_alive():
                raise RuntimeError(f"the multi-process service exited with {self._status}; see the log above")
            try:
                with urllib.request.urlopen(f"{self.url}/health", timeout=2) as r:
                    if r.status == 200:
                        time.sleep(3)  # the other fronts finish their startup too
                        return self
            except OSError:
                pass
            if time.monotonic() > deadline:
                raise RuntimeError("the multi-process service did not become ready within 900 s")
            time.sleep(0.5)

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self.thread.join(timeout=180)

    def post(self, payload: dict) -> dict:
        return post_retrieve(self.url, payload)

    def batch_stats(self) -> tuple[int, float, float]:
        """(merged batches, queries, seconds computing) of the search worker so far, from its stats file."""
        st = read_worker_stats(self.stats_path)
        return (st.get("batches", 0), float(st.get("queries", 0)), st.get("batch_s", 0.0))

    @staticmethod
    def cpu_seconds() -> float:
        return _spawned_children_cpu()


def serve_multiproc_points(
    loader: RandomIndexLoader,
    corpus: Path,
    args: argparse.Namespace,
    expected: tuple[list[str], np.ndarray] | None,
    stats_dir: Path | None = None,
) -> list[dict[str, Any]]:
    """For each front count: start the service once, check its documents, drive it at each concurrency."""
    rows = []
    queue = max(4096, 2 * max(args.multiproc_concurrency))
    seen = set()
    for fronts, mode, lanes in itertools.product(args.http_workers, args.worker_encoders, args.front_lanes):
        if (fronts, mode, lanes) not in seen:
            seen.add((fronts, mode, lanes))
            rows += _serve_one(loader, corpus, args, expected, stats_dir, queue, (fronts, mode, lanes))
    return rows


def _serve_one(
    loader: RandomIndexLoader,
    corpus: Path,
    args: argparse.Namespace,
    expected: tuple[list[str], np.ndarray] | None,
    stats_dir: Path | None,
    queue: int,
    key: tuple[int, str, int],
) -> list[dict[str, Any]]:
    fronts, mode, lanes = key
    rows = []
    config = ServerConfig(
        index_dir="<random index in the search worker>",
        corpus=str(corpus),
        batcher=BatcherConfig(args.multiproc_max_batch_size, args.max_wait_ms, queue),
        port=free_port(),
        http_workers=fronts,
    )
    # The service's default encoder (graph replay on CUDA, eager elsewhere) is unmarked; `_eager` forces eager.
    label = f"multiproc_{fronts}_fronts_stream" + (f"_lanes{lanes}" if len(args.front_lanes) > 1 else "")
    label += "_eager" if mode == "eager" else ""
    run_loader = replace(loader, cuda_graphs=mode == "graphs")
    if stats_dir:
        run_loader = replace(run_loader, stats_path=str(stats_dir / f"{label}.json"))
    threads = args.worker_torch_threads
    served_as = MultiProcServed(config, run_loader, fronts, args.worker_gather_ms, threads, lanes, args.worker_tile)
    with served_as as served:
        if expected is not None:
            check = check_consistency(served, lambda _q, _k: (None, expected[1]), expected[0], args.topk)  # type: ignore[arg-type]
        memory = _gpu_memory_used() if loader.device == "cuda" else None
        for conc in args.multiproc_concurrency:
            before = read_worker_stats(run_loader.stats_path)
            row = drive(served, conc, args.client_procs, args.duration, args.warmup, args.topk, 1)
            row["worker_window"] = _window(before, read_worker_stats(run_loader.stats_path))
            consistent = check["same_ids"] if expected is not None else None
            row.update(searcher=label, max_batch_size=args.multiproc_max_batch_size, consistent=consistent)
            row.update(http_fronts=fronts, gpu_memory_used=memory, worker_encoder=mode)
            row.update(worker_mode="stream", front_lanes=lanes, worker_tile=args.worker_tile)
            stats = read_worker_stats(run_loader.stats_path)
            if stats:  # cumulative since the service started: encode vs index time, batch-thread stack samples
                row["worker_stats"] = stats
            logger.info(
                "%s c=%d: %.0f q/s p50 %.1f ms p99 %.1f ms",
                label,
                conc,
                row["queries_per_s"],
                row["p50_ms"] or -1,
                row["p99_ms"] or -1,
            )
            rows.append(row)
    return rows
