"""The work folder of one comparison (written by the lab's scripts/compare.sh, read by the report builder).

<work>/plan.json, plan.md                 the test, written before any training (python -m ... compare plan)
<work>/meta.json                          command, machine, engine, positive control (the script writes it)
<work>/gate.json, launches.jsonl          the plan's commit and each launch's UTC time (gate.py)
<work>/warm_eval_<shape>/results.json     the warm-started policy on the test split, method "warm_start"
<work>/seed_<s>/<arm>/                    train_grpo_step.sh run folder of each arm
<work>/seed_<s>/<arm>.times               one line per launch: start and end (epoch seconds)
<work>/seed_<s>/budget_<arm>.json         its match to MR-Search's model-written tokens (compare budget)
<work>/seed_<s>/eval_<shape>/             the test evaluation of the arms of that shape (methods = arm names):
                                          results.json, trajectories.jsonl
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Final

RESULTS: Final = "results.json"
TRAJECTORIES: Final = "trajectories.jsonl"
PLAN_JSON: Final = "plan.json"
PLAN_MD: Final = "plan.md"
_SEED_RE: Final = re.compile(r"seed_(\d+)")


@dataclass(frozen=True)
class SeedDirs:
    """The folders of one seed."""

    seed: int
    root: Path

    def run(self, arm: str) -> Path:
        return self.root / arm

    def times(self, arm: str) -> Path:
        return self.root / f"{arm}.times"

    def budget(self, arm: str) -> Path:
        return self.root / f"budget_{arm}.json"

    def evaluation(self, shape: str) -> Path:
        return self.root / f"eval_{shape}"

    def results(self, shape: str) -> Path:
        return self.evaluation(shape) / RESULTS

    def finished(self, arms: Iterable[tuple[str, str]]) -> bool:
        """Every (arm, shape) given has its token match and its evaluation."""
        return all(self.budget(arm).is_file() and self.results(shape).is_file() for arm, shape in arms)


def seed_dirs(work: Path) -> list[SeedDirs]:
    """Every ``seed_<s>`` folder of ``work``, by seed."""
    found = []
    for path in Path(work).glob("seed_*"):
        match = _SEED_RE.fullmatch(path.name)
        if match and path.is_dir():
            found.append(SeedDirs(int(match.group(1)), path))
    return sorted(found, key=lambda d: d.seed)


def warm_evaluation(work: Path, shape: str) -> Path:
    return Path(work) / f"warm_eval_{shape}"
