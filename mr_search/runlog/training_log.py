"""Per-step training figures of one verl run folder (``metrics/<launch>.jsonl``) and its budget of tokens."""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

RESPONSE_LENGTH: Final = "response_length/mean"
PROMPT_LENGTH: Final = "prompt_length/mean"
TOTAL_TOKENS: Final = "perf/total_num_tokens"  # prompt + response tokens of every row of the step
K1_REWARD: Final = "critic/rewards/mean"
STEP_TIME: Final = "timing_s/step"
ATTEMPT_REWARD_RE: Final = re.compile(r"mr_search/attempt_(\d+)/reward_mean")
MODEL_TOKENS: Final = "mr_search/model_tokens"
_TRAINED_RE: Final = re.compile(r"mr_search/attempt_(\d+)/trained_tokens")
MEASURES: Final = ("response", "model")


@dataclass(frozen=True)
class StepRecord:
    """One training step: EM of each attempt over the step's sampled trajectories, and its token cost."""

    step: int
    em: tuple[float, ...]  # fraction in [0, 1], attempt 1..K
    response_tokens: float  # sampled response tokens of the step (mean length x rows)
    model_tokens: float | None  # model-written tokens of the step; None when not logged (verl's own estimators)
    seconds: float | None


def read_launches(run_dir: Path) -> list[dict[int, Mapping[str, Any]]]:
    """``{step: data}`` of each launch in order, a step's lines merged (a validation pass logs its own)."""
    files = sorted((Path(run_dir) / "metrics").glob("*.jsonl"))
    if not files:
        raise FileNotFoundError(f"{run_dir}/metrics/*.jsonl: no metrics; is this a train_grpo_step.sh run folder?")
    launches: list[dict[int, Mapping[str, Any]]] = []
    for path in files:
        steps: dict[int, Mapping[str, Any]] = {}
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
                step = int(row["step"])
                steps[step] = {**steps.get(step, {}), **row["data"]}
            except (ValueError, KeyError, TypeError) as err:
                raise ValueError(f"{path}:{number}: not a verl metrics line ({err})") from err
        launches.append(steps)
    return launches


def read_metrics(run_dir: Path) -> dict[int, Mapping[str, Any]]:
    """``{step: data}`` over every launch, merged per step (a later launch's figure wins)."""
    steps: dict[int, Mapping[str, Any]] = {}
    for launch in read_launches(run_dir):
        for step, data in launch.items():
            steps[step] = {**steps.get(step, {}), **data}
    return steps


def training_steps(run_dir: Path) -> dict[int, Mapping[str, Any]]:
    """``read_metrics`` less the lines that are no training step (a validation pass alone logs no step time)."""
    return {step: data for step, data in read_metrics(run_dir).items() if STEP_TIME in data}


def is_validation_only(data: Mapping[str, Any]) -> bool:
    """A line of validation figures alone (verl's pass before a launch's first step): no training step."""
    return bool(data) and all(key.startswith("val-") for key in data)


def logged_rows(step: int, data: Mapping[str, Any]) -> int:
    """The rows of a logged step: ``perf/total_num_tokens`` over mean prompt + response length, if whole."""
    missing = [key for key in (TOTAL_TOKENS, PROMPT_LENGTH, RESPONSE_LENGTH) if key not in data]
    if missing:
        raise ValueError(f"step {step}: {missing} not logged, so its rows are unknown; give the rows by hand")
    per_row = float(data[PROMPT_LENGTH]) + float(data[RESPONSE_LENGTH])
    rows = float(data[TOTAL_TOKENS]) / per_row if per_row > 0 else 0.0
    if rows < 0.5 or abs(rows - round(rows)) > 1e-3 * rows:
        raise ValueError(
            f"step {step}: {TOTAL_TOKENS} / ({PROMPT_LENGTH} + {RESPONSE_LENGTH}) = {rows:.4f} is not a whole "
            "number of rows; give the rows by hand (train_batch_size x rollout.n)"
        )
    return round(rows)


