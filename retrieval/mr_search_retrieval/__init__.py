"""MR-Search retrieval side service: a batched, Search-R1-compatible `/retrieve` server (dense + BM25)."""

from __future__ import annotations

__version__ = "0.1.0"
