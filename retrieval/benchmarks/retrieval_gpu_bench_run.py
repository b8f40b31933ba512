"""The measurements of bench_retrieval_gpu.py: build, encoder and search throughput, then the served grid."""

from __future__ import annotations

import argparse
import json
import logging
import os
import subprocess
import sys
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np
import torch
from retrieval_gpu_common import compare_methods, median_seconds, sync_device
from retrieval_gpu_encoder import measure_graph_encoder
from retrieval_gpu_fixtures import EncoderShape, corpus_path, ensure_encoder_dir, make_queries, word_list, write_corpus
from retrieval_gpu_multiproc import RandomIndexLoader, serve_multiproc_points
from retrieval_gpu_report import print_summary
from retrieval_gpu_serving import NullSearcher, ServedApp, check_consistency, drive, service_app, trivial_app

from mr_search_retrieval.app import _render_result, parse_request
from mr_search_retrieval.config import EncoderConfig, LimitsConfig
from mr_search_retrieval.corpus import CorpusStore
from mr_search_retrieval.encoders import HFEncoder
from mr_search_retrieval.graph_encoder import make_encoder
from mr_search_retrieval.indexes.torch_exact import TorchExactIndex
from mr_search_retrieval.retriever import DenseSearcher

logger = logging.getLogger(__name__)

WIKI18_PASSAGES = 21_015_324


def measure_encoder(encoder: HFEncoder, args: argparse.Namespace) -> dict[str, Any]:
    """Passages/s for the index build (model forward at `encode_tokens`, and end to end from text) and query q/s."""
    dev, out = args.device, {}
    vocab = encoder.model.config.vocab_size
    gen = torch.Generator(device=encoder.device).manual_seed(0)
    forward = {}
    for b in args.encode_batches:
        ids = torch.randint(1000, vocab, (b, args.encode_tokens), device=encoder.device, generator=gen)
        mask = torch.ones_like(ids)

        def run(ids: torch.Tensor = ids, mask: torch.Tensor = mask) -> None:
            # An encoder keeping bf16 weights on a bf16 CPU runs its forward under autocast (as HFEncoder does).
            bf16 = bool(getattr(encoder, "cpu_bf16", False))
            with torch.inference_mode(), torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16):
                encoder.model(input_ids=ids, attention_mask=mask)

        forward[b] = b / median_seconds(run, dev)
    out["passages_per_s_forward"] = forward
    best = max(forward.values())
    out["wiki18_embed_minutes_at_best"] = WIKI18_PASSAGES / best / 60
    words = word_list()
    rng = np.random.default_rng(0)
    b = min(args.encode_batches)
    texts = [" ".join(rng.choice(words, size=args.encode_tokens + 40)) for _ in range(b)]
    cfg_len = encoder.config.max_length
    out["passages_per_s_from_text"] = {b: b / median_seconds(lambda: encoder.encode_passages(texts), dev)}
    out["from_text_max_length"] = cfg_len
    queries = make_queries(max(args.search_batches), seed=1)
    out["queries_per_s_encode"] = {
        n: n / median_seconds(lambda n=n: encoder.encode_queries(queries[:n]), dev) for n in args.search_batches
    }
    return out


def measure_search(index: TorchExactIndex, searcher: DenseSearcher, args: argparse.Namespace) -> dict[str, Any]:
    """Bare index q/s per method (queries already on the device), two-stage vs plain results, pipeline q/s."""
    dev, out = args.device, {"service_method": index.method}
    home = index.shards[0]
    gen = torch.Generator(device=home.device).manual_seed(1)
    methods = {
        "service": index,  # the service's default: two-stage on a GPU with Triton, grouped elsewhere
        "two_stage": TorchExactIndex(index.shards, chunk_rows=index.chunk_rows, method="two_stage"),
        "grouped_topk": TorchExactIndex(index.shards, chunk_rows=index.chunk_rows, method="grouped"),
        "plain_topk": TorchExactIndex(index.shards, chunk_rows=index.chunk_rows, method="grouped", group=1),
    }
    for name, idx in methods.items():
        rates = {}
        for b in args.search_batches:
            q = torch.nn.functional.normalize(torch.randn((b, index.dim), generator=gen, device=home.device), dim=-1)
            q = q.to(home.dtype)
            rates[b] = b / median_seconds(lambda q=q, idx=idx: idx.search_tensor(q, args.topk), dev)
        out[f"bare_search_qps_{name}"] = rates
    q = torch.nn.functional.normalize(torch.randn((64, index.dim), generator=gen, device=home.device), dim=-1)
    out["two_stage_vs_plain"] = compare_methods(methods["two_stage"], methods["plain_topk"], q.to(home.dtype), 10)
    queries = make_queries(max(args.search_batches), seed=2)
    out["pipeline_qps_encode_search"] = {
        b: b / median_seconds(lambda b=b: searcher.search(queries[:b], args.topk), dev) for b in args.search_batches
    }
    return out


