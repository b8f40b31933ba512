"""Equal budgets of sampled tokens: how far the K = 1 baseline must train to match an MR-Search run.

A K = 1 trajectory is about a third as long as a K = 3 meta-episode, so at the same batch the baseline runs more
steps. The MR-Search run's total sampled response tokens is the budget; the baseline's checkpoint that is
evaluated is the step whose cumulative sampled tokens are closest to it.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from mr_search.training_log import StepRecord, closest_step, cumulative_tokens, read_steps, steps_to_reach


@dataclass(frozen=True)
class BudgetMatch:
    """The token budget of one seed and where the baseline meets it."""

    mr_steps: int
    mr_tokens: float
    mr_model_tokens: float | None  # model-written tokens of the MR-Search run (its trainer logs them)
    baseline_steps_run: int
    baseline_steps_needed: int  # > baseline_steps_run: train further (resume) to reach the budget
    baseline_step: int  # the checkpoint to evaluate: cumulative tokens closest to the budget
    baseline_tokens: float  # cumulative sampled tokens at baseline_step

    @property
    def ratio(self) -> float:
        """Baseline tokens / MR-Search tokens at the evaluated checkpoints (1.0 = an exact match)."""
        return self.baseline_tokens / self.mr_tokens

    def as_dict(self) -> dict[str, Any]:
        return {**asdict(self), "ratio": self.ratio}


def match_budget(mr: list[StepRecord], baseline: list[StepRecord]) -> BudgetMatch:
    """Budget of the whole MR-Search run against the baseline's steps so far."""
    if not mr:
        raise ValueError("match_budget: the MR-Search run logged no steps")
    if not baseline:
        raise ValueError("match_budget: the baseline run logged no steps")
    budget = cumulative_tokens(mr)[-1]
    chosen = closest_step(baseline, budget)
    done = dict(zip((s.step for s in baseline), cumulative_tokens(baseline), strict=True))
    model_tokens = [s.model_tokens for s in mr]
    return BudgetMatch(
        mr_steps=mr[-1].step,
        mr_tokens=budget,
        mr_model_tokens=None if any(t is None for t in model_tokens) else float(sum(model_tokens)),  # type: ignore[arg-type]
        baseline_steps_run=baseline[-1].step,
        baseline_steps_needed=steps_to_reach(baseline, budget),
        baseline_step=chosen.step,
        baseline_tokens=done[chosen.step],
    )


def match_runs(mr_run: Path, mr_rows: int, baseline_run: Path, baseline_rows: int) -> BudgetMatch:
    return match_budget(read_steps(mr_run, mr_rows), read_steps(baseline_run, baseline_rows))


def write_match(match: BudgetMatch, path: Path) -> Path:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(match.as_dict(), indent=2) + "\n", encoding="utf-8")
    return path


def read_match(path: Path) -> BudgetMatch:
    data = json.loads(Path(path).read_text(encoding="utf-8"))
    data.pop("ratio", None)
    return BudgetMatch(**data)
