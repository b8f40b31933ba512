"""reports/README.md indexes every report folder (a folder that holds files), so none is found only by browsing."""

from __future__ import annotations

from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
REPORTS = REPO / "reports"


def test_every_report_folder_has_a_row_in_the_index() -> None:
    index = (REPORTS / "README.md").read_text(encoding="utf-8")
    folders = sorted({path.parent for path in REPORTS.rglob("*") if path.is_file()} - {REPORTS})
    assert folders, "no report folders found"
    missing = []
    for folder in folders:
        rel = folder.relative_to(REPORTS).as_posix()
        parent = folder.parent.relative_to(REPORTS).as_posix()
        # a row of its own, or a part its parent's row names (e.g. a run folder's `bench/`)
        named = f"`{rel}/`" in index or (f"`{parent}/`" in index and f"`{folder.name}/`" in index)
        if not named:
            missing.append(rel)
    assert not missing, f"report folders without a row in reports/README.md: {missing}; add one (what, how, when)"