def measure_search_components(index: TorchExactIndex, args: argparse.Namespace) -> dict[str, Any]:
    """Where chunked search time goes: the chunked matrix products alone, and the grouped top-k at other chunk sizes."""
    dev, home, out = args.device, index.shards[0], {}
    gen = torch.Generator(device=home.device).manual_seed(5)
    for b in args.search_batches:
        q = torch.nn.functional.normalize(torch.randn((b, index.dim), generator=gen, device=home.device), dim=-1)
        q = q.to(home.dtype)

        def products(q: torch.Tensor = q) -> None:
            with torch.inference_mode():
                for start in range(0, home.shape[0], index.chunk_rows):
                    q @ home[start : start + index.chunk_rows].T

        row = {"matmul_only_qps": b / median_seconds(products, dev)}
        for rows in args.chunk_rows:
            other = TorchExactIndex(index.shards, chunk_rows=rows, method="grouped")
            row[f"grouped_chunk_{rows}_qps"] = b / median_seconds(
                lambda q=q, o=other: o.search_tensor(q, args.topk), dev
            )
        out[b] = row
    return out


def gpu_memory(device: str) -> dict[str, Any]:
    if device != "cuda":
        return {}
    mem: dict[str, Any] = {
        "torch_max_allocated_gib": torch.cuda.max_memory_allocated() / 2**30,
        "torch_allocated_gib": torch.cuda.memory_allocated() / 2**30,
    }
    try:
        smi = subprocess.run(
            ["nvidia-smi", "--query-gpu=name,memory.used,memory.total", "--format=csv,noheader"],
            capture_output=True,
            text=True,
            timeout=30,
            check=True,
        ).stdout.strip()
        mem["nvidia_smi"] = smi
    except (OSError, subprocess.SubprocessError) as err:
        mem["nvidia_smi"] = f"unavailable: {err}"
    return mem


Point = tuple[int, int]  # (concurrent clients, queries per request)


def serve_points(
    app: Any,
    label: str,
    args: argparse.Namespace,
    points: list[Point],
    mbs: int | None = None,
    searcher: Any = None,
    profile: bool = False,
) -> list[dict[str, Any]]:
    """Serve `app` once and drive it at each point; with a searcher, first check the served documents."""
    rows = []
    with ServedApp(app, label) as served:
        if searcher is not None:
            check = check_consistency(served, searcher.search, make_queries(4, seed=3), args.topk)
            if not (check["same_ids"] and check["documents_have_contents"]):
                raise RuntimeError(f"the service answered other documents than its searcher finds: {check}")
        for conc, per_request in points:
            row = drive(served, conc, args.client_procs, args.duration, args.warmup, args.topk, per_request, profile)
            row.update(searcher=label, max_batch_size=mbs, consistent=searcher is not None or None)
            logger.info(
                "%s mbs=%s c=%d x%d: %.0f q/s p50 %.1f ms p99 %.1f ms",
                label,
                mbs,
                conc,
                per_request,
                row["queries_per_s"],
                row["p50_ms"] or -1,
                row["p99_ms"] or -1,
            )
            rows.append(row)
    return rows


