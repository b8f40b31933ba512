"""The service's multi-process mode (`--http-workers N`) under load: one search worker + N HTTP fronts.

The search worker is spawned by the service's own `serve_multiprocess` and builds its encoder and the
same seeded random index as the benchmark's parent process (RandomIndexLoader); the fronts read the
synthetic corpus. Driven by the same closed-loop client processes as the in-process service rows.
"""

from __future__ import annotations

import argparse
import itertools
import logging
import os
import subprocess
import threading
import time
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from retrieval_gpu_serving import check_consistency, drive, free_port

from mr_search_retrieval.config import BatcherConfig, EncoderConfig, ServerConfig
from mr_search_retrieval.corpus import CorpusStore
from mr_search_retrieval.multiproc import FrontOptions, serve_multiprocess

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class RandomIndexLoader:
    """Picklable loader run in the search worker: the encoder directory and seeded random index of the parent."""

    encoder_dir: str
    device: str
    num_passages: int
    dim: int
    max_length: int = 256

    def __call__(self, config: ServerConfig) -> tuple[Any, CorpusStore]:
        import torch

        from mr_search_retrieval.encoders import HFEncoder
        from mr_search_retrieval.indexes.torch_exact import TorchExactIndex
        from mr_search_retrieval.retriever import DenseSearcher

        encoder = HFEncoder(EncoderConfig(model_dir=self.encoder_dir, device=self.device, max_length=self.max_length))
        dtype = torch.float16 if self.device == "cuda" else torch.float32
        index = TorchExactIndex.from_random(self.num_passages, self.dim, device=self.device, dtype=dtype)
        return DenseSearcher(encoder, index), CorpusStore(config.corpus)


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
        self, config: ServerConfig, loader: RandomIndexLoader, fronts: int, inflight: int = 2, gather_ms: float = 1.0
    ) -> None:
        self.url = f"http://127.0.0.1:{config.port}"
        self.loop_thread_id = None
        self._stop = threading.Event()
        self._status: list[int] = []
        # On a CPU smoke run the worker shares 2 cores with the fronts: one intra-op thread avoids OpenMP thrash.
        self.options = FrontOptions(
            log_level="warning",
            torch_threads=1 if loader.device == "cpu" else 0,
            worker_inflight=inflight,
            worker_gather_ms=gather_ms,
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
        import json

        req = urllib.request.Request(
            f"{self.url}/retrieve", data=json.dumps(payload).encode(), headers={"content-type": "application/json"}
        )
        with urllib.request.urlopen(req, timeout=120) as resp:
            return json.loads(resp.read())

    def batch_stats(self) -> tuple[int, float, float]:
        return (0, 0.0, 0.0)  # /metrics is per front process; no single batch histogram to read

    @staticmethod
    def cpu_seconds() -> float:
        return _spawned_children_cpu()


def serve_multiproc_points(
    loader: RandomIndexLoader,
    corpus: Path,
    args: argparse.Namespace,
    expected: tuple[list[str], np.ndarray],
) -> list[dict[str, Any]]:
    """For each front count: start the service once, check its documents, drive it at each concurrency."""
    rows = []
    queue = max(4096, 2 * max(args.multiproc_concurrency))
    for fronts, inflight in itertools.product(args.http_workers, args.worker_inflight):
        config = ServerConfig(
            index_dir="<random index in the search worker>",
            corpus=str(corpus),
            batcher=BatcherConfig(args.multiproc_max_batch_size, args.max_wait_ms, queue),
            port=free_port(),
            http_workers=fronts,
        )
        label = f"multiproc_{fronts}_fronts_inflight{inflight}"
        with MultiProcServed(config, loader, fronts, inflight, args.worker_gather_ms) as served:
            check = check_consistency(served, lambda _q, _k: (None, expected[1]), expected[0], args.topk)  # type: ignore[arg-type]
            memory = _gpu_memory_used() if loader.device == "cuda" else None
            for conc in args.multiproc_concurrency:
                row = drive(served, conc, args.client_procs, args.duration, args.warmup, args.topk, 1)
                row.update(searcher=label, max_batch_size=args.multiproc_max_batch_size, consistent=check["same_ids"])
                row.update(worker_inflight=inflight, http_fronts=fronts, gpu_memory_used=memory)
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
