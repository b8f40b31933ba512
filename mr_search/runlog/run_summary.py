"""The per-step table a train_grpo_step.sh run folder ends with (``summary.md``)."""

from __future__ import annotations

import argparse
import math
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Final

from mr_search.runlog.training_log import ATTEMPT_REWARD_RE, K1_REWARD, STEP_TIME, read_metrics
from mr_search.trainer.validation import VALIDATION_SPEED

GRAD_NORM: Final = "actor/grad_norm"
NOTE: Final = (
    "EM@k: mean reward of attempt k over the step's trajectories (exact match with the paper's reward settings: "
    "metric em, format_score 0); gain: EM@K - EM@1, the reflection gain."
)


def summary_table(steps: Mapping[int, Mapping[str, Any]]) -> str:
    """A Markdown table, one row per step; K is the most attempts any step logged (1 for verl's estimators)."""
    attempts = max(
        (int(m.group(1)) for data in steps.values() for key in data if (m := ATTEMPT_REWARD_RE.fullmatch(key))),
        default=1,
    )
    head = ["step", *(f"EM@{k}" for k in range(1, attempts + 1)), *(["gain"] if attempts > 1 else [])]
    head += ["reward", "grad_norm", "s"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for step, data in sorted(steps.items()):
        em = [float(data.get(f"mr_search/attempt_{k}/reward_mean", math.nan)) for k in range(1, attempts + 1)]
        if attempts == 1 and math.isnan(em[0]):
            em = [float(data.get(K1_REWARD, math.nan))]  # verl's estimators (K = 1): the one attempt's reward
        cells = [str(step), *(f"{x:.3f}" for x in em), *([f"{em[-1] - em[0]:+.3f}"] if attempts > 1 else [])]
        cells += [f"{float(data.get(K1_REWARD, math.nan)):.3f}", f"{float(data.get(GRAD_NORM, math.nan)):.3g}"]
        cells.append(f"{float(data.get(STEP_TIME, math.nan)):.1f}")
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def validation_lines(steps: Mapping[int, Mapping[str, Any]]) -> list[str]:
    """One line per timed validation pass (``val-speed/*``, logged by the MR-Search trainer)."""
    return [
        f"validation before step {step + 1}: {data[f'{VALIDATION_SPEED}/meta_episodes']:.0f} meta-episodes in "
        f"{data[f'{VALIDATION_SPEED}/seconds']:.1f} s = {data[f'{VALIDATION_SPEED}/meta_episodes_per_s']:.2f} "
        "meta-episodes/s"
        for step, data in sorted(steps.items())
        if f"{VALIDATION_SPEED}/seconds" in data
    ]


def write_summary(run_dir: Path) -> str:
    """Writes ``run_dir/summary.md`` and returns it: the training steps' table, then the timed validation passes."""
    metrics = read_metrics(run_dir)
    steps = {
        step: data
        for step, data in metrics.items()
        if K1_REWARD in data or any(ATTEMPT_REWARD_RE.fullmatch(key) for key in data)
    }
    validations = validation_lines(metrics)
    text = "\n".join([summary_table(steps), *(["", *validations] if validations else [])])
    (run_dir / "summary.md").write_text(f"# {run_dir.name}\n\n{NOTE}\n\n{text}\n", encoding="utf-8")
    return text


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("run_dir", type=Path, help="a train_grpo_step.sh run folder")
    args = parser.parse_args(argv)
    try:
        print(write_summary(args.run_dir))
    except (FileNotFoundError, ValueError) as error:
        print(f"run_summary: {error}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
