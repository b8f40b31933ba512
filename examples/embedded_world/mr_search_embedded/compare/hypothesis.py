"""The next hypothesis after a test that was not met: what to change and what it predicts, written by whoever read
the result (``next_hypothesis.json`` in the report folder) and carried into comparison.json and the report."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Final

NEXT_HYPOTHESIS: Final = "next_hypothesis.json"


@dataclass(frozen=True)
class Hypothesis:
    """``hypothesis``: what explains the result and what to change; ``predicts``: the figure it predicts, checkable
    by the next run (e.g. "the margin's interval above 0 on the three-hop questions")."""

    hypothesis: str
    predicts: str

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def read_hypothesis(report_dir: Path) -> Hypothesis | None:
    """The report folder's next hypothesis, or None when none was written."""
    path = Path(report_dir) / NEXT_HYPOTHESIS
    if not path.is_file():
        return None
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        hypothesis = Hypothesis(str(data["hypothesis"]).strip(), str(data["predicts"]).strip())
    except (ValueError, KeyError, TypeError) as err:
        raise ValueError(
            f'{path}: expected {{"hypothesis": "...", "predicts": "..."}} ({err!r}); fix it and report again'
        ) from err
    if not hypothesis.hypothesis or not hypothesis.predicts:
        raise ValueError(f"{path}: both 'hypothesis' and 'predicts' must say something")
    return hypothesis


def hypothesis_paragraph(met: bool, hypothesis: Hypothesis | None) -> str:
    """The report's paragraph on what comes next."""
    if met:
        return "The test was met; a next hypothesis is optional." + (
            f" Written: {hypothesis.hypothesis} It predicts: {hypothesis.predicts}" if hypothesis else ""
        )
    if hypothesis is None:
        return (
            f"**Not met, and no next hypothesis is written yet.** Write `{NEXT_HYPOTHESIS}` in this folder "
            '({"hypothesis": what explains the result and what to change, "predicts": the figure the next run '
            "should show}) and render the report again (`python -m mr_search_embedded.compare report ...`)."
        )
    return f"**Next hypothesis.** {hypothesis.hypothesis}\n\n**What it predicts.** {hypothesis.predicts}"
