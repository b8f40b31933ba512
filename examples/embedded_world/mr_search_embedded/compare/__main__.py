"""``python -m mr_search_embedded.compare``: the token budget match and the report of
examples/embedded_world/scripts/compare.sh.

python -m mr_search_embedded.compare budget --mr RUN --mr-rows 16 --baseline RUN --baseline-rows 16 --out budget.json
    prints the baseline steps needed to reach the MR-Search run's sampled tokens, then the step to evaluate
python -m mr_search_embedded.compare report --work WORK --out reports/compare_embedded --mr-rows 16 --baseline-rows 16
    writes report.md, comparison.json, em_vs_attempt.png and em_vs_step.png; appends to history.jsonl
python -m mr_search_embedded.compare fresh --results results.json --models LABEL=PATH [...] \
    --k-eval 6 --max-questions 40
    exits 0 if that evaluation exists and was made of these models with these settings, else 1 (evaluate again)
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
from collections.abc import Mapping, Sequence
from datetime import datetime, timezone
from pathlib import Path

from mr_search_embedded.compare.budget import match_runs, write_match
from mr_search_embedded.compare.layout import BASELINE, MR
from mr_search_embedded.compare.markdown import append_history, history_entry, render_report
from mr_search_embedded.compare.plots import EM_VS_ATTEMPT, EM_VS_STEP, plot_em_vs_attempt, plot_em_vs_step
from mr_search_embedded.compare.report import build_comparison, evaluation_settings

logger = logging.getLogger(__name__)
INVESTIGATION = "investigation.md"


def _rows(value: str) -> int:
    rows = int(value)
    if rows < 1:
        raise argparse.ArgumentTypeError(f"{value}: rows per step must be >= 1 (train_batch_size x rollout.n)")
    return rows


def write_report(
    work: Path, out: Path, mr_rows: int, baseline_rows: int, note: str = "", gain_attempt: int = 3
) -> Path:
    """Builds the comparison of ``work`` into ``out``; returns report.md."""
    comparison = build_comparison(work, {MR: mr_rows, BASELINE: baseline_rows}, gain_attempt)
    if note:
        comparison["meta"]["note"] = note
    out.mkdir(parents=True, exist_ok=True)
    (out / "comparison.json").write_text(json.dumps(comparison, indent=1) + "\n", encoding="utf-8")
    plot_em_vs_attempt(comparison, out / EM_VS_ATTEMPT)
    plot_em_vs_step(comparison, out / EM_VS_STEP)
    when = datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    history = append_history(out, history_entry(comparison, when))
    notes = out / INVESTIGATION
    report = out / "report.md"
    report.write_text(
        render_report(comparison, history, notes.read_text(encoding="utf-8") if notes.is_file() else None),
        encoding="utf-8",
    )
    return report


def is_fresh(
    results: Path,
    models: Sequence[str],
    k_eval: int,
    max_questions: int | None,
    limits: Mapping[str, int] | None = None,
    outcome_feedback: bool = False,
    restates_question: bool = False,
) -> bool:
    """Whether ``results`` (a results.json of ``python -m mr_search.eval``) evaluated exactly ``models``
    (``LABEL=PATH``, as passed to it) with ``k_eval`` attempts on the first ``max_questions`` per data source, with
    the token ``limits`` given (keys as its meta names them, e.g. ``"max new tokens per turn"``) and with outcome
    feedback on or off as ``outcome_feedback`` says and reflection turns that restate the question or not as
    ``restates_question`` says (evaluations from before those options had them off)."""
    if not results.is_file():
        return False
    evaluation = json.loads(results.read_text(encoding="utf-8"))
    meta = evaluation.get("meta", {})
    evaluated = [m.strip() for m in str(meta.get("models", "")).split(",")]
    evaluated_k, _, evaluated_feedback = evaluation_settings(evaluation)
    return (
        sorted(evaluated) == sorted(models)
        and evaluated_k == k_eval
        and meta.get("max questions per source", "unknown") == max_questions
        and all(meta.get(key) == value for key, value in (limits or {}).items())
        and evaluated_feedback == outcome_feedback
        and bool(meta.get("reflection restates question", False)) == restates_question
    )


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m mr_search_embedded.compare", description=__doc__.split("\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    budget = sub.add_parser("budget", help="match the baseline's sampled tokens to the MR-Search run's")
    budget.add_argument("--mr", type=Path, required=True, help="MR-Search run folder")
    budget.add_argument("--baseline", type=Path, required=True, help="baseline run folder")
    budget.add_argument("--mr-rows", type=_rows, required=True, help="rows per MR-Search step (batch x n)")
    budget.add_argument("--baseline-rows", type=_rows, required=True, help="rows per baseline step (batch x n)")
    budget.add_argument("--out", type=Path, required=True, help="budget.json to write")
    budget.add_argument(
        "--tolerance",
        type=float,
        default=0.05,
        help="no more baseline steps when its tokens are within this fraction of the budget (default 0.05)",
    )
    report = sub.add_parser("report", help="write the report of a work folder")
    report.add_argument(
        "--work", type=Path, required=True, help="work folder of examples/embedded_world/scripts/compare.sh"
    )
    report.add_argument("--out", type=Path, required=True, help="report folder (history.jsonl is appended)")
    report.add_argument("--mr-rows", type=_rows, required=True)
    report.add_argument("--baseline-rows", type=_rows, required=True)
    report.add_argument("--note", default="", help="one line for the history table")
    report.add_argument(
        "--gain-attempt",
        type=int,
        default=3,
        help="attempt k of the reflection-gain test EM@k - EM@1 (MR-Search's training K; default 3, the paper's)",
    )
    fresh = sub.add_parser("fresh", help="exit 0 if an evaluation of these models with these settings exists")
    fresh.add_argument("--results", type=Path, required=True, help="results.json of python -m mr_search.eval")
    fresh.add_argument("--models", nargs="+", required=True, help="LABEL=PATH of each model, as evaluated")
    fresh.add_argument("--k-eval", type=int, required=True)
    fresh.add_argument("--max-questions", type=int, default=None, help="questions per data source (default: all)")
    fresh.add_argument("--max-new-tokens", type=int, default=None, help="new tokens per model turn, if it must match")
    fresh.add_argument("--max-information-tokens", type=int, default=None, help="tokens of a passages block, idem")
    fresh.add_argument("--response-length", type=int, default=None, help="meta-episode token budget, idem")
    fresh.add_argument("--outcome-feedback", action="store_true", help="evaluated with outcome feedback")
    fresh.add_argument(
        "--reflection-restates-question", action="store_true", help="evaluated with the question in reflection turns"
    )
    args = parser.parse_args(argv)
    if args.command == "fresh":
        limits = {
            "max new tokens per turn": args.max_new_tokens,
            "max information tokens": args.max_information_tokens,
            "response length": args.response_length,
        }
        given = {key: value for key, value in limits.items() if value is not None}
        fresh_enough = is_fresh(
            args.results,
            args.models,
            args.k_eval,
            args.max_questions,
            given,
            args.outcome_feedback,
            args.reflection_restates_question,
        )
        return 0 if fresh_enough else 1
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    try:
        if args.command == "budget":
            match = match_runs(args.mr, args.mr_rows, args.baseline, args.baseline_rows)
            write_match(match, args.out)
            logger.info(
                "budget %.0f tokens; baseline %d steps run, %d needed, step %d evaluated (ratio %.2f)",
                match.mr_tokens,
                match.baseline_steps_run,
                match.baseline_steps_needed,
                match.baseline_step,
                match.ratio,
            )
            close_enough = match.ratio >= 1.0 - args.tolerance
            print(match.baseline_steps_run if close_enough else match.baseline_steps_needed, match.baseline_step)
        else:
            print(write_report(args.work, args.out, args.mr_rows, args.baseline_rows, args.note, args.gain_attempt))
    except (ValueError, FileNotFoundError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
