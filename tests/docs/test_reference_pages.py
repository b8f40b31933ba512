"""The README and the reference pages say what holds now: the README is a recipe page that opens with the fresh-machine
commands, the GPU guide a how-to, and neither reads as a run journal (no clock times, dates or commit hashes; run
narratives live in reports/, changes in CHANGELOG.md). The guide's reproduction table names each row's commit."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
REFERENCE = [
    "README.md",
    "docs/gpu.md",
    "docs/method.md",
    "docs/cpu-backend.md",
    "docs/benchmarks.md",
    "retrieval/README.md",
]
LINK_TARGET = re.compile(r"\]\([^)]*\)")
JOURNAL = {
    "a clock time": re.compile(r"\bUTC\b|\b\d{1,2}:\d{2}(:\d{2})?\s*(UTC|h\b)"),
    "a date": re.compile(r"\b20\d\d-\d\d-\d\d\b"),
    "a commit hash": re.compile(r"`[0-9a-f]{7,40}`"),
}


def _lines(page: str) -> list[str]:
    return (REPO / page).read_text(encoding="utf-8").splitlines()


def test_the_readme_opens_with_the_fresh_machine_commands_and_stays_a_page() -> None:
    lines = _lines("README.md")
    assert len(lines) <= 200, f"README.md has {len(lines)} lines; the recipe page keeps to 200"
    opening = "\n".join(lines[:6])
    assert "make quickstart" in opening and "make test" in opening


def test_the_gpu_guide_is_a_how_to_with_a_reproduction_table() -> None:
    lines = _lines("docs/gpu.md")
    assert len(lines) <= 250, f"docs/gpu.md has {len(lines)} lines; run narratives belong in reports/gpu/<run>/"
    assert "## Reproduction" in lines


@pytest.mark.parametrize("page", REFERENCE)
def test_reference_pages_carry_no_run_journal(page: str) -> None:
    in_table = False
    found = []
    for number, line in enumerate(_lines(page), 1):
        if page == "docs/gpu.md" and line.startswith("## "):
            in_table = line == "## Reproduction"
        text = LINK_TARGET.sub("]()", line)
        for what, pattern in JOURNAL.items():
            if what == "a commit hash" and in_table:
                continue  # the reproduction table's commit column
            if pattern.search(text):
                found.append(f"{page}:{number}: {what}: {line.strip()[:100]}")
    assert not found, "move run narratives to reports/ and history to CHANGELOG.md:\n" + "\n".join(found)
