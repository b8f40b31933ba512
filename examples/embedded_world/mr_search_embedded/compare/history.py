"""The report folder's history of results (history.jsonl, appended, never rewritten) and its table."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Final

from mr_search_embedded.compare.aggregate import AVERAGE

HISTORY: Final = "history.jsonl"


def history_entry(comparison: Mapping[str, Any], when: str) -> dict[str, Any]:
    """The headline of a comparison, one line of history.jsonl."""
    meta = comparison.get("meta", {})
    final = comparison["final_answer_test"]
    entry: dict[str, Any] = {
        "when": when,
        "seeds": comparison["seeds"],
        "unfinished_seeds": comparison["unfinished_seeds"],
        "command": meta.get("command"),
        "machine": meta.get("machine"),
        "steps": comparison["plan"]["budget"]["reference_steps"],
        "work": meta.get("work"),
        "note": meta.get("note", ""),
        "final_answer_test": {
            k: final[k] for k in ("k", "margin", "ci95", "met", "probed", "questions", "baseline_best_k")
        },
        "em_at_k_eval": {
            name: round(stats[AVERAGE]["em"][-1]["mean"], 2) for name, stats in comparison["heldout"].items()
        },
    }
    return entry


def read_history(out_dir: Path) -> list[dict[str, Any]]:
    path = Path(out_dir) / HISTORY
    if not path.is_file():
        return []
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def append_history(out_dir: Path, entry: Mapping[str, Any]) -> list[dict[str, Any]]:
    """Appends ``entry`` to ``out_dir/history.jsonl``; returns every entry, oldest first.

    Re-rendering the same result (the last entry has the same work folder and seeds) replaces that last line
    instead of adding a duplicate; every earlier line is kept as written.
    """
    path = Path(out_dir) / HISTORY
    path.parent.mkdir(parents=True, exist_ok=True)
    entries = read_history(out_dir)
    same = bool(entries) and all(entries[-1].get(k) == entry.get(k) for k in ("work", "seeds", "unfinished_seeds"))
    if same and entry.get("work") is not None:
        lines = [line for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
        lines[-1] = json.dumps(dict(entry), sort_keys=True)
        path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    else:
        with path.open("a", encoding="utf-8") as handle:
            handle.write(json.dumps(dict(entry), sort_keys=True) + "\n")
    return read_history(out_dir)


def history_table(entries: Sequence[Mapping[str, Any]]) -> str:
    lines = [
        "| when | seeds | MR-Search steps | margin (95% interval) | K = 1's k | probed | test | note |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for e in entries:
        seeds = ",".join(str(s) for s in e.get("seeds", []))
        t = e.get("final_answer_test") or {}
        if t:
            margin = f"{t['margin']:+.1f} ({t['ci95'][0]:+.1f}, {t['ci95'][1]:+.1f})"
            cells = [margin, str(t.get("baseline_best_k", "-")), "yes" if t.get("probed") else "no"]
            cells.append("met" if t.get("met") else "not met")
        else:
            cells = ["-", "-", "-", "-"]
        lines.append(
            f"| {e.get('when', '-')} | {seeds} | {e.get('steps', '-')} | "
            + " | ".join(cells)
            + f" | {e.get('note', '')} |"
        )
    return "\n".join(lines)
