"""Exact two-stage top-k by inner product: block maxima first, then exact re-scoring of the best blocks.

Stage 1 scores every row but keeps only the maximum of each block of `block` consecutive rows:
(b, n) scores become (b, ceil(n / block)) maxima. On a GPU a fused Triton kernel
(`triton_block_max.py`) does this tile by tile and never writes the (b, n) score matrix, which at
21M rows and batch 256 is ~10 GB of fp16 and, with `torch.topk` over it, most of the search time.
Stage 2 takes the `k + margin` blocks with the largest maxima, re-scores their rows exactly
(a small batched matmul) and returns the top k of those candidates.

Why it is exact: let M be the k-th largest block maximum. The k selected blocks hold k distinct rows
(their maxima) scoring >= M, while every row of an unselected block scores <= its block's maximum
<= M. So the k best candidates have exactly the k best scores of the whole index; only rows whose
score equals M (a tie) could be exchanged for an equal-scoring row elsewhere, as with any top-k.
Stage 1 may accumulate in another order (or precision) than stage 2: `margin` extra blocks cover
near-ties at the boundary (rounding is monotone, so only rows within accumulation noise of M can be
affected). Selecting more blocks never breaks the argument.

Everything here but the kernel is plain torch and runs on the CPU too (tests, fallback).
"""

from __future__ import annotations

import logging

import torch

logger = logging.getLogger(__name__)

DEFAULT_BLOCK = 128  # rows per block of the two-stage search
DEFAULT_MARGIN = 2  # extra blocks beyond k re-scored in stage 2
RESCORE_BYTES = 1 << 30  # candidate rows gathered at a time in stage 2 (bounds its memory at large k)
METHODS = ("auto", "two_stage", "grouped")


def triton_ready(device: torch.device) -> bool:
    """True when the fused block-max kernel can run on `device`: a CUDA device and an importable Triton."""
    if device.type != "cuda":
        return False
    try:
        import triton  # noqa: F401
    except ImportError:
        return False
    return True


def resolve_method(method: str, device: torch.device, kernel_ok: bool | None = None) -> str:
    """'auto' -> 'two_stage' where the Triton kernel runs (CUDA + Triton), else 'grouped' (chunked grouped top-k).

    'two_stage' without the kernel runs its stage 1 in plain torch (chunked matmul + block max): exact but no
    faster than 'grouped'; it exists for tests and as the reference of the kernel path.
    """
    if method not in METHODS:
        raise ValueError(f"search method {method!r} is not valid; choose one of {', '.join(map(repr, METHODS))}")
    if method != "auto":
        return method
    ok = triton_ready(device) if kernel_ok is None else kernel_ok
    return "two_stage" if ok else "grouped"


def block_max_torch(queries: torch.Tensor, rows: torch.Tensor, block: int, chunk_rows: int) -> torch.Tensor:
    """Reference stage 1: (b, ceil(n / block)) float32 maxima of `queries @ rows.T` per block of rows, in chunks."""
    n = rows.shape[0]
    chunk = max(block, chunk_rows // block * block)  # whole blocks per chunk
    parts = []
    for start in range(0, n, chunk):
        scores = (queries @ rows[start : start + chunk].T).float()
        c = scores.shape[1]
        pad = -c % block
        if pad:
            scores = torch.nn.functional.pad(scores, (0, pad), value=float("-inf"))
        parts.append(scores.view(scores.shape[0], -1, block).amax(dim=2))
    return torch.cat(parts, dim=1)


def select_blocks(block_max: torch.Tensor, k: int, margin: int = DEFAULT_MARGIN) -> torch.Tensor:
    """(b, kb) ids of the kb = min(k + margin, nblocks) blocks with the largest maxima (any order)."""
    if k < 1 or margin < 0:
        raise ValueError(f"need k >= 1 and margin >= 0, got k={k}, margin={margin}")
    kb = min(k + margin, block_max.shape[1])
    return torch.topk(block_max, kb, dim=1, sorted=False).indices


def rescore_blocks(
    queries: torch.Tensor,
    rows: torch.Tensor,
    blocks: torch.Tensor,
    block: int,
    k: int,
    max_bytes: int = RESCORE_BYTES,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Stage 2: exact top-k (float32 scores, int64 row ids, best first) among the rows of `blocks` (b, kb).

    Scores are computed like the plain path's `queries @ rows.T` (same dtype), so they are the same values.
    Queries are re-scored in slices whose gathered candidate rows stay under `max_bytes`.
    """
    n, d = rows.shape
    b, kb = blocks.shape
    cand = (blocks.unsqueeze(-1) * block + torch.arange(block, device=blocks.device)).reshape(b, kb * block)
    valid = cand < n  # the last block may be ragged
    safe = torch.where(valid, cand, torch.zeros_like(cand))
    per_query = kb * block * d * rows.element_size()
    step = max(1, max_bytes // per_query)
    k = min(k, n)  # every selected block but a ragged last one is full: >= k valid candidates per query
    vals, ids = [], []
    for s in range(0, b, step):
        e = min(b, s + step)
        gathered = rows[safe[s:e]]  # (e-s, kb*block, d)
        scores = torch.bmm(gathered, queries[s:e].to(rows.dtype).unsqueeze(-1)).squeeze(-1).float()
        scores = scores.masked_fill(~valid[s:e], float("-inf"))
        v, pos = torch.topk(scores, k, dim=1)
        vals.append(v)
        ids.append(torch.gather(cand[s:e], 1, pos))
    return torch.cat(vals), torch.cat(ids)


def two_stage_topk(
    queries: torch.Tensor,
    rows: torch.Tensor,
    k: int,
    block: int = DEFAULT_BLOCK,
    margin: int = DEFAULT_MARGIN,
    chunk_rows: int = 1 << 20,
    use_kernel: bool | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Exact top-k of `queries @ rows.T` (float32 scores, int64 row ids, best first) by block maxima + re-scoring.

    use_kernel: None picks the fused Triton kernel when it can run (CUDA + Triton), else the torch stage 1.
    """
    queries = queries.to(rows.device, rows.dtype)
    if use_kernel is None:
        use_kernel = triton_ready(rows.device)
    if use_kernel:
        from mr_search_retrieval.indexes.triton_block_max import block_max_triton

        maxima = block_max_triton(queries, rows, block)
    else:
        maxima = block_max_torch(queries, rows, block, chunk_rows)
    return rescore_blocks(queries, rows, select_blocks(maxima, k, margin), block, k)
