"""Validation passes: at which K and how fast; free of torch and verl for the end-of-run summary."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any

import numpy as np

from mr_search.contract import ROW_ATTEMPTS

VALIDATION_SPEED = "val-speed"


def validation_speed(meta_episodes: int, seconds: float) -> dict[str, float]:
    """How fast a validation pass went: its meta-episodes (questions x val n), wall seconds, meta-episodes/s."""
    if meta_episodes < 0 or seconds <= 0:
        raise ValueError(f"a validation pass of {meta_episodes} meta-episodes in {seconds} s is not a measurement")
    return {
        f"{VALIDATION_SPEED}/meta_episodes": float(meta_episodes),
        f"{VALIDATION_SPEED}/seconds": seconds,
        f"{VALIDATION_SPEED}/meta_episodes_per_s": meta_episodes / seconds,
    }


class AttemptsOnRows:
    """A dataloader whose batches carry ``attempts`` as every row's own K (``contract.ROW_ATTEMPTS``)."""

    def __init__(self, loader: Iterable[dict[str, Any]], attempts: int) -> None:
        if attempts < 1:
            raise ValueError(f"a validation pass at K = {attempts} attempts: K must be >= 1")
        self.loader = loader
        self.attempts = attempts

    def __iter__(self) -> Iterator[dict[str, Any]]:
        for batch in self.loader:
            rows = len(batch["raw_prompt"])
            yield {**batch, ROW_ATTEMPTS: np.full(rows, self.attempts, dtype=object)}

    def __len__(self) -> int:
        return len(self.loader)  # type: ignore[arg-type]

    def __getattr__(self, name: str) -> Any:
        return getattr(self.loader, name)