def serve_all(searcher: DenseSearcher, corpus: Path, args: argparse.Namespace) -> list[dict[str, Any]]:
    """The in-process service grid, the HTTP-only ceilings and the GIL switch-interval variant."""
    queue = max(4096, 2 * max(args.concurrency), *(c * q * 2 for c, q in args.batched))
    single = [(c, 1) for c in args.concurrency]
    mid, small, big = (
        sorted(args.concurrency)[len(args.concurrency) // 2],
        min(args.max_batch_sizes),
        max(args.max_batch_sizes),
    )

    def app_of(s: Any, mbs: int, label: str, spans_in_ram: bool = False) -> Any:
        return service_app(s, corpus, mbs, args.max_wait_ms, queue, label, spans_in_ram)

    rows = []
    for mbs in args.max_batch_sizes:
        points = single + (args.batched if mbs == big else [])
        rows += serve_points(app_of(searcher, mbs, "service"), "service", args, points, mbs, searcher)
    null = NullSearcher(searcher.num_docs)
    rows += serve_points(app_of(null, small, "null"), "http_only_null_searcher", args, [(mid, 1)], small, null)
    rows += serve_points(trivial_app(), "http_only_trivial_fastapi", args, [(mid, 1)])
    if args.switch_interval_ms > 0:
        before = sys.getswitchinterval()
        sys.setswitchinterval(args.switch_interval_ms / 1000)
        try:
            label = f"service_switchinterval_{args.switch_interval_ms:g}ms"
            rows += serve_points(app_of(searcher, small, label), label, args, [(mid, 1)], small, searcher)
        finally:
            sys.setswitchinterval(before)
    if args.profile_loop:  # cProfile slows the loop: these rows explain where its CPU goes, not how fast it is
        rows += serve_points(
            app_of(null, small, "null"), "http_only_null_searcher_profiled", args, [(mid, 1)], small, null, True
        )
        rows += serve_points(
            app_of(searcher, small, "service"), "service_profiled", args, [(mid, 1)], small, searcher, True
        )
    if args.what_if:  # the same service with the CorpusStore's spans as a plain array (a proposed one-line fix)
        rows += serve_points(
            app_of(null, small, "null", True), "http_only_null_searcher_spans_in_ram", args, [(mid, 1)], small, null
        )
        rows += serve_points(
            app_of(searcher, small, "service", True), "service_spans_in_ram", args, [(mid, 1)], small, searcher
        )
    return rows


def measure_hot_path(corpus: Path, topk: int, repeats: int = 20000) -> dict[str, float]:
    """Microseconds per single-query request spent in the app's own request parsing and response rendering."""
    store = CorpusStore(corpus)
    limits = LimitsConfig()
    body = json.dumps({"queries": make_queries(1, seed=4), "topk": topk, "return_scores": False}).encode()
    rng = np.random.default_rng(0)
    hits = [[(np.ones(topk, np.float32), rng.integers(0, len(store), topk))] for _ in range(256)]

    def per_call(fn: Callable[[int], object]) -> float:
        t0 = time.perf_counter()
        for i in range(repeats):
            fn(i)
        return (time.perf_counter() - t0) / repeats * 1e6

    out = {
        "parse_request_us": per_call(lambda i: parse_request(body, limits, topk)),
        "render_result_us": per_call(lambda i: _render_result(store, hits[i % 256], False)),
        "render_raw_splice_us": per_call(
            lambda i: b'{"result": [[' + b", ".join(store.raw(int(j)) for j in hits[i % 256][0][1]) + b"]]}"
        ),
    }
    store.close()
    return out


def prepare_corpus(path: Path, args: argparse.Namespace) -> tuple[Path, dict[str, float]]:
    """Write the synthetic corpus (reused when complete) and open it once so its line-offset sidecar exists."""
    t = time.perf_counter()
    corpus = write_corpus(path, args.num_passages, args.passage_words)
    setup = {"corpus_write_s": time.perf_counter() - t}
    t = time.perf_counter()
    store = CorpusStore(corpus)
    setup["corpus_open_s"] = time.perf_counter() - t
    setup["corpus_gib"] = corpus.stat().st_size / 2**30
    if len(store) != args.num_passages:
        raise RuntimeError(f"corpus {corpus} has {len(store)} lines, expected {args.num_passages}")
    store.close()
    return corpus, setup


def _serve_multiproc_freed(
    enc_dir: Path, dim: int, corpus: Path, args: argparse.Namespace, expected: tuple[list[str], np.ndarray] | None
) -> list[dict[str, Any]]:
    import gc
    import tempfile

    gc.collect()
    if args.device == "cuda":
        torch.cuda.empty_cache()
        logger.info("GPU memory before the multi-process service: %s", gpu_memory(args.device))
    loader = RandomIndexLoader(str(enc_dir), args.device, args.num_passages, dim, profile=args.worker_profile)
    with tempfile.TemporaryDirectory(prefix="mr-search-worker-stats-") as stats_dir:
        return serve_multiproc_points(loader, corpus, args, expected, Path(stats_dir))


def run_multiproc_only(args: argparse.Namespace, res: dict[str, Any], work: Path, shape: EncoderShape) -> None:
    """Only the multi-process service rows: corpus and encoder directory, then serve (the worker builds the index)."""
    corpus, res["setup"] = prepare_corpus(corpus_path(work, args.num_passages, args.passage_words), args)
    enc_dir = ensure_encoder_dir(work, shape)
    res["serving"] = _serve_multiproc_freed(enc_dir, shape.hidden, corpus, args, None)
    nan = float("nan")
    for r in res["serving"]:
        st, w = r.get("worker_stats") or {}, r.get("worker_window") or {}
        print(
            f"{r['searcher']:<32} c={r['concurrency']:<5} {r['queries_per_s']:>8,.0f} q/s"
            f"  p50 {r['p50_ms'] or nan:6.1f}  p99 {r['p99_ms'] or nan:6.1f} ms"
            f"  merged batch {r['mean_batch'] or nan:6.1f}"
            f" in {r['mean_batch_ms'] or nan:5.1f} ms  (worker: encode {w.get('encode_ms', nan):.1f}"
            f" + index {w.get('index_ms', nan):.1f} ms/batch, max batch so far {st.get('max_batch')})"
            + (
                f" [GPU encode {w['gpu_encode_ms']:.1f} + index {w['gpu_index_ms']:.1f} ms, launch"
                f" {w['launch_ms']:.1f} ms, gap {w['gap_ms']:.1f} ms]"
                if "gpu_index_ms" in w
                else ""
            )
            + f"  srv cpu {r['server_cpu_cores']:.2f}",
            flush=True,
        )


def run_all(args: argparse.Namespace) -> dict[str, Any]:
    from bench_retrieval_gpu import describe_machine

    dev = args.device
    res: dict[str, Any] = {"machine": describe_machine(dev), "args": {k: str(v) for k, v in vars(args).items()}}
    print(f"card: {res['machine']['card']}", flush=True)
    cache = Path(os.environ.get("MR_SEARCH_CACHE") or Path.home() / ".cache" / "mr_search")
    work = args.work_dir or cache / "bench_retrieval_gpu"
    shape = EncoderShape(args.encoder_layers, args.encoder_hidden, args.encoder_heads, args.encoder_intermediate)
    if args.multiproc_only:
        run_multiproc_only(args, res, work, shape)
        return res
    setup: dict[str, float] = {}
    # The corpus (GBs of disk writes and a line-offset scan) is prepared while the encoder and index load.
    pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="corpus")
    corpus_job = pool.submit(prepare_corpus, corpus_path(work, args.num_passages, args.passage_words), args)
    t = time.perf_counter()
    enc_dir = ensure_encoder_dir(work, shape)
    encoder = make_encoder(EncoderConfig(model_dir=str(enc_dir), device=dev, max_length=256))
    setup["encoder_load_s"] = time.perf_counter() - t
    t = time.perf_counter()
    dtype = torch.float16 if dev == "cuda" else torch.float32
    index = TorchExactIndex.from_random(args.num_passages, shape.hidden, device=dev, dtype=dtype)
    sync_device(dev)
    setup["index_build_s"] = time.perf_counter() - t
    res["index"] = {
        "rows": index.ntotal,
        "dim": index.dim,
        "dtype": str(dtype),
        "chunk_rows": index.chunk_rows,
        "gib": index.ntotal * index.dim * index.shards[0].element_size() / 2**30,
    }
    logger.info("setup (GPU side): %s", setup)
    searcher = DenseSearcher(encoder, index)
    # Measure only once the corpus thread is done: its scans hold the GIL and CPU and would slow the GPU launches.
    corpus, corpus_setup = corpus_job.result()
    pool.shutdown()
    setup.update(corpus_setup)
    logger.info("corpus: %s", corpus_setup)
    res["encoder"] = measure_encoder(encoder, args)
    logger.info("encoder: %s", res["encoder"])
    res["encoder"]["graphs"] = measure_graph_encoder(encoder, index, args.topk, args.compare_compile)
    res["search"] = measure_search(index, searcher, args)
    res["search"]["components"] = measure_search_components(index, args)
    logger.info("search: %s", res["search"])
    res["hot_path"] = measure_hot_path(corpus, args.topk)
    logger.info("hot path: %s", res["hot_path"])
    serving = serve_all(searcher, corpus, args)
    res["serving"] = serving
    res["setup"] = setup
    pipeline = res["search"]["pipeline_qps_encode_search"]
    res["serving_fraction_of_pipeline"] = {
        f"mbs{r['max_batch_size']}_c{r['concurrency']}": r["queries_per_s"] / pipeline[min(pipeline)]
        for r in serving
        if r["searcher"] == "service" and r["queries_per_request"] == 1
    }
    res["gpu_memory"] = gpu_memory(dev)
    if not args.no_multiproc and args.http_workers != [0]:
        queries = make_queries(4, seed=3)
        expected = (queries, searcher.search(queries, args.topk)[1])
        del searcher, index, encoder  # the search worker builds the same index: free this one first
        res["serving"] += _serve_multiproc_freed(enc_dir, shape.hidden, corpus, args, expected)
    print_summary(res)
    return res
