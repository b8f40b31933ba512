"""Exact inner-product search in torch: fp16 matrix sharded over the visible GPUs, float32 on CPU.

Standalone (torch + numpy only). Each shard is scored in chunks of rows with a per-chunk top-k
and one final merge, which beats one `q @ E.T` + `topk` over the whole row (~4,900
vs ~3,300 q/s at 21M x 768 on an H200, retrieval/benchmarks/bench_retrieval_gpu.py)
and bounds the score buffer to batch x chunk.

The per-chunk top-k is grouped (exact): the max over each group of `group` consecutive rows, `topk`
over those group maxima, then `topk` over the k*group scores of the k best groups. The k best rows
always lie in the k groups with the highest maxima (a group holding the k-th best row has a maximum
at least that high, and only k-1 rows beat it). `torch.topk` over 1M-wide rows is ~70% of search
time; grouping took 4,800 -> 6,200 q/s at batch 256 on an H200. Among rows with
equal scores, which ones are returned may differ from a plain `topk`; the scores are the same.

On a GPU with Triton the default method is the exact two-stage search of `block_max.py` instead: a
fused kernel writes only per-block score maxima (never the batch x rows score matrix), then the rows
of the best blocks are re-scored exactly. `method="grouped"` forces the chunked path above; 'auto'
picks two-stage where the kernel can run and the grouped path elsewhere (CPU, no Triton).
"""

from __future__ import annotations

import itertools
import logging
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import torch

from mr_search_retrieval.indexes.block_max import DEFAULT_BLOCK, resolve_method, triton_ready, two_stage_topk

logger = logging.getLogger(__name__)

DEFAULT_CHUNK_ROWS = 1 << 20
DEFAULT_GROUP = 64  # rows per group of the grouped top-k; 1 = plain torch.topk
_COPY_ROWS = 1 << 18  # rows copied host -> device at a time (bounds host memory when the source is mmap'd)


def default_devices(device: str = "auto") -> list[torch.device]:
    """'auto': every visible GPU, else the CPU; 'cuda': every visible GPU; 'cpu' / 'cuda:N': that one."""
    if device in ("auto", "cuda"):
        if torch.cuda.is_available():
            return [torch.device(f"cuda:{i}") for i in range(torch.cuda.device_count())]
        if device == "cuda":
            raise ValueError("device 'cuda' was requested but CUDA is not available; use 'cpu' or 'auto'")
        return [torch.device("cpu")]
    return [torch.device(device)]


def _default_dtype(devices: Sequence[torch.device]) -> torch.dtype:
    # fp16 matmul on CPU is slow and imprecise to accumulate: CPU keeps float32.
    return torch.float16 if all(d.type == "cuda" for d in devices) else torch.float32


def _split(n: int, parts: int) -> list[tuple[int, int]]:
    bounds = np.linspace(0, n, parts + 1).astype(np.int64)
    return [(int(a), int(b)) for a, b in itertools.pairwise(bounds)]


