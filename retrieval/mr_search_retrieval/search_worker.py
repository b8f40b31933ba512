"""The search-worker process of `--http-workers N`: it alone owns the encoder, the index and the GPU.

It loads the index (with the service's start-up checks), warms the search up, ships the HTTP fronts the query
tokenizer they should run (or None: they send strings), then serves the streamed protocol (stream_worker.py) until
every front has closed its connection.

On a GPU the worker runs torch with one intra-op CPU thread unless told otherwise: the GPU does the work, and spare
OpenMP threads only contend with the HTTP fronts. The tokenizer keeps its thread pool.

The earlier protocol (one batch in flight per front, up to two merged batches computing at once) was removed: the
streamed one served 1.23-1.47x its throughput on five H100s at 256 clients (README, Benchmarks), and no figure
needed it; on a CPU the single-process server with batch lanes is the default and the faster design.
"""

from __future__ import annotations

import logging
import signal
from collections.abc import Callable
from multiprocessing.connection import Connection
from typing import TYPE_CHECKING, Any

from mr_search_retrieval.config import ServerConfig

if TYPE_CHECKING:
    from mr_search_retrieval.corpus import CorpusStore
    from mr_search_retrieval.retriever import Searcher

logger = logging.getLogger(__name__)

Loader = Callable[[ServerConfig], "tuple[Searcher, CorpusStore]"]
# One batch per tile configuration of the two-stage search kernel (<= 16, <= 64, more queries; triton_block_max.py).
WARM_UP_BATCHES = (1, 32, 128)


class SearchWorkerError(RuntimeError):
    """The search worker could not answer a batch (its message says why) or is gone."""


def _serves_on_gpu(config: ServerConfig) -> bool:
    """A dense searcher whose encoder and index both run on CUDA ('auto' resolves to it when a GPU is visible)."""
    if config.retriever != "dense":
        return False
    import torch

    def on_cuda(device: str) -> bool:
        return device in ("auto", "cuda") or device.startswith("cuda:")

    return torch.cuda.is_available() and on_cuda(config.encoder.device) and on_cuda(config.index_device)


def _pad_id(searcher: Any) -> int:
    return int(getattr(getattr(searcher, "encoder", None), "pad_token_id", 0))


def run_search_worker(
    config: ServerConfig,
    loader: Loader,
    conns: list[Connection],
    status: Connection,
    log_level: str = "INFO",
    torch_threads: int = 0,
    gather_s: float = 0.0,
    tile: int = 0,
) -> None:
    """Process entry point: load (with the service's startup checks), report on `status`, then serve.

    The ready message carries (num_docs, pickled tokenizer of the fronts, or pickled None: they send strings)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C reaches the whole group: fronts drain through us first
    logging.basicConfig(level=log_level, format="%(asctime)s %(levelname)s %(name)s[worker]: %(message)s")
    try:
        import pickle

        from mr_search_retrieval.stream_worker import front_tokenizer

        if torch_threads == 0 and _serves_on_gpu(config):
            # Measured on an H200: torch's 16 CPU threads tripled the eager encoder's time under HTTP
            # load; the GPU needs one thread to feed it. The tokenizer's own pool pays (H100, CUDA graphs, 4 fronts,
            # 256 clients: 4.2k q/s and p99 77 ms with it, 3.7-4.0k and p99 107-111 ms without; 128 queries
            # tokenize in 2.4 vs 6.3 ms).
            torch_threads = 1
        if torch_threads > 0:  # on a CPU box the fronts need cores too: oversubscribed OpenMP threads crawl
            import torch

            torch.set_num_threads(torch_threads)
        searcher, corpus = loader(config)
        num_docs = len(corpus)
        corpus.close()  # the fronts read passages; the worker only searches
        for n in WARM_UP_BATCHES:  # first-call costs (kernel compiles, cuBLAS plans) before the first request
            searcher.search(["warm up"] * n, 1)
        tokenizer = front_tokenizer(searcher)
        if tokenizer is not None:  # the token path's own first calls too
            from mr_search_retrieval.token_rows import merge_token_rows

            for n in WARM_UP_BATCHES:
                searcher.search_tokens(merge_token_rows([tokenizer(["warm up"] * n)], _pad_id(searcher)), 1)
        front = pickle.dumps(tokenizer)
    except Exception as err:
        logger.exception("the search worker failed to start")
        status.send(("error", f"{type(err).__name__}: {err}"))
        status.close()
        return
    status.send(("ready", (num_docs, front)))
    status.close()
    from mr_search_retrieval.stream_worker import serve_stream

    logger.info(
        "search worker ready: %d passages, streamed from %d HTTP front processes (%s)",
        num_docs,
        len(conns),
        "tokenized in the fronts" if tokenizer is not None else "strings",
    )
    merged = serve_stream(searcher, conns, gather_s, pad_token_id=_pad_id(searcher), tile=tile)
    logger.info("search worker stopped after %d merged batches", merged)
