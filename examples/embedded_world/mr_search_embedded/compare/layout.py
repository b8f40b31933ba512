"""The work folder of one comparison (written by the lab's scripts/compare.sh, read by the report builder).

<work>/meta.json                      knobs, command, machine (the script writes it)
<work>/warm_eval/results.json         the warm-started policy, method "warm_start" (seed-independent: greedy)
<work>/seed_<s>/mr_search/            train_grpo_step.sh run folder, K = 3
<work>/seed_<s>/baseline/             train_grpo_step.sh run folder, K = 1
<work>/seed_<s>/budget.json           the token budget match (python -m mr_search_embedded.compare budget)
<work>/seed_<s>/eval/results.json     methods "mr_search" and "baseline" after training
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Final

MR: Final = "mr_search"
BASELINE: Final = "baseline"
WARM: Final = "warm_start"
RESULTS: Final = "results.json"
_SEED_RE: Final = re.compile(r"seed_(\d+)")


@dataclass(frozen=True)
class SeedDirs:
    """The folders of one seed."""

    seed: int
    root: Path

    @property
    def mr_run(self) -> Path:
        return self.root / MR

    @property
    def baseline_run(self) -> Path:
        return self.root / BASELINE

    @property
    def budget(self) -> Path:
        return self.root / "budget.json"

    @property
    def results(self) -> Path:
        return self.root / "eval" / RESULTS

    @property
    def finished(self) -> bool:
        return self.results.is_file() and self.budget.is_file()


def seed_dirs(work: Path) -> list[SeedDirs]:
    """Every ``seed_<s>`` folder of ``work``, by seed."""
    found = []
    for path in Path(work).glob("seed_*"):
        match = _SEED_RE.fullmatch(path.name)
        if match and path.is_dir():
            found.append(SeedDirs(int(match.group(1)), path))
    return sorted(found, key=lambda d: d.seed)


def warm_results(work: Path) -> Path:
    return Path(work) / "warm_eval" / RESULTS
