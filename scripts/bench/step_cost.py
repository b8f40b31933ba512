"""Seconds per thousand sampled tokens of one training run, by phase, over its steady steps.

A train_grpo_step.sh run folder logs verl's timers per step (``timing_s/*``). The phases: generation (``gen``), old
log-probs (``old_log_prob``), update (``update_actor``), weight sync (``update_weights``), the rest of the step
(reward, advantages, reference) and the whole step less what is not the method's cost (a checkpoint save, a rollout
dump). The first training step of each launch is left out: it carries the start-up (CUDA graphs, compile caches,
the first weight load). A phase's cost is its seconds summed over the steady steps over their tokens summed, x 1000.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from mr_search.runlog.training_log import STEP_TIME, logged_rows, read_launches, step_record, step_tokens

PHASES: Final = {
    "generation": "timing_s/gen",
    "old log-probs": "timing_s/old_log_prob",
    "update": "timing_s/update_actor",
    "weight sync": "timing_s/update_weights",
}
NOT_THE_METHOD: Final = ("timing_s/save_checkpoint", "timing_s/dump_rollout_generations")
OTHER: Final = "other"  # the step less the four phases (and less NOT_THE_METHOD)
STEP: Final = "step"  # timing_s/step less NOT_THE_METHOD
COLUMNS: Final = (*PHASES, OTHER, STEP)


@dataclass(frozen=True)
class StepCost:
    step: int
    tokens: float  # sampled tokens of the step (``measure``: response or model-written)
    seconds: Mapping[str, float]  # one entry per COLUMNS


@dataclass(frozen=True)
class RunCost:
    run_dir: Path
    measure: str
    steps: tuple[StepCost, ...]  # the steady steps, in order
    skipped: tuple[int, ...]  # the first training step of each launch

    @property
    def tokens(self) -> float:
        return sum(s.tokens for s in self.steps)

    @property
    def tokens_per_step(self) -> float:
        return self.tokens / len(self.steps)

    def per_thousand(self, column: str) -> float:
        """Seconds of ``column`` per 1,000 tokens over the steady steps."""
        if column not in COLUMNS:
            raise ValueError(f"column={column!r} is not valid; use one of {list(COLUMNS)}")
        return 1000.0 * sum(s.seconds[column] for s in self.steps) / self.tokens


def steady_steps(run_dir: Path) -> tuple[list[tuple[int, Mapping[str, Any]]], list[int]]:
    """The training steps of every launch but each launch's first (``(step, data)`` in step order; a step logged by
    two launches: the later launch's), and the steps left out. Lines without ``timing_s/step`` (a validation pass
    before training) are no training step."""
    steady: dict[int, Mapping[str, Any]] = {}
    skipped: list[int] = []
    for launch in read_launches(run_dir):
        trained = sorted(step for step, data in launch.items() if STEP_TIME in data)
        if not trained:
            continue
        skipped.append(trained[0])
        steady.pop(trained[0], None)
        steady.update((step, launch[step]) for step in trained[1:])
    return sorted(steady.items()), skipped


def step_cost(step: int, data: Mapping[str, Any], rows: int | None = None, measure: str = "response") -> StepCost:
    """One step's phases and tokens; ``rows`` (questions x trajectories) read from the log when not given."""
    missing = [key for key in (*PHASES.values(), STEP_TIME) if key not in data]
    if missing:
        raise ValueError(f"step {step}: no {missing} logged; is this a verl PPO training step?")
    whole = float(data[STEP_TIME]) - sum(float(data.get(key, 0.0)) for key in NOT_THE_METHOD)
    seconds = {name: float(data[key]) for name, key in PHASES.items()}
    seconds[OTHER] = whole - sum(seconds.values())
    seconds[STEP] = whole
    record = step_record(step, data, logged_rows(step, data) if rows is None else rows)
    return StepCost(step=step, tokens=step_tokens(record, measure), seconds=seconds)


def run_cost(run_dir: Path, measure: str = "response", rows: int | None = None) -> RunCost:
    """The steady steps' costs of a train_grpo_step.sh run folder.

    Raises:
        ValueError: no steady step (each launch ran one step only), or a step without the figures needed.
    """
    steady, skipped = steady_steps(run_dir)
    if not steady:
        raise ValueError(
            f"{run_dir}: no step after the first of a launch (first steps left out: {skipped}); train at least 2 "
            "steps a launch (TOTAL_STEPS=4 measures 3)"
        )
    steps = tuple(step_cost(step, data, rows, measure) for step, data in steady)
    if any(s.tokens <= 0 for s in steps):
        raise ValueError(f"{run_dir}: a step with no {measure} tokens; nothing to divide by")
    return RunCost(run_dir=Path(run_dir), measure=measure, steps=steps, skipped=tuple(skipped))
