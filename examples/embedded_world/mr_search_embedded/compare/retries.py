"""The retries of a comparison, counted from its evaluations' trajectories: after a wrong first answer, how many later
attempts searched differently and how many fixed it; after a right one, how many broke it (``mr_search.eval.retries``).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Final

ALL: Final = "all"
Evaluation = tuple[int | None, Path, Sequence[str]]  # (seed or None for the warm start, trajectories.jsonl, methods)


def _records(path: Path) -> list[dict[str, Any]]:
    with path.open(encoding="utf-8") as handle:
        return [json.loads(line) for line in handle if line.strip()]


def _by_source(records: Sequence[Mapping[str, Any]], attempts: int) -> dict[str, Any]:
    from mr_search.eval.retries import retry_outcomes  # imports verl (seconds): only when there is something to count

    out = {ALL: retry_outcomes(records, attempts)}
    for source in sorted({str(r["data_source"]) for r in records}):
        out[source] = retry_outcomes([r for r in records if r["data_source"] == source], attempts)
    return out


def count_retries(evaluations: Sequence[Evaluation], attempts: Sequence[int]) -> list[dict[str, Any]]:
    """One row per evaluated model (method of an evaluation) with more than one attempt and per number of attempts
    counted (those past its K_eval left out): ``{"model", "seed", "attempts", "outcomes": {"all" or a data source:
    retry_outcomes(...)}}``. Evaluations without a trajectories file are skipped."""
    rows = []
    for seed, path, methods in evaluations:
        if not path.is_file():
            continue
        records = _records(path)
        for method in methods:
            mine = [r for r in records if r.get("method") == method]
            longest = max((len(r["attempts"]) for r in mine), default=0)
            for k in attempts:
                if mine and 1 < k <= longest:
                    rows.append({"model": method, "seed": seed, "attempts": k, "outcomes": _by_source(mine, k)})
    return rows


def retry_table(rows: Sequence[Mapping[str, Any]], labels: Mapping[str, str], sources: Sequence[str]) -> str:
    """Markdown: per model, seed and data source (``sources``, plus "all"), the first answers that were wrong and
    right, and what the later attempts did with them, counted at each number of attempts in ``rows``."""
    counted = sorted({int(r["attempts"]) for r in rows})
    head = ["model", "seed", "questions", "wrong @1", f"searched differently by @{counted[-1]}"]
    head += [f"fixed by @{k}" for k in counted] + ["right @1"] + [f"broken by @{k}" for k in counted]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    keys = sorted({(str(r["model"]), r["seed"]) for r in rows}, key=lambda x: (x[1] is not None, x[1] or 0, x[0]))
    for model, seed in keys:
        mine = {int(r["attempts"]): r["outcomes"] for r in rows if r["model"] == model and r["seed"] == seed}
        last = mine[counted[-1]]
        for source in [ALL, *sources]:
            if source not in last:
                continue
            o = last[source]
            cells = [labels.get(model, model), "-" if seed is None else str(seed), source]
            cells += [str(o["wrong_first"]), str(o["searched_differently_n"])]
            cells += [str(mine[k][source]["fixed_n"]) for k in counted]
            cells += [str(o["right_first"])] + [str(mine[k][source]["broken_n"]) for k in counted]
            lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)
