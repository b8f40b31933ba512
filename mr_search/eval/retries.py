"""What later attempts do with the first answer, counted from trajectory records."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from mr_search.eval.records import searches


def retry_outcomes(records: Sequence[Mapping[str, Any]], attempts: int) -> dict[str, Any]:
    """Shares (%) of retries that search anew and fix a wrong first answer, or break a right one, with counts."""
    if attempts < 1:
        raise ValueError(f"retry_outcomes: attempts={attempts}; count at least 1 attempt")

    def share(hits: int, total: int) -> float | None:
        return round(100.0 * hits / total, 1) if total else None

    def last_em(record: Mapping[str, Any]) -> float:
        k = min(attempts, len(record["attempts"])) - 1
        return float(record["attempts"][k]["em"]) if k >= 0 else 0.0

    wrong = [r for r in records if r["attempts"] and not r["attempts"][0]["em"]]
    right = [r for r in records if r["attempts"] and r["attempts"][0]["em"]]
    differently = 0
    for record in wrong:
        first = {s["query"].lower() for s in searches(record["attempts"][0])}
        later = [s["query"].lower() for a in record["attempts"][1:attempts] for s in searches(a)]
        differently += any(q not in first for q in later)
    fixed = sum(last_em(r) > 0 for r in wrong)
    broken = sum(last_em(r) == 0 for r in right)
    return {
        "wrong_first": len(wrong),
        "searched_differently": share(differently, len(wrong)),
        "searched_differently_n": differently,
        "fixed": share(fixed, len(wrong)),
        "fixed_n": fixed,
        "right_first": len(right),
        "broken": share(broken, len(right)),
        "broken_n": broken,
    }
