"""MR-Search's training step against the K = 1 step at equal sampled tokens: seconds per 1,000 sampled tokens.

    python scripts/bench/k1_cost.py RUN_DIR_K3 RUN_DIR_K1 [--measure response|model] [--target 1.05]

Two train_grpo_step.sh run folders, trained with the same engine, GPUs and preset but for K (``ATTEMPTS``) and the
K = 1 run's batch (``k1_batch.py``; ``k1_cost.sh`` runs both). Prints each phase's seconds
per 1,000 sampled tokens for both runs over their steady steps (``step_cost.py``: the first step of
each launch left out), the ratio MR-Search / K = 1, and the verdict of the whole step's ratio against the target
(1.05: MR-Search at most 5% dearer per sampled token). Sampled tokens: the response tokens (``response``, the default:
everything after the prompt, as verl counts it) or the tokens the policy wrote (``model``).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from mr_search.runlog.training_log import MEASURES

sys.path.insert(0, str(Path(__file__).resolve().parent))
from step_cost import COLUMNS, STEP, RunCost, run_cost, steady_steps

TARGET: Final = 1.05
ATTEMPTS: Final = "mr_search/num_attempts"  # logged by the mr_search estimator at any K
TOKEN_MATCH: Final = 0.10  # sampled tokens per step further apart than this: a note


@dataclass(frozen=True)
class Comparison:
    mr_search: RunCost
    k1: RunCost
    target: float

    def ratio(self, column: str) -> float:
        """MR-Search's seconds per 1,000 tokens of ``column`` over K = 1's (nan where K = 1's is 0)."""
        base = self.k1.per_thousand(column)
        return self.mr_search.per_thousand(column) / base if base > 0 else float("nan")

    @property
    def token_ratio(self) -> float:
        """MR-Search's sampled tokens per steady step over K = 1's (1.0: the batches sample the same)."""
        return self.mr_search.tokens_per_step / self.k1.tokens_per_step

    @property
    def met(self) -> bool:
        return self.ratio(STEP) <= self.target


def _logged_attempts(run_dir: Path) -> set[int]:
    steady, _ = steady_steps(run_dir)
    return {round(float(data[ATTEMPTS])) for _, data in steady if ATTEMPTS in data}


def _check_k(run_dir: Path, k1: bool) -> None:
    """A run folder given in the wrong place (or trained at the wrong K) stops here, where K was logged."""
    attempts = _logged_attempts(run_dir)
    if k1 and attempts - {1}:
        raise ValueError(f"{run_dir} trained with K = {sorted(attempts)}; the second run must be K = 1 (ATTEMPTS=1)")
    if not k1 and 1 in attempts:
        raise ValueError(f"{run_dir} trained with K = 1; the first run is MR-Search's (K > 1), the second K = 1's")


def compare(
    mr_search_run: Path,
    k1_run: Path,
    measure: str = "response",
    target: float = TARGET,
    rows: tuple[int | None, int | None] = (None, None),
) -> Comparison:
    """Both runs' steady costs; ``rows``: each run's rows per step, read from its log when None."""
    if measure not in MEASURES:
        raise ValueError(f"measure={measure!r} is not valid; use one of {list(MEASURES)}")
    if target <= 0:
        raise ValueError(f"target={target}: expected a positive ratio, e.g. {TARGET}")
    _check_k(mr_search_run, k1=False)
    _check_k(k1_run, k1=True)
    return Comparison(
        mr_search=run_cost(mr_search_run, measure, rows[0]),
        k1=run_cost(k1_run, measure, rows[1]),
        target=target,
    )


def _steps(cost: RunCost) -> str:
    numbers = [s.step for s in cost.steps]
    return f"{len(numbers)} ({', '.join(map(str, numbers))})"


def report(comparison: Comparison) -> str:
    """The table and the verdict, as printed."""
    mr, k1 = comparison.mr_search, comparison.k1
    rows: list[tuple[str, str, str, str]] = [
        ("", "MR-Search", "K = 1", "ratio"),
        ("run folder", mr.run_dir.name, k1.run_dir.name, ""),
        ("steady steps", _steps(mr), _steps(k1), ""),
        (
            f"{mr.measure} tokens a step",
            f"{mr.tokens_per_step:,.0f}",
            f"{k1.tokens_per_step:,.0f}",
            f"{comparison.token_ratio:.3f}",
        ),
    ]
    for column in COLUMNS:
        name = "step (less checkpoint)" if column == STEP else column
        rows.append(
            (
                f"{name}, s/1k",
                f"{mr.per_thousand(column):.4f}",
                f"{k1.per_thousand(column):.4f}",
                f"{comparison.ratio(column):.3f}",
            )
        )
    widths = [max(len(row[i]) for row in rows) for i in range(4)]
    lines = [
        f"seconds per 1,000 sampled ({mr.measure}) tokens; the first step of each launch left out "
        f"(MR-Search: {list(mr.skipped)}, K = 1: {list(k1.skipped)})",
        *("  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip() for row in rows),
    ]
    if abs(comparison.token_ratio - 1.0) > TOKEN_MATCH:
        lines.append(
            f"note: the runs sample {comparison.token_ratio:.2f}x the tokens a step (more than {TOKEN_MATCH:.0%} "
            "apart): set the K = 1 run's TRAIN_BATCH_SIZE closer (python scripts/bench/k1_batch.py)"
        )
    verdict = "met" if comparison.met else "missed"
    lines.append(
        f"verdict: MR-Search's step costs {comparison.ratio(STEP):.3f}x the K = 1 step's per sampled token: "
        f"{verdict} (goal <= {comparison.target:.2f})"
    )
    return "\n".join(lines)


def as_dict(comparison: Comparison) -> dict[str, Any]:
    """The figures as plain values (per column: both runs' s/1k and the ratio)."""
    columns: Mapping[str, Any] = {
        column: {
            "mr_search": comparison.mr_search.per_thousand(column),
            "k1": comparison.k1.per_thousand(column),
            "ratio": comparison.ratio(column),
        }
        for column in COLUMNS
    }
    return {
        "measure": comparison.mr_search.measure,
        "target": comparison.target,
        "met": comparison.met,
        "token_ratio": comparison.token_ratio,
        "seconds_per_1k": columns,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("mr_search_run", type=Path, help="MR-Search's run folder (K > 1)")
    parser.add_argument("k1_run", type=Path, help="the K = 1 run folder")
    parser.add_argument("--measure", choices=MEASURES, default="response", help="which tokens count as sampled")
    parser.add_argument("--target", type=float, default=TARGET, help="the goal for the step's ratio")
    parser.add_argument(
        "--rows",
        type=int,
        nargs=2,
        metavar=("MR_SEARCH", "K1"),
        default=None,
        help="rows a step of each run (train_batch_size x rollout.n), where the log lacks perf/total_num_tokens",
    )
    args = parser.parse_args(argv)
    try:
        comparison = compare(
            args.mr_search_run, args.k1_run, args.measure, args.target, tuple(args.rows) if args.rows else (None, None)
        )
    except (FileNotFoundError, ValueError) as error:
        print(f"k1_cost: {error}", file=sys.stderr)
        return 2
    print(report(comparison))
    return 0


if __name__ == "__main__":
    sys.exit(main())
