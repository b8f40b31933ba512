"""What later attempts do with the first answer, counted from trajectory records (``mr_search.eval.records``).

Used by the warm-start probe (``python -m mr_search_embedded.warmstart.probe``) and the comparison report (``python -m
mr_search_embedded.compare report``):
retries that search differently after a wrong first answer, retries that fix it, and
retries that break a right one.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from mr_search.eval.records import searches


def retry_outcomes(records: Sequence[Mapping[str, Any]], attempts: int) -> dict[str, Any]:
    """What the later attempts do with the first answer: after a wrong one, the share (%) that search with a query
    attempt 1 did not use (``searched_differently``) and that are right at the last attempt (``fixed``); after a
    right one, the share wrong at the last attempt (``broken``); the counts behind them (``wrong_first``,
    ``right_first``, and ``..._n`` for each share). Shares are None when there is nothing to count; the last attempt
    is ``attempts`` (or the record's last, if shorter)."""
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
