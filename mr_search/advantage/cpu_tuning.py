"""Performance-only machinery of ``spread_to_tokens``: huge-page buffers, numba dispatch, row blocks on threads."""

from __future__ import annotations

import functools
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import TypeVar

import numpy as np
import torch

from mr_search.advantage.spread_kernel import compiled_kernel

T = TypeVar("T")

# Tokens per row block without numba: int64 index of 256 KiB, and no larger than torch's intra-op grain size
# (32768), so each block's ops run on one thread: on a busy machine, thread barriers stall far longer than they save.
_BLOCK_ELEMENTS = 1 << 15


def spread_table(table: torch.Tensor, attempt_ids: torch.Tensor, response_mask: torch.Tensor) -> torch.Tensor:
    """``out[b, t] = table[b, attempt_ids[b, t] + 1] * response_mask[b, t]``, as fast as the host allows.

    On CPU: the numba kernel when it can read the tensors, else torch's gather in row blocks; either way row
    ranges run on torch's threads. Elsewhere: one gather.

    Args:
        table: float ``[B, K+1]``, column 0 the padding's value (0), column s+1 attempt s's advantage.
        attempt_ids: int ``[B, T]`` attempt index of each token, -1 on padding.
        response_mask: ``[B, T]`` 0/1 (or bool).

    Raises:
        ValueError: an attempt id lies outside ``-1..K-1``.
    """
    num_rows, width = attempt_ids.shape
    num_attempts = table.shape[1] - 1
    out = _output_buffer((num_rows, width), table.dtype, table.device)
    if out.device.type != "cpu":
        _spread_rows(out, table, attempt_ids, response_mask, 0, num_rows, max(num_rows, 1), num_attempts)
        return out
    kernel = _compiled_spread(table, attempt_ids, response_mask)
    if kernel is not None:
        arrays = (table.numpy(), attempt_ids.numpy(), response_mask.numpy(), out.numpy())
        invalid = sum(_run_on_threads(lambda lo, hi: kernel(*arrays, lo, hi), num_rows, 1))
        if invalid:
            raise ValueError(
                f"attempt ids must lie in 0..{num_attempts - 1}, or be -1 on padding: {invalid} token(s) do not"
            )
        return out
    # Without numba: blocks of rows keep the int64 index temporary small (in cache, reused heap memory instead of
    # a fresh page-faulted allocation); each block is below torch's grain size, so no op inside a worker waits on a
    # thread barrier.
    block = max(1, _BLOCK_ELEMENTS // max(width, 1))
    _run_on_threads(
        lambda lo, hi: _spread_rows(out, table, attempt_ids, response_mask, lo, hi, block, num_attempts),
        num_rows,
        block,
    )
    return out


def _output_buffer(shape: tuple[int, int], dtype: torch.dtype, device: torch.device) -> torch.Tensor:
    """An uninitialised tensor; on CPU backed by numpy, whose allocator asks Linux for transparent huge pages.

    Writing a fresh [2560, 4096] float32 tensor from torch's allocator takes thousands of 4 KiB page faults, which
    cost more than the whole computation on a busy or virtualised host; huge pages cut them ~500-fold.
    """
    if device.type == "cpu":
        try:
            np_dtype = torch.empty(0, dtype=dtype).numpy().dtype
        except TypeError:  # bfloat16 and other dtypes numpy lacks
            pass
        else:
            return torch.from_numpy(np.empty(shape, dtype=np_dtype))
    return torch.empty(shape, dtype=dtype, device=device)


def _compiled_spread(table: torch.Tensor, attempt_ids: torch.Tensor, response_mask: torch.Tensor):
    """The numba kernel when it is installed and the tensors are plain CPU numbers it can read, else None."""
    if any(t.requires_grad or t.device.type != "cpu" for t in (table, attempt_ids, response_mask)):
        return None
    if table.dtype not in (torch.float32, torch.float64) or response_mask.dtype in (torch.bfloat16, torch.float16):
        return None
    if attempt_ids.dtype.is_floating_point or attempt_ids.dtype.is_complex or attempt_ids.dtype == torch.bool:
        return None
    return compiled_kernel()


def _run_on_threads(work: Callable[[int, int], T], num_rows: int, granule: int) -> list[T]:
    """Runs ``work(first, last)`` over contiguous row ranges (multiples of ``granule``), one per torch thread."""
    num_granules = -(-num_rows // granule)
    workers = min(torch.get_num_threads(), num_granules)
    if workers <= 1:
        return [work(0, num_rows)]
    rows_per_worker = -(-num_granules // workers) * granule
    bounds = [(w * rows_per_worker, min(num_rows, (w + 1) * rows_per_worker)) for w in range(workers)]
    futures = [_pool(workers).submit(work, lo, hi) for lo, hi in bounds[1:] if lo < hi]
    results = [work(*bounds[0])]
    return results + [future.result() for future in futures]


def _spread_rows(
    out: torch.Tensor,
    table: torch.Tensor,
    attempt_ids: torch.Tensor,
    response_mask: torch.Tensor,
    first: int,
    last: int,
    block: int,
    num_attempts: int,
) -> None:
    """Fills ``out[first:last]`` block by block: ``table[b, attempt_ids[b, t] + 1] * response_mask[b, t]``."""
    for start in range(first, last, block):
        rows = slice(start, min(start + block, last))
        index = attempt_ids[rows].to(device=out.device, dtype=torch.int64) + 1
        block_out = out[rows]
        try:
            torch.gather(table[rows], 1, index, out=block_out)
        except (RuntimeError, IndexError) as error:
            raise ValueError(f"attempt ids must lie in 0..{num_attempts - 1}, or be -1 on padding: {error}") from error
        block_out.mul_(response_mask[rows].to(out.device))  # as verl's estimators: advantage * mask


@functools.cache
def _pool(workers: int) -> ThreadPoolExecutor:
    """A process-wide pool for spread_to_tokens' row ranges (torch ops release the GIL)."""
    return ThreadPoolExecutor(max_workers=workers - 1, thread_name_prefix="mr-search-spread")
