"""report.md of a comparison, with the history of earlier results kept (history.jsonl, appended, never rewritten)."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Final

from mr_search_embedded.compare.aggregate import AVERAGE, Spread
from mr_search_embedded.compare.layout import BASELINE, MR, WARM
from mr_search_embedded.compare.plots import EM_VS_ATTEMPT, EM_VS_STEP, LABELS
from mr_search_embedded.compare.retries import retry_table
from mr_search_embedded.compare.verdict import GainVerdict

HISTORY: Final = "history.jsonl"


def em_table(comparison: Mapping[str, Any], source: str = AVERAGE, key: str = "em") -> str:
    """Rows: warm start, MR-Search, baseline; columns: attempt 1..K_eval (mean ± std over seeds)."""
    present = [m for m in (WARM, MR, BASELINE) if m in comparison["heldout"]]
    k = max(len(comparison["heldout"][m][source][key]) for m in present)
    lines = ["| model | " + " | ".join(f"@{i}" for i in range(1, k + 1)) + " |", "|---|" + "---|" * k]
    for method in present:
        cells = [Spread.from_dict(e).text() for e in comparison["heldout"][method][source][key]]
        lines.append(f"| {LABELS[method]} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def budget_table(comparison: Mapping[str, Any]) -> str:
    lines = [
        "| seed | MR-Search steps | MR-Search tokens | baseline steps run | baseline step evaluated "
        "| baseline tokens | ratio |",
        "|---|---|---|---|---|---|---|",
    ]
    for seed in comparison["per_seed"]:
        b = seed["budget"]
        lines.append(
            f"| {seed['seed']} | {b['mr_steps']} | {b['mr_tokens']:,.0f} | {b['baseline_steps_run']} "
            f"| {b['baseline_step']} | {b['baseline_tokens']:,.0f} | {b['ratio']:.2f} |"
        )
    return "\n".join(lines)


def training_table(comparison: Mapping[str, Any]) -> str:
    """Per seed and run: EM (%) of the sampled rollouts at the first and the last step, and the step time."""
    lines = [
        "| seed | run | steps | EM@1 first → last | EM@K first → last | mean s/step |",
        "|---|---|---|---|---|---|",
    ]
    for seed in comparison["per_seed"]:
        for method in (MR, BASELINE):
            curve = seed["training"][method]
            if not curve:
                continue
            first, last = curve[0]["em"], curve[-1]["em"]
            times = [r["seconds"] for r in curve if r["seconds"] is not None]
            mean_s = f"{sum(times) / len(times):.1f}" if times else "-"
            lines.append(
                f"| {seed['seed']} | {LABELS[method]} | {len(curve)} | {100 * first[0]:.1f} → {100 * last[0]:.1f} "
                f"| {100 * first[-1]:.1f} → {100 * last[-1]:.1f} | {mean_s} |"
            )
    return "\n".join(lines)


def history_entry(comparison: Mapping[str, Any], when: str) -> dict[str, Any]:
    """The headline of a comparison, one line of history.jsonl."""
    meta = comparison.get("meta", {})
    entry: dict[str, Any] = {
        "when": when,
        "seeds": comparison["seeds"],
        "unfinished_seeds": comparison["unfinished_seeds"],
        "command": meta.get("command"),
        "machine": meta.get("machine"),
        "steps": meta.get("steps"),
        "work": meta.get("work"),
        "note": meta.get("note", ""),
    }
    for method in (WARM, MR, BASELINE):
        if method in comparison["heldout"]:
            em = comparison["heldout"][method][AVERAGE]["em"]
            entry[method] = {f"em@{i}": round(e["mean"], 2) for i, e in enumerate(em, 1)}
    verdict = comparison.get("verdict")
    if verdict:
        entry["gain_test"] = {k: verdict[k] for k in ("attempt", "margin", "spread", "met")}
    return entry


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
        lines = path.read_text(encoding="utf-8").splitlines()
        while lines and not lines[-1].strip():
            lines.pop()
        lines[-1] = json.dumps(dict(entry), sort_keys=True)
        path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    else:
        with path.open("a", encoding="utf-8") as handle:
            handle.write(json.dumps(dict(entry), sort_keys=True) + "\n")
    return read_history(out_dir)


def read_history(out_dir: Path) -> list[dict[str, Any]]:
    path = Path(out_dir) / HISTORY
    if not path.is_file():
        return []
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def history_table(entries: Sequence[Mapping[str, Any]]) -> str:
    lines = [
        "| when | seeds | steps (MR-Search) | warm @1/@3/@6 | MR-Search @1/@3/@6 | baseline @1/@3/@6 "
        "| gain test: margin / 2 x spread | note |",
        "|---|---|---|---|---|---|---|---|",
    ]

    def cell(entry: Mapping[str, Any], method: str) -> str:
        em = entry.get(method) or {}
        return " / ".join(f"{em[f'em@{k}']:.1f}" if f"em@{k}" in em else "-" for k in (1, 3, 6))

    def test(entry: Mapping[str, Any]) -> str:
        t = entry.get("gain_test")
        if not t:
            return "-"
        return f"@{t['attempt']}: {t['margin']:+.1f} / {2 * t['spread']:.1f} ({'met' if t['met'] else 'not met'})"

    for e in entries:
        seeds = ",".join(str(s) for s in e.get("seeds", []))
        lines.append(
            f"| {e['when']} | {seeds} | {e.get('steps', '-')} | {cell(e, WARM)} | {cell(e, MR)} "
            f"| {cell(e, BASELINE)} | {test(e)} | {e.get('note', '')} |"
        )
    return "\n".join(lines)


def render_report(
    comparison: Mapping[str, Any], history: Sequence[Mapping[str, Any]], investigation: str | None = None
) -> str:
    meta = comparison.get("meta", {})
    seeds = comparison["seeds"]
    parts = ["# MR-Search vs the K = 1 baseline on the embedded world", ""]
    for key, value in meta.items():
        parts.append(f"- {key}: {value}")
    parts.append(f"- seeds finished: {', '.join(map(str, seeds))}")
    if comparison["unfinished_seeds"]:
        parts.append(f"- seeds NOT finished (left out): {', '.join(map(str, comparison['unfinished_seeds']))}")
    parts += [
        "",
        "Held-out EM (%) of the embedded test questions, greedy, K_eval attempts in one context; "
        f"mean ± std over {len(seeds)} seed(s) (sample std; one seed: no spread). Both runs start from the "
        "warm-started policy, so its row is the 'before training' of both.",
        "",
        "## Held-out EM at each attempt (average over data sources)",
        "",
        em_table(comparison),
        "",
        f"![EM vs attempt]({EM_VS_ATTEMPT})",
        "",
        "## Reflection gain EM@k - EM@1 (points)",
        "",
        em_table(comparison, key="gain"),
        "",
    ]
    if comparison.get("verdict"):
        parts += [
            "**The reflection-gain test** (MR-Search's gain positive and above the baseline's by at least twice the "
            "seed spread, the larger of the two sample stds): " + GainVerdict.from_dict(comparison["verdict"]).text(),
            "",
        ]
    for source in comparison["sources"]:
        if source != AVERAGE:
            parts += [f"### {source}", "", em_table(comparison, source), ""]
    if comparison.get("retries"):
        parts += [
            "## What the retries did (greedy evaluation, counted from the trajectories)",
            "",
            "Per model, seed and data source: first answers wrong and right at attempt 1; of the wrong ones, how many "
            "meta-episodes searched with a query attempt 1 did not use and how many were right at the attempt named "
            "(fixed); of the right ones, how many were wrong there (broken).",
            "",
            retry_table(comparison["retries"], LABELS, [s for s in comparison["sources"] if s != AVERAGE]),
            "",
        ]
    parts += [
        "## Same budget of sampled tokens",
        "",
        "Sampled tokens of a step = verl's logged `response_length/mean` x rows of the step (questions x "
        "trajectories); the budget is the whole MR-Search run's total. The baseline trains at the same batch for "
        "more steps and the checkpoint evaluated is the step whose cumulative tokens are closest to the budget.",
        "",
        budget_table(comparison),
        "",
        "## EM against training step (sampled rollouts, temperature 1)",
        "",
        "The baseline's steps are shown up to the evaluated checkpoint (equal sampled tokens).",
        "",
        training_table(comparison),
        "",
        f"![EM vs step]({EM_VS_STEP})",
        "",
    ]
    if investigation:
        parts += ["## Investigation", "", investigation.strip(), ""]
    parts += ["## History (every report run, appended)", "", history_table(history), ""]
    return "\n".join(parts)
