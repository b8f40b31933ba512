"""The supervised warm start of the tiny policy: synthetic meta-episode transcripts and a short CPU pass."""

from __future__ import annotations

from mr_search_embedded.warmstart.train import WarmStartConfig, ensure_warmstart

__all__ = ["WarmStartConfig", "ensure_warmstart"]
