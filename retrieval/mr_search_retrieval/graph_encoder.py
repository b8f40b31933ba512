"""The query encoder on CUDA, replayed from CUDA graphs captured at a few bucketed (batch, length) shapes.

An eager BERT-base forward is ~250 kernel launches: 12-21 ms of Python and launch time per merged batch in
the search worker for 2-4 ms of GPU work. `CudaGraphEncoder` captures the whole forward (model,
pooling, normalisation) once per bucket shape at startup; a sub-batch is then padded up to the smallest
bucket that holds it, copied into that graph's static inputs (one host-to-device copy), replayed (one launch)
and its rows read back. Padding is inert: padded positions have attention mask 0 (and mean pooling ignores
them), padded rows are separate rows of a row-wise computation (they get a one-token mask so that no
softmax row is empty). `BucketedEncoder` is the same padding without graphs (what CPU tests check).

Sub-batches never exceed the largest batch bucket (the HFEncoder's sorted sub-batching splits bigger ones)
and the tokenizer truncates to `max_length`, which is always a length bucket. Left-padding tokenizers
(their positions would move) and `replay = False` use the eager forward.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from mr_search_retrieval.config import EncoderConfig
from mr_search_retrieval.encoders import HFEncoder, resolve_device
from mr_search_retrieval.token_rows import QueryTokenizer

logger = logging.getLogger(__name__)

MIN_BATCH_BUCKET = 8  # smaller batches pad to 8 rows: the same GPU time, fewer graphs
MAX_BATCH_BUCKET = 512  # 4 HTTP fronts x max_batch_size 128 merge into batches up to here
MIN_LENGTH_BUCKET = 16  # queries are ~10-20 tokens

Shape = tuple[int, int]  # (rows, tokens)


def _doubling(low: int, high: int) -> tuple[int, ...]:
    """low, 2*low, 4*low, ... below `high`, then `high` itself (so the limit is always a bucket)."""
    values, v = [], low
    while v < high:
        values.append(v)
        v *= 2
    return (*values, high)


@dataclass(frozen=True)
class GraphBuckets:
    """The (batch, length) shapes that get a graph: every batch bucket with every length bucket."""

    batch: tuple[int, ...]
    length: tuple[int, ...]

    def __post_init__(self) -> None:
        for name, values in (("batch", self.batch), ("length", self.length)):
            if not values or min(values) < 1 or list(values) != sorted(set(values)):
                raise ValueError(
                    f"{name} buckets must be a non-empty, strictly increasing tuple of positive ints, got {values!r}"
                )

    @classmethod
    def for_limits(cls, max_batch: int = MAX_BATCH_BUCKET, max_length: int = 256) -> GraphBuckets:
        """Batches 8, 16, ... up to `max_batch`; lengths 16, 32, ... up to `max_length` (limits included)."""
        if max_batch < 1 or max_length < 1:
            raise ValueError(f"max_batch and max_length must be >= 1, got {max_batch} and {max_length}")
        return cls(
            _doubling(min(MIN_BATCH_BUCKET, max_batch), max_batch),
            _doubling(min(MIN_LENGTH_BUCKET, max_length), max_length),
        )

    def fit(self, rows: int, width: int) -> Shape | None:
        """The smallest bucket shape holding `rows` x `width` tokens; None when it exceeds the largest."""
        b = next((v for v in self.batch if v >= rows), None)
        n = next((v for v in self.length if v >= width), None)
        return None if b is None or n is None else (b, n)

    def shapes(self) -> list[Shape]:
        """Every bucket shape, largest first (captured in this order, later graphs reuse the first's memory)."""
        return sorted(((b, n) for b in self.batch for n in self.length), key=lambda s: (s[0] * s[1], s), reverse=True)


def pad_inputs(arrays: Mapping[str, np.ndarray], shape: Shape, pad_token_id: int) -> np.ndarray:
    """Tokenized (rows, width) arrays right-padded to `shape`, stacked in the mapping's key order: (keys, *shape).

    input_ids pad with `pad_token_id`, other keys with 0; padded rows attend to their first position only
    (attention_mask 1 there) so that no attention row is fully masked.
    """
    out = np.empty((len(arrays), *shape), dtype=np.int64)
    for i, (key, a) in enumerate(arrays.items()):
        rows, width = a.shape
        if rows > shape[0] or width > shape[1]:
            raise ValueError(f"{key} of shape {a.shape} does not fit the bucket {shape}")
        out[i] = pad_token_id if key == "input_ids" else 0
        out[i, :rows, :width] = a
        if key == "attention_mask":
            out[i, rows:, 0] = 1
    return out


class BucketedEncoder(HFEncoder):
    """HFEncoder whose sub-batches run padded to bucket shapes (static shapes, as graphs need).

    `_run_bucket` runs the eager forward on the padded inputs here; `CudaGraphEncoder` replays a graph instead.
    """

    def __init__(self, config: EncoderConfig, buckets: GraphBuckets | None = None) -> None:
        super().__init__(config)
        self.buckets = buckets or GraphBuckets.for_limits(min(MAX_BATCH_BUCKET, self.sub_batch_size), config.max_length)
        self.sub_batch_size = min(self.sub_batch_size, self.buckets.batch[-1])  # every sub-batch fits a bucket
        self.keys = tuple(self.tokenizer(["warm up"], return_tensors="np").keys())
        pad = self.tokenizer.pad_token_id
        self.pad_token_id = 0 if pad is None else int(pad)
        self.replay = True  # False: the plain eager forward (comparisons)
        self.bucket_counts: dict[Shape, int] = {}  # sub-batches run per bucket shape

    def _embed_rows(self, batch: Any, rows: np.ndarray, width: int) -> np.ndarray:
        shape = self.buckets.fit(len(rows), width) if self.replay and not self._left_padded else None
        if shape is None:
            return super()._embed_rows(batch, rows, width)
        self.bucket_counts[shape] = self.bucket_counts.get(shape, 0) + 1
        stacked = pad_inputs({k: batch[k][rows][:, :width] for k in self.keys}, shape, self.pad_token_id)
        return self._run_bucket(shape, stacked, len(rows))

    def _run_bucket(self, shape: Shape, stacked: np.ndarray, rows: int) -> np.ndarray:
        """Embeddings of the first `rows` rows of the padded (keys, *shape) inputs."""
        return self._run_bucket_tensor(shape, stacked, rows).cpu().numpy()

    @torch.inference_mode()
    def _run_bucket_tensor(self, shape: Shape, stacked: np.ndarray, rows: int) -> torch.Tensor:
        """`_run_bucket` left on the device (no synchronisation): a tensor the caller owns."""
        feed = {k: torch.from_numpy(stacked[i]).to(self.device) for i, k in enumerate(self.keys)}
        return self._forward(feed)[:rows]

    def query_tokenizer(self) -> QueryTokenizer | None:
        """The tokenization of `encode_queries` for the HTTP fronts (`embed_tokens` takes its merged rows); None
        where rows cannot be merged by right-padding (a left-padding tokenizer, no attention_mask)."""
        if self._left_padded or "attention_mask" not in self.keys:
            return None
        return QueryTokenizer(self.tokenizer, self.config.query_prefix, self.config.max_length, self.keys)

    @torch.inference_mode()
    def embed_tokens(self, batch: Mapping[str, np.ndarray]) -> torch.Tensor:
        """float32 (n, dim) embeddings on the encoder's device, in row order, of a right-padded tokenized batch (the
        tokenizer's arrays for `self.keys`; see token_rows.merge_token_rows). No device-to-host copy, no sync: the
        index can search them where they are. Same numbers as `encode_queries` of the texts."""
        n = len(batch["attention_mask"])
        if n == 0:
            return torch.zeros((0, self.dim), dtype=torch.float32, device=self.device)
        lengths = batch["attention_mask"].sum(axis=1)
        if n <= self.sub_batch_size:  # one sub-batch: rows keep their order (nothing to sort or restore)
            return self._embed_rows_tensor(batch, np.arange(n), int(lengths.max()))
        order = np.argsort(lengths, kind="stable")
        parts = []
        for start in range(0, n, self.sub_batch_size):
            rows = order[start : start + self.sub_batch_size]
            parts.append(self._embed_rows_tensor(batch, rows, int(lengths[rows].max())))
        inverse = np.empty_like(order)
        inverse[order] = np.arange(n)
        restore = torch.from_numpy(inverse)
        if self.device.type == "cuda":
            restore = restore.pin_memory()
        return torch.cat(parts)[restore.to(self.device, non_blocking=True)]

    def _embed_rows_tensor(self, batch: Mapping[str, np.ndarray], rows: np.ndarray, width: int) -> torch.Tensor:
        shape = self.buckets.fit(len(rows), width) if self.replay and not self._left_padded else None
        if shape is None:
            cols = slice(-width, None) if self._left_padded else slice(0, width)
            feed = {k: torch.from_numpy(np.ascontiguousarray(batch[k][rows][:, cols])) for k in self.keys}
            feed = {k: v.to(self.device) for k, v in feed.items()}
            return self._forward(feed)
        self.bucket_counts[shape] = self.bucket_counts.get(shape, 0) + 1
        stacked = pad_inputs({k: batch[k][rows][:, :width] for k in self.keys}, shape, self.pad_token_id)
        return self._run_bucket_tensor(shape, stacked, len(rows))


@dataclass
class _Graph:
    graph: torch.cuda.CUDAGraph
    host: torch.Tensor  # pinned (keys, batch, length) int64: the staging buffer of the inputs
    inputs: torch.Tensor  # the same on the device; the captured forward reads its slices
    output: torch.Tensor  # float32 (batch, dim) written by each replay
    staged: torch.cuda.Event  # recorded after the last copy host -> inputs: the host buffer may be written again


class CudaGraphEncoder(BucketedEncoder):
    """BucketedEncoder replaying one CUDA graph per bucket shape, captured when it is made (needs CUDA)."""

    def __init__(self, config: EncoderConfig, buckets: GraphBuckets | None = None) -> None:
        if resolve_device(config.device).type != "cuda":
            raise ValueError(
                f"CUDA graphs need the encoder on a CUDA device, got device={config.device!r}; "
                "use HFEncoder (or EncoderConfig(cuda_graphs=False)) elsewhere"
            )
        super().__init__(config, buckets)
        self._graphs: dict[Shape, _Graph] = {}
        self._lock = threading.Lock()  # one replay at a time: the graphs share static buffers and a memory pool
        # Recorded after each replay's output is copied out: the next replay (any graph: one memory pool) waits for
        # it on the GPU, so callers on other streams and callers that do not synchronise (embed_tokens) are safe.
        self._replayed: torch.cuda.Event | None = None
        self.capture_s = 0.0
        self.capture_bytes = 0
        if self._left_padded:
            logger.warning("tokenizer pads on the left: CUDA graphs off, the encoder runs eagerly")
            return
        self._capture()

    @torch.inference_mode()
    def _capture(self) -> None:
        dev = self.device
        torch.cuda.synchronize(dev)
        reserved, t0 = torch.cuda.memory_reserved(dev), time.perf_counter()
        pool, stream = torch.cuda.graph_pool_handle(), torch.cuda.Stream(dev)
        empty = dict.fromkeys(self.keys, np.zeros((0, 0), dtype=np.int64))
        for shape in self.buckets.shapes():
            host = torch.from_numpy(pad_inputs(empty, shape, self.pad_token_id)).pin_memory()
            inputs = host.to(dev)
            feed = {k: inputs[i] for i, k in enumerate(self.keys)}
            stream.wait_stream(torch.cuda.current_stream(dev))
            with torch.cuda.stream(stream):
                self._forward(feed)  # warm-up outside the capture: kernel choice, cuBLAS workspaces
            torch.cuda.current_stream(dev).wait_stream(stream)
            graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(graph, pool=pool, stream=stream, capture_error_mode="thread_local"):
                output = self._forward(feed)
            self._graphs[shape] = _Graph(graph, host, inputs, output, torch.cuda.Event())
        torch.cuda.synchronize(dev)
        self.capture_s = time.perf_counter() - t0
        self.capture_bytes = torch.cuda.memory_reserved(dev) - reserved
        logger.info(
            "captured %d CUDA graphs of the encoder (batches %s x lengths %s) in %.1f s, %.2f GiB of GPU memory",
            len(self._graphs),
            ",".join(map(str, self.buckets.batch)),
            ",".join(map(str, self.buckets.length)),
            self.capture_s,
            self.capture_bytes / 2**30,
        )

    @torch.inference_mode()
    def _run_bucket_tensor(self, shape: Shape, stacked: np.ndarray, rows: int) -> torch.Tensor:
        g = self._graphs.get(shape)
        if g is None:  # not captured (left padding): the eager forward on the padded inputs
            return super()._run_bucket_tensor(shape, stacked, rows)
        with self._lock:  # on the caller's stream (the search worker's batch thread has its own)
            stream = torch.cuda.current_stream(self.device)
            g.staged.synchronize()  # this graph's previous input copy has left the host buffer
            g.host.numpy()[...] = stacked
            g.inputs.copy_(g.host, non_blocking=True)
            g.staged.record(stream)
            if self._replayed is not None:
                stream.wait_event(self._replayed)
            else:
                self._replayed = torch.cuda.Event()
            g.graph.replay()
            out = g.output[:rows].clone()  # the next replay overwrites the output buffer
            self._replayed.record(stream)
            return out


def make_encoder(config: EncoderConfig) -> HFEncoder:
    """The service's encoder: replayed from CUDA graphs on CUDA (unless `config.cuda_graphs` is false), else eager."""
    if config.cuda_graphs and resolve_device(config.device).type == "cuda":
        return CudaGraphEncoder(config)
    return HFEncoder(config)
