"""Fused Triton kernel of the two-stage search's stage 1: per-block maxima of `queries @ rows.T`.

Each program computes one (BLOCK_M queries x BLOCK_N rows) tile of scores with `tl.dot` (fp32
accumulation) over the whole dimension, then writes only the maximum over each group of `block`
consecutive rows of the tile: GROUPS = BLOCK_N // block maxima per query. The (b, n) score matrix
is never written. Programs that share a tile of rows are adjacent in the launch order, so a tile is
read from HBM about once and the other query tiles find it in L2.

Imported only where CUDA and Triton are present (see block_max.triton_ready); Triton's interpreter
(TRITON_INTERPRET=1) runs it on CPU tensors, which is how its CPU test checks it.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

import torch
import triton
import triton.language as tl

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class KernelConfig:
    """Tile shape and pipelining of the block-max kernel."""

    block_m: int = 128
    block_n: int = 128
    block_k: int = 64
    num_warps: int = 8
    num_stages: int = 3

    def __post_init__(self) -> None:
        for name in ("block_m", "block_n", "block_k"):
            v = getattr(self, name)
            if v < 16 or v & (v - 1):
                raise ValueError(f"{name} must be a power of two >= 16, got {v}")
        if self.num_warps not in (1, 2, 4, 8, 16) or self.num_stages < 1:
            raise ValueError(f"num_warps must be 1/2/4/8/16, num_stages >= 1; got {self.num_warps}, {self.num_stages}")


def default_config(batch: int, block: int) -> KernelConfig:
    """Tile shape by batch size, from retrieval/benchmarks/retrieval_kernel_sweep.py
    on an H200 (21M x 768 fp16, block 128).

    Up to 64 queries the kernel is bound by reading the index (~7.3 ms, ~4.4 TB/s): a short query tile wastes
    no work. From 128 queries it is bound by the tensor cores (~530-550 TFLOP/s at 128 x 256 tiles).
    """
    if batch <= 16:
        return KernelConfig(block_m=16, block_n=max(block, 128), block_k=128, num_warps=4, num_stages=4)
    if batch <= 64:
        return KernelConfig(block_m=64, block_n=max(block, 128), block_k=64, num_warps=4, num_stages=4)
    return KernelConfig(block_m=128, block_n=max(block, 256), block_k=64, num_warps=8, num_stages=3)


@triton.jit(do_not_specialize=["B", "num_m"])  # one compiled kernel per tile config, whatever the batch size
def _block_max_kernel(
    q_ptr,
    e_ptr,
    out_ptr,
    B,
    N,
    stride_q,
    stride_e,
    stride_o,
    num_m,
    D: tl.constexpr,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    BLOCK_K: tl.constexpr,
    GROUP: tl.constexpr,
    EVEN_K: tl.constexpr,
):
    pid = tl.program_id(0)
    pid_m = pid % num_m  # query tiles of one row tile run side by side: the row tile is read once from HBM
    pid_n = pid // num_m
    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    offs_k = tl.arange(0, BLOCK_K)
    rows_m = tl.minimum(offs_m, B - 1)  # clamped: loads stay in bounds without masks, results are masked below
    rows_n = tl.minimum(offs_n, N - 1).to(tl.int64)
    q_ptrs = q_ptr + rows_m[:, None] * stride_q + offs_k[None, :]
    e_ptrs = e_ptr + rows_n[None, :] * stride_e + offs_k[:, None]
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k0 in range(0, D, BLOCK_K):
        if EVEN_K:
            q = tl.load(q_ptrs)
            e = tl.load(e_ptrs)
        else:
            kmask = (k0 + offs_k) < D
            q = tl.load(q_ptrs, mask=kmask[None, :], other=0.0)
            e = tl.load(e_ptrs, mask=kmask[:, None], other=0.0)
        acc = tl.dot(q, e, acc)
        q_ptrs += BLOCK_K
        e_ptrs += BLOCK_K
    acc = tl.where(offs_n[None, :] < N, acc, float("-inf"))
    GROUPS: tl.constexpr = BLOCK_N // GROUP
    maxima = tl.max(tl.reshape(acc, (BLOCK_M, GROUPS, GROUP)), axis=2)  # (BLOCK_M, GROUPS)
    cols = pid_n * GROUPS + tl.arange(0, GROUPS)
    n_groups = tl.cdiv(N, GROUP)
    out_ptrs = out_ptr + offs_m[:, None] * stride_o + cols[None, :]
    tl.store(out_ptrs, maxima, mask=(offs_m[:, None] < B) & (cols[None, :] < n_groups))


def block_max_triton(
    queries: torch.Tensor, rows: torch.Tensor, block: int, config: KernelConfig | None = None
) -> torch.Tensor:
    """(b, ceil(n / block)) float32 maxima of `queries @ rows.T` over blocks of `block` rows (fp32 accumulation)."""
    if queries.dtype != rows.dtype or queries.shape[1] != rows.shape[1]:
        raise ValueError(
            f"queries {tuple(queries.shape)} {queries.dtype} do not match rows {tuple(rows.shape)} {rows.dtype}"
        )
    if block < 16 or block & (block - 1):
        raise ValueError(f"block must be a power of two >= 16, got {block}")
    queries, rows = queries.contiguous(), rows.contiguous()
    b, d = queries.shape
    n = rows.shape[0]
    cfg = config or default_config(b, block)
    if cfg.block_n % block:
        raise ValueError(f"kernel block_n={cfg.block_n} must be a multiple of block={block}")
    out = torch.empty((b, triton.cdiv(n, block)), dtype=torch.float32, device=rows.device)
    if b == 0 or n == 0:
        return out
    num_m = triton.cdiv(b, cfg.block_m)
    grid = (num_m * triton.cdiv(n, cfg.block_n),)
    _block_max_kernel[grid](
        queries,
        rows,
        out,
        b,
        n,
        queries.stride(0),
        rows.stride(0),
        out.stride(0),
        num_m,
        D=d,
        BLOCK_M=cfg.block_m,
        BLOCK_N=cfg.block_n,
        BLOCK_K=cfg.block_k,
        GROUP=block,
        EVEN_K=d % cfg.block_k == 0,
        num_warps=cfg.num_warps,
        num_stages=cfg.num_stages,
    )
    return out


def warm_up(rows: torch.Tensor, block: int) -> None:
    """Compile the kernel for each batch-size class of default_config now, not on a live request.

    On the real rows: Triton specializes on the row count (e.g. 1 or a multiple of 16), so a stand-in would
    compile other variants. Costs one pass over the rows per class (~10 ms each at 21M rows on an H200).
    """
    for batch in (1, 64, 128):
        block_max_triton(torch.zeros((batch, rows.shape[1]), dtype=rows.dtype, device=rows.device), rows, block)
