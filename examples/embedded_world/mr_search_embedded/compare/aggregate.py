"""Held-out EM per attempt over seeds: mean and spread per method, and the reflection gain (EM@k - EM@1).

Input: the ``results.json`` of ``python -m mr_search.eval`` (``methods[m]["attempts"][k]["em"][source]``, in %),
one per seed, plus the warm-started starting point (evaluated once: greedy decoding makes it seed-independent).
"""

from __future__ import annotations

import json
import math
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

AVERAGE: Final = "average"


@dataclass(frozen=True)
class Spread:
    """Mean, sample standard deviation (0 for one value), min and max of the per-seed values."""

    mean: float
    std: float
    low: float
    high: float
    n: int

    @classmethod
    def of(cls, values: Sequence[float]) -> Spread:
        if not values:
            raise ValueError("Spread.of: no values (no seed finished?)")
        finite = [float(v) for v in values]
        if any(math.isnan(v) for v in finite):
            raise ValueError(f"Spread.of: NaN among {finite}")
        std = statistics.stdev(finite) if len(finite) > 1 else 0.0
        return cls(statistics.fmean(finite), std, min(finite), max(finite), len(finite))

    def text(self, digits: int = 1) -> str:
        """``mean ± std`` (just the mean for one seed)."""
        return f"{self.mean:.{digits}f}" if self.n == 1 else f"{self.mean:.{digits}f} ± {self.std:.{digits}f}"

    def as_dict(self) -> dict[str, float | int]:
        return {"mean": self.mean, "std": self.std, "min": self.low, "max": self.high, "n": self.n}

    @classmethod
    def from_dict(cls, entry: Mapping[str, Any]) -> Spread:
        """The inverse of ``as_dict`` (a comparison.json entry)."""
        return cls(entry["mean"], entry["std"], entry["min"], entry["max"], entry["n"])


def load_results(path: Path) -> Mapping[str, Any]:
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"{path}: no evaluation results (python -m mr_search.eval writes results.json)")
    data = json.loads(path.read_text(encoding="utf-8"))
    if "methods" not in data:
        raise ValueError(f"{path}: no 'methods' key; expected the results.json of python -m mr_search.eval")
    return data


def em_curve(results: Mapping[str, Any], method: str, source: str = AVERAGE) -> list[float]:
    """EM (%) of ``method`` at attempts 1..K_eval for ``source`` (default: the macro average)."""
    methods = results["methods"]
    if method not in methods:
        raise ValueError(f"method {method!r} not in the evaluation results; present: {sorted(methods)}")
    return [float(row["em"][source]) for row in methods[method]["attempts"]]


def em_by_attempt(curves: Sequence[Sequence[float]]) -> list[Spread]:
    """Per attempt index, the spread over seeds of the given EM curves (all of the same length)."""
    if not curves:
        raise ValueError("em_by_attempt: no curves")
    lengths = {len(c) for c in curves}
    if len(lengths) != 1:
        raise ValueError(f"em_by_attempt: curves of different lengths {sorted(lengths)}; evaluate with one K_eval")
    return [Spread.of([c[k] for c in curves]) for k in range(lengths.pop())]


def gain_by_attempt(curves: Sequence[Sequence[float]]) -> list[Spread]:
    """Reflection gain EM@k - EM@1 per attempt k, spread over seeds (k = 1 is 0 by definition)."""
    return em_by_attempt([[x - c[0] for x in c] for c in curves])


def sources_of(results: Mapping[str, Any]) -> list[str]:
    return [*results.get("data_sources", []), AVERAGE]
