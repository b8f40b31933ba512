"""`mr-search-retrieval`: serve an index over HTTP (uvicorn). Without --index-dir, indexes --corpus once (cached)."""

from __future__ import annotations

import argparse
import logging
import os
import sys
from pathlib import Path

from mr_search_retrieval.config import BatcherConfig, LimitsConfig, ServerConfig

logger = logging.getLogger(__name__)

MAX_AUTO_LANES = 8
# --max-batch-size 0 where batches run in CPU lanes: bare encode+search on the 2-core machine is fastest at 32 queries
# a lane and slows past it, and under 256 clients a lane's batch fills to the limit (mean 77-80 at 128, 64 at 64).
# retrieval/benchmarks/bench_retrieval_server.py, 14 runs: at 64, 0.77-0.87 of bare (median 0.81, 10 runs); at 128,
# 0.75-0.84 (median 0.77, 4 runs) (docs/benchmarks.md).
CPU_LANE_MAX_BATCH = 64


def _usable_cpus() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return os.cpu_count() or 1


def cpu_lanes(torch_threads: int = 0) -> tuple[int, int]:
    """(lanes, intra-op threads per lane) that share this machine's usable cores: one lane per core (at most
    MAX_AUTO_LANES) unless `torch_threads` > 0 fixes the threads per lane."""
    cpus = _usable_cpus()
    if torch_threads > 0:
        return max(1, min(MAX_AUTO_LANES, cpus // torch_threads)), torch_threads
    lanes = min(MAX_AUTO_LANES, cpus)
    return lanes, max(1, cpus // lanes)


def auto_max_batch(max_batch_size: int, lanes: int) -> int:
    """Queries per encode+search for --max-batch-size 0: CPU_LANE_MAX_BATCH where batches run in CPU lanes (bare
    encode+search per lane is fastest at small batches; a lane's batch grows to the limit under load), else the
    `BatcherConfig` default, which the GPU path's figures used."""
    if max_batch_size > 0:
        return max_batch_size
    return CPU_LANE_MAX_BATCH if lanes > 1 else BatcherConfig.max_batch_size


def auto_lanes(args: argparse.Namespace) -> tuple[int, int]:
    """(lanes, torch threads) for --lanes 0: on a CPU, lanes of few intra-op threads each beat one batch spread over
    every core (OpenMP's barriers stall whenever one thread is descheduled;
    retrieval/benchmarks/bench_retrieval_server.py)."""
    if args.lanes > 1 and (args.retriever != "dense" or args.http_workers > 0):
        raise ValueError(
            f"--lanes {args.lanes} needs a dense retriever served in one process (BM25's stemmer and the search "
            "worker's pipes must not be used by two threads at once); use --lanes 1, or 0 to let the server choose"
        )
    if args.lanes > 0 or args.retriever != "dense" or args.http_workers > 0:
        return max(args.lanes, 1), args.torch_threads
    from mr_search_retrieval.encoders import resolve_device

    if resolve_device(args.device).type != "cpu" or resolve_device(args.index_device).type != "cpu":
        return 1, args.torch_threads
    return cpu_lanes(args.torch_threads)


def build_parser() -> argparse.ArgumentParser:
    from mr_search_retrieval.build_index import add_encoder_args  # loads torch: see main()

    p = argparse.ArgumentParser(prog="mr-search-retrieval", description=__doc__)
    b, lim = BatcherConfig(), LimitsConfig()
    g = p.add_argument_group("index and corpus")
    g.add_argument(
        "--index-dir",
        "--index",
        type=Path,
        default=None,
        help="a directory built by mr-search-build-index, a FAISS index file alone (Search-R1's e5_Flat.index: needs "
        "--corpus and --encoder) or a Lucene index directory (needs --corpus); default: an index of --corpus, built "
        "once and cached",
    )
    g.add_argument("--corpus", type=Path, default=None, help="JSON lines {'id','contents'} the index was built from")
    g.add_argument("--retriever", default="dense", choices=("dense", "bm25"))
    g.add_argument(
        "--backend",
        default="auto",
        choices=("auto", "faiss", "torch"),
        help="dense backend of an index built from --corpus; auto: faiss when installed, else the exact torch search",
    )
    g.add_argument("--index-type", default="Flat", help="FAISS index_factory string of an index built from --corpus")
    g.add_argument("--index-device", default="auto", help="dense index: auto (GPU when available), cpu, cuda, cuda:N")
    g.add_argument("--search-params", default="", help="FAISS search parameters, e.g. 'nprobe=64,efSearch=256'")
    g.add_argument("--topk", type=int, default=3, help="passages per query when a request sends topk null")
    g.add_argument("--no-check-encoder", action="store_true", help="serve even if the index names another encoder")
    g.add_argument(
        "--self-check-passages",
        type=int,
        default=5,
        help="index without metadata: corpus passages re-encoded at start-up that must come back at rank 1 (0: off)",
    )
    add_encoder_args(p)
    g = p.add_argument_group("batching")
    g.add_argument(
        "--max-batch-size",
        type=int,
        default=0,
        help=f"queries per encode+search; 0: auto = {CPU_LANE_MAX_BATCH} a lane where batches run in CPU lanes, "
        f"else {b.max_batch_size}",
    )
    g.add_argument("--max-wait-ms", type=float, default=b.max_wait_ms, help="how long a lone query waits for company")
    g.add_argument("--queue-size", type=int, default=b.queue_size, help="queued queries before answering 429")
    g.add_argument(
        "--lanes",
        type=int,
        default=0,
        help="batches computed at once, one thread each. 0: auto = a dense index served on the CPU gets one lane per "
        f"core (at most {MAX_AUTO_LANES}) with the cores split between them (--torch-threads 0); anything else 1",
    )
    g = p.add_argument_group("request limits (422 beyond them)")
    g.add_argument("--max-queries-per-request", type=int, default=lim.max_queries_per_request)
    g.add_argument("--max-query-chars", type=int, default=lim.max_query_chars)
    g.add_argument("--max-topk", type=int, default=lim.max_topk)
    g.add_argument("--max-body-bytes", type=int, default=lim.max_body_bytes)
    g = p.add_argument_group("server")
    g.add_argument("--host", default="127.0.0.1", help="bind address (0.0.0.0 exposes the service to the network)")
    g.add_argument("--port", type=int, default=8000)
    g.add_argument(
        "--http-workers",
        type=int,
        default=0,
        help="0: one process; N >= 1: N HTTP front processes (one port, SO_REUSEPORT) feeding one search-worker "
        "process that owns encoder, index and GPU and merges their batches (for GPU serving: try 4); "
        "/metrics and /health then describe the front that answered",
    )
    g.add_argument(
        "--worker-gather-ms",
        type=float,
        default=3.0,
        help="with --http-workers: when the search worker finds nothing waiting, how long it waits after the first "
        "batch arrives for the other fronts' batches (merged into one encode+search)",
    )
    g.add_argument("--front-lanes", type=int, default=8, help="with --http-workers: batches in flight per front")
    g.add_argument(
        "--worker-tile",
        type=int,
        default=128,
        help="with --http-workers: a merged batch at most a quarter of this over a multiple of it is cut back to "
        "the multiple (GPU time steps up there); 0: off",
    )
    g.add_argument("--torch-threads", type=int, default=0, help="intra-op CPU threads for the encoder (0: torch's)")
    g.add_argument("--graceful-timeout", type=float, default=30.0, help="seconds to finish in-flight requests")
    g.add_argument("--log-level", default="info", choices=("debug", "info", "warning", "error"))
    return p


def corpus_index_backend(backend: str) -> str:
    """--backend auto: FAISS when installed (`pip install "./retrieval[faiss]"`), else the exact torch search."""
    import importlib.util

    if backend != "auto":
        return backend
    return "faiss" if importlib.util.find_spec("faiss") is not None else "torch"


def config_from_args(args: argparse.Namespace) -> ServerConfig:
    from mr_search_retrieval.build_index import encoder_config_from_args
    from mr_search_retrieval.conventions import Conventions

    index_dir, corpus, retriever, index_format = args.index_dir, args.corpus, args.retriever, "metadata"
    if args.encoder is not None and not Path(args.encoder).is_dir():
        raise FileNotFoundError(
            f"encoder folder {args.encoder} does not exist; pass a Hugging Face model folder (RETRIEVER_ENCODER / "
            "--encoder), e.g. a download of intfloat/e5-base-v2"
        )
    known: Conventions | None = None
    if index_dir is None:
        from mr_search_retrieval.index_cache import ensure_index

        if corpus is None:
            raise ValueError(
                "nothing to serve: pass --index-dir (an index folder or file) or --corpus (a JSON-lines corpus, "
                "indexed once and cached); `bash retrieval_launch.sh` with neither serves the embedded world's corpus "
                "when examples/embedded_world is installed"
            )
        encoder = encoder_config_from_args(args)
        index_dir = ensure_index(corpus, retriever, corpus_index_backend(args.backend), args.index_type, encoder)
    else:
        from mr_search_retrieval.indexes import bare

        index_format = bare.index_format(index_dir)
        if index_format == "metadata":
            from mr_search_retrieval.indexes.metadata import IndexMetadata

            meta = IndexMetadata.read(index_dir)
            corpus = corpus or Path(meta.corpus)
            e = meta.encoder
            known = Conventions(e.get("query_prefix"), e.get("passage_prefix"), e.get("pooling"), e.get("normalize"))
        else:
            what = bare.WHAT[index_format]
            if corpus is None:
                raise ValueError(
                    f"{what} {index_dir} has no metadata naming its corpus: pass the corpus it was built from with "
                    f"RETRIEVER_CORPUS / --corpus ({bare.SEARCH_R1_HINT})"
                )
            if index_format == "lucene":
                retriever = "bm25"
            elif retriever != "dense":
                raise ValueError(f"{what} {index_dir} is a dense index; serve it with --retriever dense")
            elif args.encoder is None:
                raise ValueError(
                    f"{what} {index_dir} has no metadata naming its encoder: pass the encoder folder it was built "
                    f"with, RETRIEVER_ENCODER / --encoder ({bare.SEARCH_R1_HINT})"
                )
            else:
                from mr_search_retrieval.build_index import flag_conventions
                from mr_search_retrieval.conventions import infer

                known = infer(Path(args.encoder), flag_conventions(args))
        encoder = encoder_config_from_args(args, known)
    return ServerConfig(
        index_dir=str(index_dir),
        corpus=str(corpus),
        retriever=retriever,
        index_format=index_format,
        self_check_passages=args.self_check_passages,
        encoder=encoder,
        batcher=BatcherConfig(
            auto_max_batch(args.max_batch_size, args.lanes or 1), args.max_wait_ms, args.queue_size, args.lanes or 1
        ),
        limits=LimitsConfig(args.max_queries_per_request, args.max_query_chars, args.max_topk, args.max_body_bytes),
        default_topk=args.topk,
        index_device=args.index_device,
        search_params=args.search_params,
        check_encoder=not args.no_check_encoder,
        host=args.host,
        port=args.port,
        http_workers=args.http_workers,
    )


def main(argv: list[str] | None = None) -> None:
    # OpenMP's wait policy is left to the user (OMP_WAIT_POLICY, read when torch loads). It matters only where a
    # batch is spread over several intra-op threads (--lanes 1 on a CPU, or --torch-threads > 1): there the default
    # (spinning) served ~2x faster on a quiet 2-core machine and PASSIVE 3-4x faster on one shared with busy
    # processes. The CPU default (one lane per core, one thread each) has no OpenMP teams to wait in.
    args = build_parser().parse_args(argv)
    logging.basicConfig(level=args.log_level.upper(), format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    try:
        args.lanes, args.torch_threads = auto_lanes(args)
        config = config_from_args(args)
    except (FileNotFoundError, ValueError, ImportError) as err:
        sys.exit(f"mr-search-retrieval: {err}")
    if args.torch_threads > 0:
        import torch

        torch.set_num_threads(args.torch_threads)
    logger.info("%d batch lane(s), %s intra-op thread(s) each", config.batcher.lanes, args.torch_threads or "torch's")
    if config.http_workers > 0:
        from mr_search_retrieval.multiproc import FrontOptions, serve_multiprocess

        try:
            options = FrontOptions(
                args.log_level,
                args.graceful_timeout,
                torch_threads=args.torch_threads,
                worker_gather_ms=args.worker_gather_ms,
                front_lanes=args.front_lanes,
                worker_tile=args.worker_tile,
            )
        except ValueError as err:
            sys.exit(f"mr-search-retrieval: {err}")
        sys.exit(serve_multiprocess(config, config.http_workers, options=options))
    import uvicorn

    from mr_search_retrieval.app import create_app

    server = uvicorn.Server(
        uvicorn.Config(
            create_app(config),
            host=config.host,
            port=config.port,
            log_level=args.log_level,
            access_log=False,
            timeout_graceful_shutdown=args.graceful_timeout,
        )
    )
    server.run()
    if not server.started:
        sys.exit(3)  # startup failed: uvicorn logged the reason (missing file, size or encoder mismatch)


if __name__ == "__main__":
    main()
