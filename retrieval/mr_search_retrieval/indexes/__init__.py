"""Search indexes behind one small protocol: `search(queries, k) -> (scores, row ids)`."""

from __future__ import annotations

from typing import Protocol

import numpy as np


class VectorIndex(Protocol):
    """Inner-product search over row vectors; row i is corpus line i."""

    ntotal: int
    dim: int

    def search(self, queries: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
        """queries: float32 (n, dim). Returns scores float32 (n, k) and row ids int64 (n, k), best first."""
        ...


class TextIndex(Protocol):
    """Lexical search straight from query strings (BM25)."""

    ntotal: int

    def search_text(self, queries: list[str], k: int) -> tuple[np.ndarray, np.ndarray]:
        """Returns scores float32 (n, k) and row ids int64 (n, k), best first."""
        ...
