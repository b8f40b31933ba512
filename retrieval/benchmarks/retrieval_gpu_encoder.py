"""The query encoder of the GPU benchmark: CUDA-graph replay vs the eager forward (speed and results).

Run by bench_retrieval_gpu.py when the service's encoder is a `CudaGraphEncoder`: queries/s per batch both
ways (tokenizer included, as the search worker calls it), the capture's time and GPU memory, and whether the
replayed embeddings give the eager ones (cosine) and the same top-k on the index. Optionally the same forward
under torch.compile(mode="reduce-overhead") at one bucket shape, timed against the graph replay.
"""

from __future__ import annotations

import logging
import time
from typing import Any

import numpy as np
import torch
from retrieval_gpu_common import median_seconds
from retrieval_gpu_fixtures import make_queries

from mr_search_retrieval.graph_encoder import CudaGraphEncoder, pad_inputs

logger = logging.getLogger(__name__)

QUERY_BATCHES = (1, 16, 64, 128, 256, 512)


def graph_vs_eager(encoder: CudaGraphEncoder, index: Any, queries: list[str], k: int) -> dict[str, Any]:
    """Replayed vs eager embeddings of the same queries: cosine, and the top-k they find on the index."""
    encoder.replay = True
    replayed = encoder.encode_queries(queries)
    encoder.replay = False
    try:
        eager = encoder.encode_queries(queries)
    finally:
        encoder.replay = True
    cosine = (replayed * eager).sum(axis=1) / (np.linalg.norm(replayed, axis=1) * np.linalg.norm(eager, axis=1))
    _, ids_replayed = index.search(replayed, k)
    _, ids_eager = index.search(eager, k)
    return {
        "queries": len(queries),
        "k": k,
        "min_cosine": float(cosine.min()),
        "identical_topk_fraction": float((ids_replayed == ids_eager).all(axis=1).mean()),
        "same_topk_sets_fraction": float(
            np.mean([set(a) == set(b) for a, b in zip(ids_replayed, ids_eager, strict=True)])
        ),
    }


def _compile_vs_replay(encoder: CudaGraphEncoder, shape: tuple[int, int]) -> dict[str, Any]:
    """torch.compile(mode="reduce-overhead") of the encoder's forward at one bucket shape vs that bucket's graph."""
    gen = np.random.default_rng(0)
    arrays = {k: np.zeros(shape, dtype=np.int64) for k in encoder.keys}
    arrays["input_ids"] = gen.integers(1000, encoder.model.config.vocab_size, shape)
    arrays["attention_mask"] = np.ones(shape, dtype=np.int64)
    stacked = pad_inputs(arrays, shape, encoder.pad_token_id)
    feed = {k: torch.from_numpy(stacked[i]).to(encoder.device) for i, k in enumerate(encoder.keys)}
    out: dict[str, Any] = {"shape": list(shape)}
    try:
        compiled = torch.compile(encoder._forward, mode="reduce-overhead", dynamic=False)
        t0 = time.perf_counter()
        with torch.inference_mode():
            for _ in range(3):  # compile, then the recording runs of its CUDA graph trees
                compiled(feed).cpu()

            def run_compiled() -> None:
                compiled(feed).cpu()

            out["compile_s"] = time.perf_counter() - t0
            out["compiled_ms"] = 1000 * median_seconds(run_compiled, "cuda", repeats=20, warmup=3)
            ref = compiled(feed).cpu().numpy()
    except Exception as err:  # report, do not abort the benchmark: the graphs are the service's path
        out["error"] = f"{type(err).__name__}: {str(err)[:300]}"
        return out
    out["replay_ms"] = 1000 * median_seconds(
        lambda: encoder._run_bucket(shape, stacked, shape[0]), "cuda", repeats=20, warmup=3
    )
    mine = encoder._run_bucket(shape, stacked, shape[0])
    out["min_cosine_compiled_vs_replay"] = float(
        ((mine * ref).sum(1) / (np.linalg.norm(mine, axis=1) * np.linalg.norm(ref, axis=1))).min()
    )
    return out


def measure_graph_encoder(encoder: Any, index: Any, topk: int, compare_compile: bool = False) -> dict[str, Any]:
    """Queries/s with graph replay and eagerly per batch, capture cost, result check; {} for an eager encoder."""
    if not isinstance(encoder, CudaGraphEncoder):
        return {}
    queries = make_queries(max(QUERY_BATCHES), seed=1)
    rates: dict[str, dict[int, float]] = {"graphs": {}, "eager": {}}
    for mode in ("graphs", "eager"):
        encoder.replay = mode == "graphs"
        for n in QUERY_BATCHES:
            rates[mode][n] = n / median_seconds(lambda n=n: encoder.encode_queries(queries[:n]), "cuda", repeats=10)
    encoder.replay = True
    out: dict[str, Any] = {
        "queries_per_s": rates,
        "speedup": {n: rates["graphs"][n] / rates["eager"][n] for n in QUERY_BATCHES},
        "graphs": len(encoder.buckets.shapes()),
        "batch_buckets": list(encoder.buckets.batch),
        "length_buckets": list(encoder.buckets.length),
        "capture_s": encoder.capture_s,
        "capture_gib": encoder.capture_bytes / 2**30,
        "check": graph_vs_eager(encoder, index, make_queries(512, seed=11), max(10, topk)),
    }
    if compare_compile:
        out["compile_vs_replay"] = _compile_vs_replay(encoder, (128, 32))
    logger.info("graph encoder: %s", out)
    return out
