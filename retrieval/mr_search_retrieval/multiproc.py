"""`--http-workers N`: one search-worker process (encoder + index + GPU) behind N HTTP front processes.

One process serving HTTP and running the model tops out at ~2k single-query requests/s: its event loop
and the model thread share one GIL. Here each front is the usual app (`create_app`:
validation, micro-batcher, limits, 429, /health, /metrics) with a `StreamRemoteSearcher` that forwards its
batches to the search worker, which merges the batches of all fronts into one encode+search. The fronts
bind the same port with SO_REUSEPORT, so the kernel spreads connections over them.

The protocol between fronts and worker is the streamed one (stream_worker.py): each front keeps `front_lanes`
batches in flight and, where the worker ships a tokenizer, tokenizes its queries itself; the worker runs one merged
batch at a time over everything that has arrived (H100, 4 fronts, 256 clients: ~5.3k q/s, README).

/metrics answers for the whole service whichever front a scrape reaches: each front publishes its counters to a
folder the supervisor made, every second, and sums everyone's when scraped (its own current, the others' at most 1 s
old; metrics.SharedMetrics). /health is per front process.

Shutdown (SIGTERM/SIGINT to the supervisor): the fronts stop accepting and finish in-flight requests (their batchers
drain through the worker), then the worker exits.
"""

from __future__ import annotations

import logging
import multiprocessing as mp
import shutil
import signal
import socket
import sys
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, replace
from multiprocessing.connection import Connection, wait
from typing import Any

from mr_search_retrieval.config import ServerConfig
from mr_search_retrieval.search_worker import Loader, run_search_worker

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class FrontOptions:
    """uvicorn settings of every front process."""

    log_level: str = "info"
    graceful_timeout: float = 30.0
    backlog: int = 2048
    torch_threads: int = 0  # intra-op CPU threads of the search worker (0: torch's default; 1 on a GPU)
    # When the worker finds nothing waiting, how long it waits after the first arrival for company.
    worker_gather_ms: float = 3.0
    front_lanes: int = 8  # micro-batches each front may have at the worker at once
    # A merged batch at most a quarter of this over a multiple of it is cut back to the multiple (the GPU time steps
    # up there: the search kernel's 128-query tiles, the encoder's graph buckets); 0: off
    worker_tile: int = 128

    def __post_init__(self) -> None:
        if self.worker_tile < 0:
            raise ValueError(f"worker_tile must be >= 0 (0: off), got {self.worker_tile}")
        if self.front_lanes < 1:
            raise ValueError(f"front_lanes must be >= 1, got {self.front_lanes}")
        if self.worker_gather_ms < 0:
            raise ValueError(f"worker_gather_ms must be >= 0, got {self.worker_gather_ms}")


