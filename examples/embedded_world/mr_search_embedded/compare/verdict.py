"""The reflection-gain test of the earlier harness, kept as a secondary line: do MR-Search's later attempts beat its
first (EM@k - EM@1 positive), and by at least twice the seed spread more than the K = 1 baseline's do?

"The seed spread" is the larger of the two methods' sample standard deviations of the gain over seeds (the
stricter reading: a lucky or unlucky seed of either run widens it). The per-seed paired difference (both runs of a
seed share the warm start and the data order) is reported beside it, not used for the test.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from mr_search_embedded.compare.aggregate import AVERAGE, Spread
from mr_search_embedded.compare.arms import K1 as BASELINE
from mr_search_embedded.compare.arms import MR


@dataclass(frozen=True)
class GainVerdict:
    """MR-Search's and the baseline's reflection gain at ``attempt`` (points, average over data sources)."""

    attempt: int
    mr: Spread
    baseline: Spread
    paired: Spread  # per seed: MR-Search's gain minus the baseline's

    @property
    def margin(self) -> float:
        return self.mr.mean - self.baseline.mean

    @property
    def spread(self) -> float:
        return max(self.mr.std, self.baseline.std)

    @property
    def decided(self) -> bool:
        """One seed has no spread: the test needs two or more."""
        return self.mr.n > 1

    @property
    def met(self) -> bool:
        return self.decided and self.mr.mean > 0 and self.margin >= 2 * self.spread

    def text(self) -> str:
        head = (
            f"EM@{self.attempt} - EM@1: MR-Search {self.mr.text()}, baseline {self.baseline.text()}; margin "
            f"{self.margin:+.1f} (per seed {self.paired.text()})"
        )
        if not self.decided:
            return f"{head}; one seed, no spread: not decided (run SEEDS >= 2)."
        reasons = []
        if self.mr.mean <= 0:
            reasons.append("MR-Search's gain is not positive")
        if self.margin < 2 * self.spread:
            reasons.append(f"the margin is below twice the seed spread ({2 * self.spread:.1f})")
        if not reasons:
            return f"{head}; twice the seed spread is {2 * self.spread:.1f}: **met**."
        return f"{head}: **not met**, " + " and ".join(reasons) + "."

    @classmethod
    def from_dict(cls, entry: Mapping[str, Any]) -> GainVerdict:
        """The inverse of ``as_dict`` (comparison.json's ``verdict``)."""
        spreads = (Spread.from_dict(entry[k]) for k in ("mr_search", "baseline", "paired"))
        return cls(int(entry["attempt"]), *spreads)

    def as_dict(self) -> dict[str, Any]:
        return {
            "attempt": self.attempt,
            "mr_search": self.mr.as_dict(),
            "baseline": self.baseline.as_dict(),
            "paired": self.paired.as_dict(),
            "margin": self.margin,
            "spread": self.spread,
            "met": self.met,
        }


def _gain(curve: Sequence[float], attempt: int) -> float:
    return float(curve[attempt - 1] - curve[0])


def gain_verdict(per_seed: Sequence[Mapping[str, Any]], attempt: int) -> GainVerdict:
    """The test at ``attempt`` (1-based) from the comparison's ``per_seed`` entries (held-out EM curves, %)."""
    if not per_seed:
        raise ValueError("gain_verdict: no finished seed")
    if attempt < 2:
        raise ValueError(f"gain_verdict: attempt {attempt}; the reflection gain needs an attempt >= 2")
    k_eval = min(len(s["heldout"][m][AVERAGE]) for s in per_seed for m in (MR, BASELINE))
    if attempt > k_eval:
        raise ValueError(f"gain_verdict: attempt {attempt} past the evaluation's K_eval = {k_eval}")
    mr = [_gain(s["heldout"][MR][AVERAGE], attempt) for s in per_seed]
    base = [_gain(s["heldout"][BASELINE][AVERAGE], attempt) for s in per_seed]
    return GainVerdict(
        attempt, Spread.of(mr), Spread.of(base), Spread.of([a - b for a, b in zip(mr, base, strict=True)])
    )
