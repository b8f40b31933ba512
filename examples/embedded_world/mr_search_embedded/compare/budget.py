"""Equal budgets of model-written tokens: where each arm's training meets MR-Search's.

The budget is the whole MR-Search run's model-written tokens (``mr_search/model_tokens``: what the policy wrote,
passages, reflection turns and corrective messages left out; ``mr_search.runlog.training_log``). Another arm trains
at the same batch until its cumulative model-written tokens come within the tolerance, and its checkpoint evaluated is
the step whose cumulative count is closest. Sampled (response) tokens are reported beside them, not matched.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from mr_search.runlog.training_log import StepRecord, closest_step, cumulative_tokens, read_steps, steps_to_reach

MEASURE = "model"


@dataclass(frozen=True)
class BudgetMatch:
    """The token budget of one seed and where one arm meets it."""

    reference_steps: int
    reference_model_tokens: float  # the budget
    reference_response_tokens: float
    steps_run: int
    steps_needed: int  # > steps_run: train further (resume) to reach the budget
    step: int  # the checkpoint to evaluate: cumulative model-written tokens closest to the budget
    model_tokens: float  # cumulative at ``step``
    response_tokens: float  # cumulative sampled tokens at ``step``

    @property
    def ratio(self) -> float:
        """The arm's model-written tokens / MR-Search's at the evaluated checkpoints (1.0 = an exact match)."""
        return self.model_tokens / self.reference_model_tokens

    def within(self, tolerance: float) -> bool:
        return abs(self.ratio - 1.0) <= tolerance

    def as_dict(self) -> dict[str, Any]:
        return {**asdict(self), "ratio": self.ratio}


def match_budget(reference: list[StepRecord], run: list[StepRecord]) -> BudgetMatch:
    """The budget of the whole reference (MR-Search) run against the arm's steps so far."""
    if not reference:
        raise ValueError("match_budget: the MR-Search run logged no steps")
    if not run:
        raise ValueError("match_budget: the arm's run logged no steps")
    budget = cumulative_tokens(reference, MEASURE)[-1]
    chosen = closest_step(run, budget, MEASURE)
    model = dict(zip((s.step for s in run), cumulative_tokens(run, MEASURE), strict=True))
    response = dict(zip((s.step for s in run), cumulative_tokens(run), strict=True))
    return BudgetMatch(
        reference_steps=reference[-1].step,
        reference_model_tokens=budget,
        reference_response_tokens=cumulative_tokens(reference)[-1],
        steps_run=run[-1].step,
        steps_needed=steps_to_reach(run, budget, MEASURE),
        step=chosen.step,
        model_tokens=model[chosen.step],
        response_tokens=response[chosen.step],
    )


def tokens_at_step(reference: list[StepRecord], run: list[StepRecord], step: int) -> BudgetMatch:
    """Equal updates: the arm evaluated at ``step`` whatever its tokens; its ratio to MR-Search's tokens at the same
    step is the compute-fair reading beside it."""
    if not any(s.step == step for s in reference) or not any(s.step == step for s in run):
        raise ValueError(f"tokens_at_step: step {step} is not logged by both runs (train them to it first)")
    upto = [s for s in reference if s.step <= step]
    mine = [s for s in run if s.step <= step]
    return BudgetMatch(
        reference_steps=step,
        reference_model_tokens=cumulative_tokens(upto, MEASURE)[-1],
        reference_response_tokens=cumulative_tokens(upto)[-1],
        steps_run=run[-1].step,
        steps_needed=step,
        step=step,
        model_tokens=cumulative_tokens(mine, MEASURE)[-1],
        response_tokens=cumulative_tokens(mine)[-1],
    )


def match_runs(
    reference_run: Path, reference_rows: int, run: Path, rows: int, at_step: int | None = None
) -> BudgetMatch:
    """``match_budget`` of two ``train_grpo_step.sh`` run folders (rows: questions x trajectories of a step); with
    ``at_step``, ``tokens_at_step`` (the equal-updates budget)."""
    reference, mine = read_steps(reference_run, reference_rows), read_steps(run, rows)
    return match_budget(reference, mine) if at_step is None else tokens_at_step(reference, mine, at_step)


def next_steps(match: BudgetMatch, tolerance: float) -> int:
    """The steps the arm's run must have: those it ran once within ``tolerance`` below the budget (or over it),
    else the steps its mean rate needs to reach it."""
    if not 0.0 <= tolerance < 1.0:
        raise ValueError(f"tolerance={tolerance}: give a fraction in [0, 1), e.g. 0.05")
    return match.steps_run if match.ratio >= 1.0 - tolerance else match.steps_needed


def write_match(match: BudgetMatch, path: Path) -> Path:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(match.as_dict(), indent=2) + "\n", encoding="utf-8")
    return path


def read_match(path: Path) -> BudgetMatch:
    data = json.loads(Path(path).read_text(encoding="utf-8"))
    data.pop("ratio", None)
    try:
        return BudgetMatch(**data)
    except TypeError as err:
        raise ValueError(
            f"{path}: not a model-written token match ({err}); a work folder of the earlier sampled-token harness "
            "cannot be reported by this one: run make compare with a new WORK_DIR"
        ) from err