def reuseport_socket(host: str, port: int) -> socket.socket:
    """A bound (not yet listening) TCP socket that other processes of this user may bind too."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
    try:
        sock.bind((host, port))
    except OSError as err:
        sock.close()
        raise OSError(f"cannot bind {host}:{port} ({err}); is another server on that port?") from err
    return sock


def run_front(
    config: ServerConfig,
    conn: Connection,
    num_docs: int,
    index: int,
    options: FrontOptions,
    tokenizer_pickle: bytes,
    metrics_dir: str,
) -> None:
    """Process entry point of HTTP front `index`: the service app with its searches forwarded to the worker.

    tokenizer_pickle: the pickled query tokenizer the worker shipped (pickled None: send strings).
    metrics_dir: the folder where the fronts publish their metrics for each other."""
    import os
    import pickle

    import uvicorn

    from mr_search_retrieval.app import create_app
    from mr_search_retrieval.corpus import CorpusStore
    from mr_search_retrieval.stream_worker import StreamRemoteSearcher

    logging.basicConfig(
        level=options.log_level.upper(), format=f"%(asctime)s %(levelname)s %(name)s[front {index}]: %(message)s"
    )
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")  # a few queries per call; the fronts share the cores
    tokenizer = pickle.loads(tokenizer_pickle)
    config = replace(config, batcher=replace(config.batcher, lanes=options.front_lanes))

    def loader(cfg: ServerConfig) -> tuple[Any, CorpusStore]:
        corpus = CorpusStore(cfg.corpus)
        if len(corpus) != num_docs:
            raise ValueError(f"corpus {cfg.corpus} has {len(corpus)} passages but the search worker has {num_docs}")
        return StreamRemoteSearcher(conn, num_docs, tokenizer), corpus

    sock = reuseport_socket(config.host, config.port)
    server = uvicorn.Server(
        uvicorn.Config(
            create_app(config, loader=loader, shared_metrics=(metrics_dir, index)),
            log_level=options.log_level,
            access_log=False,
            timeout_graceful_shutdown=options.graceful_timeout,
            backlog=options.backlog,
        )
    )
    server.run(sockets=[sock])
    sys.exit(0 if server.started else 3)


class _Stop:
    def __init__(self) -> None:
        self.requested = False

    def __call__(self, signum: int, frame: Any) -> None:
        self.requested = True


def _start_worker(
    ctx: Any, config: ServerConfig, loader: Loader, n: int, options: FrontOptions
) -> tuple[Any, list[Connection], tuple[int, bytes] | str]:
    """Start the search worker; returns it, the fronts' ends of its pipes, and (num_docs, the pickled front
    tokenizer) or the startup error."""
    pipes = [ctx.Pipe(duplex=True) for _ in range(n)]
    status_recv, status_send = ctx.Pipe(duplex=False)
    worker = ctx.Process(
        target=run_search_worker,
        args=(
            config,
            loader,
            [a for a, _ in pipes],
            status_send,
            options.log_level.upper(),
            options.torch_threads,
            options.worker_gather_ms / 1000,
            options.worker_tile,
        ),
        name="mr-search-worker",
    )
    worker.start()
    status_send.close()
    for a, _ in pipes:
        a.close()
    try:
        kind, value = status_recv.recv()
    except EOFError:
        worker.join(5)
        kind, value = "error", f"the search worker process died while loading (exit code {worker.exitcode})"
    status_recv.close()
    return worker, [b for _, b in pipes], value if kind == "ready" else f"error: {value}"


def _stop_processes(procs: list[Any], timeout: float) -> None:
    for p in procs:
        if p.is_alive():
            p.terminate()  # SIGTERM: a front drains its in-flight requests
    for p in procs:
        p.join(timeout)
        if p.is_alive():
            logger.warning("process %s did not stop within %.0fs; killing it", p.name, timeout)
            p.kill()
            p.join()


def serve_multiprocess(
    config: ServerConfig,
    http_workers: int,
    loader: Loader | None = None,
    options: FrontOptions | None = None,
    install_signals: bool = True,
    stop: Callable[[], bool] | None = None,
) -> int:
    """Run the worker and `http_workers` fronts until a signal (or `stop()` is true); returns an exit status."""
    if http_workers < 1:
        raise ValueError(f"http_workers must be >= 1 for the multi-process mode, got {http_workers}")
    if loader is None:
        from mr_search_retrieval.app import default_loader

        loader = default_loader
    options = options or FrontOptions()
    ctx = mp.get_context("spawn")  # CUDA must not be forked; fronts start clean
    stopper = _Stop()
    if install_signals:
        signal.signal(signal.SIGTERM, stopper)
        signal.signal(signal.SIGINT, stopper)
    worker, front_conns, loaded = _start_worker(ctx, config, loader, http_workers, options)
    if isinstance(loaded, str):
        logger.error("startup failed: %s", loaded.removeprefix("error: "))
        worker.join(10)
        return 3
    num_docs, tokenizer_pickle = loaded
    metrics_dir = tempfile.mkdtemp(prefix="mr-search-metrics-")
    fronts = [
        ctx.Process(
            target=run_front,
            args=(config, conn, num_docs, i, options, tokenizer_pickle, metrics_dir),
            name=f"mr-search-front-{i}",
        )
        for i, conn in enumerate(front_conns)
    ]
    for p in fronts:
        p.start()
    for conn in front_conns:
        conn.close()
    logger.info("search worker + %d HTTP front processes on %s:%d", http_workers, config.host, config.port)
    status = 0
    while not (stopper.requested or (stop is not None and stop())):
        wait([worker.sentinel, *(p.sentinel for p in fronts)], timeout=0.2)
        dead = [p for p in (worker, *fronts) if not p.is_alive()]
        if dead:
            logger.error("%s exited unexpectedly (code %s); stopping the service", dead[0].name, dead[0].exitcode)
            status = 1
            break
    _stop_processes(fronts, options.graceful_timeout + 10)
    worker.join(30)  # every front's connection is closed now: the worker's loop ends
    _stop_processes([worker], 5)
    shutil.rmtree(metrics_dir, ignore_errors=True)
    return status
