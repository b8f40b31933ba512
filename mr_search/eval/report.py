"""Writes an evaluation summary as results.md (the paper's layout), results.json and em_by_attempt.png."""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Final

from mr_search.eval.metrics import AVERAGE

RESULTS_MD: Final = "results.md"
RESULTS_JSON: Final = "results.json"
PLOT_PNG: Final = "em_by_attempt.png"


def markdown_table(summary: Mapping[str, Any], metric: str) -> str:
    """Rows per method and attempt, columns per data source plus the average (percentages, 1 decimal)."""
    sources = list(summary["data_sources"])
    header = ["method", "attempt", *sources, "Avg"]
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for method, entry in summary["methods"].items():
        for row in entry["attempts"]:
            cells = [f"{row[metric][s]:.1f}" if s in row[metric] else "-" for s in sources]
            lines.append(f"| {method} | {row['attempt']} | " + " | ".join(cells) + f" | {row[metric][AVERAGE]:.1f} |")
    return "\n".join(lines)


def render_markdown(summary: Mapping[str, Any], meta: Mapping[str, Any] | None = None) -> str:
    parts = ["# Evaluation results", ""]
    for key, value in (meta or {}).items():
        parts.append(f"- {key}: {value}")
    if meta:
        parts.append("")
    parts += ["## Exact match (%)", "", markdown_table(summary, "em"), ""]
    parts += ["## F1 (%)", "", markdown_table(summary, "f1"), "", "## Reflection", ""]
    for method, entry in summary["methods"].items():
        k = entry["attempts"][-1]["attempt"]
        parts.append(
            f"- {method}: {entry['questions']} questions; EM gain attempt {k} - attempt 1: "
            f"{entry['reflection_gain_em']:+.1f} points; "
            f"improved after reflection: {entry['improved_after_reflection']}"
        )
    return "\n".join(parts) + "\n"


def plot_em_by_attempt(summary: Mapping[str, Any], path: Path) -> Path:
    """One line per data source (and the average, bold) per method: EM against attempt number."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    methods = list(summary["methods"])
    fig, axes = plt.subplots(1, len(methods), figsize=(5.5 * len(methods), 4), squeeze=False, sharey=True)
    for ax, method in zip(axes[0], methods, strict=True):
        rows = summary["methods"][method]["attempts"]
        xs = [r["attempt"] for r in rows]
        for source in [*summary["data_sources"], AVERAGE]:
            ys = [r["em"].get(source) for r in rows]
            if any(y is None for y in ys):
                continue
            bold = source == AVERAGE
            ax.plot(
                xs,
                ys,
                marker="o",
                linewidth=2.5 if bold else 1.2,
                color="black" if bold else None,
                label="average" if bold else source,
            )
        ax.set_title(method)
        ax.set_xlabel("attempt")
        ax.set_xticks(xs)
        ax.grid(alpha=0.3)
    axes[0][0].set_ylabel("EM (%)")
    axes[0][-1].legend(fontsize=8, loc="best")
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def write_report(summary: Mapping[str, Any], out_dir: Path, meta: Mapping[str, Any] | None = None) -> dict[str, Path]:
    """Writes the three report files into ``out_dir``; returns their paths by name."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    md = out_dir / RESULTS_MD
    md.write_text(render_markdown(summary, meta), encoding="utf-8")
    js = out_dir / RESULTS_JSON
    js.write_text(json.dumps({"meta": dict(meta or {}), **summary}, indent=2, sort_keys=False) + "\n", encoding="utf-8")
    png = plot_em_by_attempt(summary, out_dir / PLOT_PNG)
    return {"results.md": md, "results.json": js, "em_by_attempt.png": png}