class TorchExactIndex:
    """Exact top-k by inner product over row vectors held as `shards` (contiguous row ranges, one per device)."""

    def __init__(
        self,
        shards: Sequence[torch.Tensor],
        chunk_rows: int = DEFAULT_CHUNK_ROWS,
        group: int = DEFAULT_GROUP,
        method: str = "auto",
        block: int = DEFAULT_BLOCK,
    ) -> None:
        if not shards:
            raise ValueError("TorchExactIndex needs at least one shard")
        dims = {int(s.shape[1]) for s in shards}
        if len(dims) != 1 or any(s.ndim != 2 for s in shards):
            raise ValueError(f"all shards must be 2-D with one width, got shapes {[tuple(s.shape) for s in shards]}")
        if chunk_rows <= 0:
            raise ValueError(f"chunk_rows must be > 0, got {chunk_rows}")
        if group < 1:
            raise ValueError(f"group must be >= 1 (1 = plain top-k), got {group}")
        if block < 16 or block & (block - 1):
            raise ValueError(f"block (rows per two-stage block) must be a power of two >= 16, got {block}")
        self.group = int(group)
        self.block = int(block)
        self.shards = list(shards)
        self.method = resolve_method(method, self.shards[0].device)
        self._kernel = [triton_ready(s.device) for s in self.shards]
        self.dim = dims.pop()
        self.chunk_rows = int(chunk_rows)
        sizes = [int(s.shape[0]) for s in self.shards]
        self.offsets = np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)
        self.ntotal = int(self.offsets[-1])
        logger.info("torch exact index: %d rows, method %s, Triton kernel %s", self.ntotal, self.method, self._kernel)
        if self.method == "two_stage":
            for shard, kernel in zip(self.shards, self._kernel, strict=True):
                if kernel:
                    from mr_search_retrieval.indexes.triton_block_max import warm_up

                    warm_up(shard, self.block)

    @classmethod
    def from_numpy(
        cls,
        matrix: np.ndarray,
        device: str = "auto",
        dtype: torch.dtype | None = None,
        chunk_rows: int = DEFAULT_CHUNK_ROWS,
    ) -> TorchExactIndex:
        """Copy a (n, dim) array (may be an np.memmap) onto the devices, one contiguous shard each."""
        devices = default_devices(device)
        dtype = dtype or _default_dtype(devices)
        shards = []
        for dev, (a, b) in zip(devices, _split(matrix.shape[0], len(devices)), strict=True):
            shard = torch.empty((b - a, matrix.shape[1]), dtype=dtype, device=dev)
            for s in range(a, b, _COPY_ROWS):
                e = min(b, s + _COPY_ROWS)
                shard[s - a : e - a] = torch.from_numpy(np.array(matrix[s:e])).to(dev, dtype)
            shards.append(shard)
        logger.info("torch exact index: %d x %d %s on %s", matrix.shape[0], matrix.shape[1], dtype, devices)
        return cls(shards, chunk_rows=chunk_rows)

    @classmethod
    def from_file(
        cls,
        path: str | Path,
        device: str = "auto",
        dtype: torch.dtype | None = None,
        chunk_rows: int = DEFAULT_CHUNK_ROWS,
    ) -> TorchExactIndex:
        """Load a .npy embedding matrix through mmap, so host memory never holds a full float32 copy."""
        path = Path(path)
        if not path.is_file():
            raise FileNotFoundError(f"embedding matrix {path} does not exist; build it with mr-search-build-index")
        return cls.from_numpy(np.load(path, mmap_mode="r"), device=device, dtype=dtype, chunk_rows=chunk_rows)

    @classmethod
    def from_random(
        cls,
        n: int,
        dim: int,
        device: str = "auto",
        dtype: torch.dtype | None = None,
        chunk_rows: int = DEFAULT_CHUNK_ROWS,
        seed: int = 0,
        normalize: bool = True,
    ) -> TorchExactIndex:
        """A random (n, dim) index generated on the devices themselves (e.g. 21M x 768 fp16 for a GPU benchmark)."""
        devices = default_devices(device)
        dtype = dtype or _default_dtype(devices)
        shards = []
        for i, (dev, (a, b)) in enumerate(zip(devices, _split(n, len(devices)), strict=True)):
            gen = torch.Generator(device=dev).manual_seed(seed + i)
            shard = torch.empty((b - a, dim), dtype=dtype, device=dev)
            for s in range(0, b - a, _COPY_ROWS):
                e = min(b - a, s + _COPY_ROWS)
                block = torch.randn((e - s, dim), generator=gen, device=dev, dtype=torch.float32)
                if normalize:
                    block = torch.nn.functional.normalize(block, dim=-1)
                shard[s:e] = block.to(dtype)
            shards.append(shard)
        return cls(shards, chunk_rows=chunk_rows)

    def _chunk_topk(self, scores: torch.Tensor, k: int) -> tuple[torch.Tensor, torch.Tensor]:
        """Top-k (values, column positions) of each row of a (b, c) score block, through group maxima."""
        b, c = scores.shape
        g = self.group
        if g == 1 or c % g or c // g < k:  # ragged last chunk or tiny index: plain top-k
            return torch.topk(scores, min(k, c), dim=1)
        grouped = scores.view(b, c // g, g)
        _, best_groups = torch.topk(grouped.amax(dim=2), k, dim=1)  # (b, k)
        cand = torch.gather(grouped, 1, best_groups.unsqueeze(-1).expand(b, k, g)).reshape(b, k * g)
        v, pos = torch.topk(cand, k, dim=1)
        return v, torch.gather(best_groups, 1, pos // g) * g + pos % g

    def _search_shard(self, n: int, q: torch.Tensor, k: int) -> tuple[torch.Tensor, ...]:
        shard, offset = self.shards[n], int(self.offsets[n])
        q = q.to(shard.device, shard.dtype, non_blocking=True)
        if self.method == "two_stage":
            v, i = two_stage_topk(q, shard, k, self.block, chunk_rows=self.chunk_rows, use_kernel=self._kernel[n])
            return v, i + offset
        vals, idxs = [], []
        for start in range(0, shard.shape[0], self.chunk_rows):
            block = shard[start : start + self.chunk_rows]
            v, i = self._chunk_topk(q @ block.T, k)
            vals.append(v)
            idxs.append(i + (start + offset))
        v, i = torch.cat(vals, dim=1), torch.cat(idxs, dim=1)
        if v.shape[1] > k:
            v, pos = torch.topk(v, k, dim=1)
            i = torch.gather(i, 1, pos)
        return v, i

    @torch.inference_mode()
    def search_tensor(self, queries: torch.Tensor, k: int) -> tuple[torch.Tensor, torch.Tensor]:
        """Like `search` but stays in torch: float32 scores and int64 row ids on the first shard's device."""
        k = min(int(k), self.ntotal)
        # Queue every shard's work before collecting any: GPUs run their shards concurrently.
        parts = [self._search_shard(n, queries, k) for n in range(len(self.shards))]
        home = self.shards[0].device
        v = torch.cat([p[0].to(home).float() for p in parts], dim=1)
        i = torch.cat([p[1].to(home) for p in parts], dim=1)
        if v.shape[1] > k:
            v, pos = torch.topk(v, k, dim=1)
            i = torch.gather(i, 1, pos)
        return v, i

    def search(self, queries: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
        """queries: (n, dim). Returns scores float32 (n, k) and row ids int64 (n, k), best first."""
        q = torch.from_numpy(np.ascontiguousarray(queries, dtype=np.float32))
        if q.ndim != 2 or q.shape[1] != self.dim:
            raise ValueError(f"queries must have shape (n, {self.dim}), got {tuple(q.shape)}")
        v, i = self.search_tensor(q, k)
        return v.cpu().numpy(), i.cpu().numpy()
