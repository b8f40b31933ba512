"""The planned wall time of a comparison, from step and evaluation times measured by an earlier one.

The times come from a comparison.json: this harness's records ``timings`` (seconds per step of each arm, seconds of a
launch beyond its steps, seconds per evaluated question-attempt); the earlier two-arm harness's records only its
runs' step times (``per_seed[].training``), and what it lacks is assumed (``ASSUMED``) and said so in the plan.
"""

from __future__ import annotations

import json
import math
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

from mr_search_embedded.compare.arms import K1, K1_ALL_TURNS, MR, NO_CREDIT, Arm

# Used where the timings file has no measurement: the earlier harness's run 9 on the 2-core box
# (reports/compare_embedded/investigation.md: 16 MR-Search steps of 7.7 s took ~4 min with start-up and checkpoints;
# an evaluation of 2 models x 80 questions x 6 attempts took 2.5 min).
ASSUMED: Final = {"launch_seconds": 120.0, "eval_seconds": 0.16}
# An arm nobody measured takes the step time of the arm that trains like it.
_LIKE: Final = {K1_ALL_TURNS: K1, NO_CREDIT: MR}


@dataclass(frozen=True)
class Timings:
    """Seconds per step of each arm, per launch beyond its steps, per evaluated question-attempt (one model)."""

    step_seconds: dict[str, float]
    launch_seconds: float
    eval_seconds: float
    source: str
    notes: tuple[str, ...] = field(default_factory=tuple)  # what was assumed rather than measured

    def as_dict(self) -> dict[str, Any]:
        return {
            "step_seconds": dict(self.step_seconds),
            "launch_seconds": self.launch_seconds,
            "eval_seconds_per_question_attempt": self.eval_seconds,
            "source": self.source,
            "assumed": list(self.notes),
        }


def _mean_step_seconds(curves: Sequence[Sequence[Mapping[str, Any]]]) -> float | None:
    times = [float(r["seconds"]) for curve in curves for r in curve if r.get("seconds") is not None]
    return statistics.fmean(times) if times else None


def timings_from_comparison(path: Path, arm_names: Sequence[str]) -> Timings:
    """Timings for ``arm_names`` from a comparison.json of this harness or the earlier two-arm one."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"{path}: no comparison.json to take step times from; set TIMINGS to one")
    data = json.loads(path.read_text(encoding="utf-8"))
    notes: list[str] = []
    measured: dict[str, float] = {}
    recorded = data.get("timings") or {}
    if recorded.get("step_seconds"):
        measured = {k: float(v) for k, v in recorded["step_seconds"].items()}
    else:  # the earlier harness: runs "mr_search" (K = 3) and "baseline" (K = 1)
        seeds = data.get("per_seed", [])
        for run, arm in (("mr_search", MR), ("baseline", K1)):
            seconds = _mean_step_seconds([s.get("training", {}).get(run, []) for s in seeds])
            if seconds is not None:
                measured[arm] = seconds
    steps = {}
    for arm in arm_names:
        if arm in measured:
            steps[arm] = measured[arm]
        elif _LIKE.get(arm) in measured:
            steps[arm] = measured[_LIKE[arm]]
            notes.append(f"{arm}'s step time taken as {_LIKE[arm]}'s")
        else:
            raise ValueError(f"{path}: no step time of {arm} or an arm like it; give TIMINGS a comparison that ran it")
    launch = recorded.get("launch_seconds")
    if launch is None:
        launch = ASSUMED["launch_seconds"]
        notes.append(f"{launch:.0f} s a launch (start-up, checkpoints) assumed")
    evaluation = recorded.get("eval_seconds_per_question_attempt")
    if evaluation is None:
        evaluation = ASSUMED["eval_seconds"]
        notes.append(f"{evaluation} s per evaluated question-attempt assumed")
    return Timings(steps, float(launch), float(evaluation), str(path), tuple(notes))


@dataclass(frozen=True)
class WallTime:
    """The plan's wall time, its parts, and what fits the aim."""

    training_per_seed: float
    evaluation_per_seed: float
    warm_evaluation: float
    total: float
    aim: float
    seeds_that_fit: int
    steps_that_fit: int  # MR-Search steps (the others scaled alike) that fit the aim at the planned seeds; 0: none

    @property
    def fits(self) -> bool:
        return self.total <= self.aim

    def as_dict(self) -> dict[str, Any]:
        return {
            "training_per_seed_s": self.training_per_seed,
            "evaluation_per_seed_s": self.evaluation_per_seed,
            "warm_evaluation_s": self.warm_evaluation,
            "total_s": self.total,
            "aim_s": self.aim,
            "fits": self.fits,
            "seeds_that_fit": self.seeds_that_fit,
            "steps_that_fit": self.steps_that_fit,
        }


def _evaluation_seconds(arm: Arm, questions: int, reference_turns: int, timings: Timings) -> float:
    # Cost grows with the turns an evaluation may take: one attempt of K x T turns counts as K attempts of T.
    return questions * arm.eval_attempts * (arm.turns / reference_turns) * timings.eval_seconds


def plan_wall_time(
    arms: Sequence[Arm],
    seeds: int,
    steps: Mapping[str, int],
    questions: int,
    timings: Timings,
    aim_seconds: float,
    overlap: bool = True,
) -> WallTime:
    """Seeds run one after the other; each trains every arm (``steps[arm]`` steps, first launch only) and evaluates
    them; with ``overlap`` a seed's evaluation runs beside the next seed's training, so only the last one adds."""
    if seeds < 1:
        raise ValueError(f"seeds={seeds}: plan at least one")
    reference = next((a for a in arms if a.name == MR), None)
    if reference is None:
        raise ValueError(f"plan_wall_time: the arms lack {MR}, whose turns the evaluation cost is measured in")

    def training(scale: float) -> float:
        return sum(steps[a.name] * scale * timings.step_seconds[a.name] + timings.launch_seconds for a in arms)

    evaluation = sum(_evaluation_seconds(a, questions, reference.turns, timings) for a in arms)
    warm = _evaluation_seconds(reference, questions, reference.turns, timings)

    def total(n_seeds: int, scale: float = 1.0) -> float:
        evaluations = evaluation if overlap else n_seeds * evaluation
        return n_seeds * training(scale) + evaluations + warm

    seeds_fit = 0
    while seeds_fit < 1000 and total(seeds_fit + 1) <= aim_seconds:
        seeds_fit += 1
    per_step = sum(steps[a.name] / steps[MR] * timings.step_seconds[a.name] for a in arms)  # one more MR step
    spare = aim_seconds - total(seeds, 0.0)
    steps_fit = max(0, math.floor(spare / (seeds * per_step))) if spare > 0 else 0
    return WallTime(training(1.0), evaluation, warm, total(seeds), aim_seconds, seeds_fit, steps_fit)
