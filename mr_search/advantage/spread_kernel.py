"""A compiled CPU kernel for spreading attempt advantages over tokens, used when numba is installed.

torch has no single CPU op for ``table[b, ids[b, t] + 1] * mask[b, t]``: a gather followed by a mixed-dtype multiply
reads and writes the ``[B, T]`` data twice and takes ~1.7 ns per token on one core, while one pass of a compiled
loop is bound by memory (~0.6 ns). The loop exploits the contract's layout (each attempt a contiguous run of
tokens, then padding): it reloads the advantage only where the attempt index changes, so the inner loop is a
compare, a multiply and a store. Any layout is still handled exactly; runs only make it faster.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable

import numpy as np

logger = logging.getLogger(__name__)

# (table [B, K+1], ids [B, T], mask [B, T], out [B, T], first row, last row) -> number of ids outside -1..K-1
SpreadKernel = Callable[[np.ndarray, np.ndarray, np.ndarray, np.ndarray, int, int], int]


def _spread_rows(
    table: np.ndarray, ids: np.ndarray, mask: np.ndarray, out: np.ndarray, first: int, last: int
) -> int:  # pragma: no cover - compiled by numba; tests call the compiled function
    """``out[b, t] = table[b, ids[b, t] + 1] * mask[b, t]`` for rows ``first..last-1``; counts invalid ids.

    An id outside ``-1..K-1`` is counted and treated as padding (column 0), so the caller can raise.
    """
    columns = table.shape[1]
    invalid = 0
    for b in range(first, last):
        row_table = table[b]
        row_ids = ids[b]
        row_mask = mask[b]
        row_out = out[b]
        current = 0
        value = row_table[0]
        for t in range(row_ids.shape[0]):
            column = row_ids[t] + 1
            if column != current:
                if column < 0 or column >= columns:
                    invalid += 1
                    column = 0
                value = row_table[column]
                current = column
            row_out[t] = value * row_mask[t]
    return invalid


@functools.cache
def compiled_kernel() -> SpreadKernel | None:
    """The numba-compiled kernel (cached on disk by numba), or None when numba is not installed.

    ``nogil`` lets the caller run row ranges on several threads; numba's own parallel layer is not used, as its
    default (workqueue) aborts the process when two threads launch parallel kernels at once.
    """
    try:
        import numba
    except ImportError:
        logger.info("numba is not installed: spread_to_tokens uses torch's gather on CPU (about 3x slower)")
        return None
    return numba.njit(nogil=True, cache=True, boundscheck=False)(_spread_rows)