def step_record(step: int, data: Mapping[str, Any], rows: int) -> StepRecord:
    """The figures of one step; ``rows`` = questions x trajectories per question of that step."""
    if rows < 1:
        raise ValueError(f"rows={rows}: expected the rows of a step (train_batch_size x rollout.n), >= 1")
    if RESPONSE_LENGTH not in data:
        raise ValueError(f"step {step}: no {RESPONSE_LENGTH!r} in the logged metrics")
    attempts = sorted(int(m.group(1)) for key in data if (m := ATTEMPT_REWARD_RE.fullmatch(key)))
    if attempts:
        em = tuple(float(data[f"mr_search/attempt_{k}/reward_mean"]) for k in attempts)
    elif K1_REWARD in data:
        em = (float(data[K1_REWARD]),)  # verl's own estimators (K = 1): the one attempt's reward is its EM
    else:
        raise ValueError(f"step {step}: neither mr_search/attempt_<k>/reward_mean nor {K1_REWARD!r} logged")
    trained = [float(data[key]) for key in data if _TRAINED_RE.fullmatch(key)]
    if MODEL_TOKENS in data:
        model_tokens: float | None = float(data[MODEL_TOKENS])
    else:
        model_tokens = sum(trained) if trained else None
    seconds = data.get(STEP_TIME)
    return StepRecord(
        step=step,
        em=em,
        response_tokens=float(data[RESPONSE_LENGTH]) * rows,
        model_tokens=model_tokens,
        seconds=None if seconds is None else float(seconds),
    )


def read_steps(run_dir: Path, rows: int) -> list[StepRecord]:
    """The run's steps in order."""
    return [
        step_record(step, data, rows)
        for step, data in sorted(read_metrics(run_dir).items())
        if not is_validation_only(data)
    ]


def step_tokens(record: StepRecord, measure: str = "response") -> float:
    """The step's ``response`` (sampled) or ``model`` (model-written) tokens; ValueError when not logged."""
    if measure == "response":
        return record.response_tokens
    if measure != "model":
        raise ValueError(f"measure={measure!r} is not valid; use one of {list(MEASURES)}")
    if record.model_tokens is None:
        raise ValueError(
            f"step {record.step}: no model-written tokens logged ({MODEL_TOKENS} or "
            "mr_search/attempt_<k>/trained_tokens); train with algorithm.adv_estimator=mr_search (any K), the "
            "estimator whose trainer logs them"
        )
    return record.model_tokens


def cumulative_tokens(steps: Sequence[StepRecord], measure: str = "response") -> list[float]:
    """Tokens (``response``: sampled; ``model``: model-written) up to and including each step."""
    total, out = 0.0, []
    for record in steps:
        total += step_tokens(record, measure)
        out.append(total)
    return out


def steps_to_reach(steps: Sequence[StepRecord], budget: float, measure: str = "response") -> int:
    """Total steps for the tokens (``measure``) to reach ``budget``, extrapolating at the mean per step."""
    if not steps:
        raise ValueError("steps_to_reach: no steps logged yet; run at least one step first")
    if budget <= 0:
        raise ValueError(f"budget={budget}: expected a positive number of tokens")
    done = cumulative_tokens(steps, measure)
    for record, total in zip(steps, done, strict=True):
        if total >= budget:
            return record.step
    per_step = done[-1] / len(steps)
    return steps[-1].step + math.ceil((budget - done[-1]) / per_step)


def closest_step(steps: Sequence[StepRecord], budget: float, measure: str = "response") -> StepRecord:
    """The step whose cumulative tokens (``measure``) are closest to ``budget`` (the earlier one on a tie)."""
    if not steps:
        raise ValueError("closest_step: no steps")
    done = cumulative_tokens(steps, measure)
    best = min(range(len(steps)), key=lambda i: (abs(done[i] - budget), i))
    return steps[best]
