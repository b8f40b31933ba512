"""Builds trajectories.html: every meta-episode's attempts side by side, filterable, in one static file."""

from __future__ import annotations

import json
import logging
from collections.abc import Iterable, Mapping
from importlib import resources
from pathlib import Path
from typing import Any

from mr_search.eval.records import improved_after_reflection, read_jsonl, reflection, searches

logger = logging.getLogger(__name__)


def _view(record: Mapping[str, Any]) -> dict[str, Any]:
    """The record plus what the page shows directly (searches, reflections, the improvement flag)."""
    attempts = [{**a, "searches": searches(a), "reflection": reflection(a)} for a in record["attempts"]]
    return {**record, "attempts": attempts, "improved": improved_after_reflection(record)}


def render_html(records: Iterable[Mapping[str, Any]]) -> str:
    """The page's HTML with the records embedded as JSON (no external resources)."""
    template = resources.files("mr_search.runlog.viewer").joinpath("page.html").read_text(encoding="utf-8")
    data = json.dumps([_view(r) for r in records], ensure_ascii=False)
    # "</" would end the <script> element early; "<\/" is the same string to JSON.parse.
    return template.replace("__DATA__", data.replace("</", "<\\/"))


def build_viewer(trajectories: Path | Iterable[Mapping[str, Any]], out: Path) -> Path:
    """Writes the viewer for a trajectory JSONL file (ours or verl's rollout dump) or for records in memory."""
    records = list(read_jsonl(trajectories)) if isinstance(trajectories, (str, Path)) else list(trajectories)
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(render_html(records), encoding="utf-8")
    logger.info("trajectory viewer with %d meta-episodes written to %s", len(records), out)
    return out


def main(argv: list[str] | None = None) -> int:
    import argparse

    parser = argparse.ArgumentParser(description="Build the static trajectory viewer from dumped trajectories")
    parser.add_argument("trajectories", type=Path, help="trajectories.jsonl (ours) or a verl rollout dump <step>.jsonl")
    parser.add_argument("--out", type=Path, default=Path("trajectories.html"))
    args = parser.parse_args(argv)
    print(build_viewer(args.trajectories, args.out))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
