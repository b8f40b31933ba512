"""EM and F1 per method, attempt and data source from trajectory records (the paper's table layout)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, Final

from mr_search.eval.records import improved_after_reflection

AVERAGE: Final = "average"  # macro average over data sources, as in the paper's "Avg" column
# Column order of the paper's Table 1 (then ASearcher); other sources follow in order of appearance.
PAPER_ORDER: Final = (
    "nq",
    "triviaqa",
    "popqa",
    "hotpotqa",
    "2wikimultihopqa",
    "musique",
    "bamboogle",
    "asearcher",
    "embedded_1hop",
    "embedded_2hop",
)


def order_sources(sources: Iterable[str]) -> list[str]:
    """Unique data sources, in the paper's column order first, the rest in order of appearance."""
    seen = list(dict.fromkeys(sources))
    known = [s for s in PAPER_ORDER if s in seen]
    return known + [s for s in seen if s not in PAPER_ORDER]


def _attempt_scores(record: Mapping[str, Any], k: int) -> tuple[float, float]:
    """EM/F1 of attempt ``k`` (0-based); an attempt that did not run keeps the last one's answer."""
    attempts = record["attempts"]
    if not attempts:
        return 0.0, 0.0
    attempt = attempts[min(k, len(attempts) - 1)]
    return float(attempt["em"]), float(attempt["f1"])


def summarize(records: Iterable[Mapping[str, Any]], attempts: int | None = None) -> dict[str, Any]:
    """Records -> EM and F1 (%) per method, attempt and data source, with their macro average."""
    by_method: dict[str, list[Mapping[str, Any]]] = {}
    for record in records:
        by_method.setdefault(str(record["method"]), []).append(record)
    if not by_method:
        raise ValueError("no trajectory records to summarize")
    sources = order_sources(str(r["data_source"]) for rs in by_method.values() for r in rs)
    k_max = attempts or max(len(r["attempts"]) for rs in by_method.values() for r in rs)
    methods: dict[str, Any] = {}
    for method, rows in by_method.items():
        entries = []
        for k in range(k_max):
            em: dict[str, float] = {}
            f1: dict[str, float] = {}
            counts: dict[str, int] = {}
            for source in sources:
                scores = [_attempt_scores(r, k) for r in rows if r["data_source"] == source]
                if scores:
                    counts[source] = len(scores)
                    em[source] = 100.0 * sum(s[0] for s in scores) / len(scores)
                    f1[source] = 100.0 * sum(s[1] for s in scores) / len(scores)
            em[AVERAGE] = sum(em.values()) / len(em)
            f1[AVERAGE] = sum(f1.values()) / len(f1)
            entries.append({"attempt": k + 1, "em": em, "f1": f1, "n": counts})
        improved = sum(1 for r in rows if improved_after_reflection(r))
        methods[method] = {
            "attempts": entries,
            "questions": len(rows),
            "improved_after_reflection": improved,
            "reflection_gain_em": entries[-1]["em"][AVERAGE] - entries[0]["em"][AVERAGE],
        }
    return {"data_sources": sources, "methods": methods}
