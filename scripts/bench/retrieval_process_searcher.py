"""What-if: the encoder and index in their own process, so torch's Python dispatch never shares a GIL with the
event loop. `ProcessSearcher` is a plain Searcher for create_app's loader: search() ships the query strings to a
spawned GPU worker over a pipe and blocks (GIL released) until the scores and row ids come back.
"""

from __future__ import annotations

import contextlib
import logging
import multiprocessing as mp
import threading
from dataclasses import dataclass
from multiprocessing.connection import Connection

import numpy as np

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class WorkerSpec:
    """What the worker builds: the same encoder directory and the same seeded random index as the parent."""

    encoder_dir: str
    device: str
    num_passages: int
    dim: int
    grouped_topk: bool = False
    max_length: int = 256


def _worker(spec: WorkerSpec, conn: Connection) -> None:
    import torch
    from retrieval_grouped_topk import GroupedTopkIndex

    from mr_search_retrieval.config import EncoderConfig
    from mr_search_retrieval.encoders import HFEncoder
    from mr_search_retrieval.indexes.torch_exact import TorchExactIndex
    from mr_search_retrieval.retriever import DenseSearcher

    dtype = torch.float16 if spec.device == "cuda" else torch.float32
    index = TorchExactIndex.from_random(spec.num_passages, spec.dim, device=spec.device, dtype=dtype)
    if spec.grouped_topk:
        index = GroupedTopkIndex.sharing(index)
    encoder = HFEncoder(EncoderConfig(model_dir=spec.encoder_dir, device=spec.device, max_length=spec.max_length))
    searcher = DenseSearcher(encoder, index)
    searcher.search(["warm up"], 1)
    conn.send(("ready", searcher.num_docs))
    while True:
        msg = conn.recv()
        if msg[0] == "stop":
            break
        try:
            conn.send(("ok", searcher.search(msg[1], msg[2])))
        except Exception as err:  # the parent raises it in the service's model thread
            conn.send(("error", f"{type(err).__name__}: {err}"))
    conn.close()


class ProcessSearcher:
    """A Searcher whose work runs in a spawned worker process (one batch at a time)."""

    def __init__(self, spec: WorkerSpec, start_timeout: float = 600) -> None:
        ctx = mp.get_context("spawn")
        self._conn, child = ctx.Pipe()
        self._proc = ctx.Process(target=_worker, args=(spec, child), name="gpu-searcher", daemon=True)
        self._proc.start()
        child.close()
        self._lock = threading.Lock()
        if not self._conn.poll(start_timeout):
            self.close()
            raise RuntimeError(f"the searcher process did not get ready within {start_timeout}s")
        status, self.num_docs = self._conn.recv()
        if status != "ready":
            raise RuntimeError(f"the searcher process failed to start: {status}")

    def search(self, queries: list[str], k: int) -> tuple[np.ndarray, np.ndarray]:
        with self._lock:
            self._conn.send(("search", list(queries), k))
            status, payload = self._conn.recv()
        if status != "ok":
            raise RuntimeError(f"searcher process: {payload}")
        return payload

    def close(self) -> None:
        if self._proc.is_alive():
            with contextlib.suppress(BrokenPipeError, OSError):
                self._conn.send(("stop",))
            self._proc.join(60)
            if self._proc.is_alive():
                self._proc.terminate()
                self._proc.join(10)
        self._conn.close()
