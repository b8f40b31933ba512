"""Fixtures shared by the mr_search tests."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
import torch


class ForcedTokens(torch.nn.Module):
    """Wraps a causal LM and forces the given token ids, one per decoding step (then the model's own choice).

    The tiny test models are random: forcing a turn's first tokens makes them write a search or an answer.
    """

    def __init__(self, model: torch.nn.Module, forced: list[int]) -> None:
        super().__init__()
        self.model, self.forced, self.step = model, forced, 0
        self.generation_config = model.generation_config

    def forward(self, **kwargs: Any) -> Any:
        out = self.model(**kwargs)
        if self.step < len(self.forced):
            out.logits[:, -1, self.forced[self.step]] += 1e4
        self.step += 1
        return out


@pytest.fixture
def forced_tokens() -> Callable[[torch.nn.Module, list[int]], torch.nn.Module]:
    """``forced_tokens(model, token_ids)``: the model, made to emit ``token_ids`` first."""
    return ForcedTokens
