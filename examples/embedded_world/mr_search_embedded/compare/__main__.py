"""``python -m mr_search_embedded.compare``: the plan, the arms, the token budget match, the freshness of an
evaluation and the report of examples/embedded_world/scripts/compare.sh.

python -m mr_search_embedded.compare plan --arms "mr_search k1" --seeds 5 --steps 16 ... [--out WORK] [--test P]
    prints the plan (markdown); with --out writes WORK/plan.json and WORK/plan.md (and --report-dir's plan.md)
python -m mr_search_embedded.compare arms --arms "mr_search k1" --attempts 3 --turns 3
    prints one line per arm: name, attempts, turns, gamma (- if none), eval attempts, shape, first-launch kind
python -m mr_search_embedded.compare budget --reference RUN --run RUN --rows 16 --out budget.json
    prints the steps the run must have to reach the reference's model-written tokens, the step to evaluate, the steps
    it has
python -m mr_search_embedded.compare fresh --results results.json --models LABEL=PATH [...] --k-eval 3 ...
    exits 0 if that evaluation exists and was made of these models with these settings, else 1 (evaluate again)
python -m mr_search_embedded.compare report --work WORK --out REPORT_DIR --rows 16
    writes report.md, comparison.json, records.jsonl.xz, em_vs_attempt.png and em_vs_step.png; appends to
    history.jsonl
python -m mr_search_embedded.compare gate --plan REPORT_DIR/plan.md --work WORK [--off]
    exits 2 unless the plan is committed as it stands (gate.py); writes WORK/gate.json
python -m mr_search_embedded.compare launch --work WORK --what NAME
    appends a launch and its UTC time to WORK/launches.jsonl
python -m mr_search_embedded.compare piece-pack --work WORK --out DIR | piece-unpack --pieces DIR --work WORK
    a work folder's resumable state (each run's metrics, log and last checkpoint) as archives, and back
python -m mr_search_embedded.compare recompute REPORT_DIR
    prints the final-answer test and the interval over seeds recomputed from REPORT_DIR/records.jsonl.xz alone
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
from collections.abc import Mapping, Sequence
from datetime import datetime, timezone
from pathlib import Path

from mr_search.eval.question_cap import QuestionCap, parse_max_questions, recorded
from mr_search_embedded.compare import curves, gate, piece, records
from mr_search_embedded.compare.arms import build_arms, parse_arms
from mr_search_embedded.compare.budget import match_runs, next_steps, write_match
from mr_search_embedded.compare.history import append_history, history_entry
from mr_search_embedded.compare.hypothesis import read_hypothesis
from mr_search_embedded.compare.markdown import render_report
from mr_search_embedded.compare.plan_cli import add_plan_arguments, plan_from_arguments
from mr_search_embedded.compare.plots import EM_VS_ATTEMPT, EM_VS_STEP, plot_em_vs_attempt, plot_em_vs_step
from mr_search_embedded.compare.report import build_comparison, evaluation_settings

logger = logging.getLogger(__name__)
INVESTIGATION = "investigation.md"


def _rows(value: str) -> int:
    rows = int(value)
    if rows < 1:
        raise argparse.ArgumentTypeError(f"{value}: rows per step must be >= 1 (train_batch_size x rollout.n)")
    return rows


def write_report(work: Path, out: Path, rows: int, note: str = "") -> Path:
    """Builds the comparison of ``work`` into ``out``; returns report.md."""
    comparison = build_comparison(work, rows, read_hypothesis(out))
    if note:
        comparison["meta"]["note"] = note
    out.mkdir(parents=True, exist_ok=True)
    rows_written = comparison.pop("_records")
    records.write(rows_written, out / records.RECORDS)
    comparison["records"] = _repo_path(out / records.RECORDS)
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


def _repo_path(path: Path) -> str:
    """``path`` relative to its git checkout's root where it is in one (the path a reader finds it at), else relative
    to the checkout this module runs from (a GPU node's copy of the tree has no git history), else as is."""
    import subprocess

    top = subprocess.run(
        ["git", "-C", str(path.parent), "rev-parse", "--show-toplevel"], capture_output=True, text=True, check=False
    ).stdout.strip()
    checkout = Path(__file__).resolve().parents[4]
    roots = [Path(top)] if top else []
    if (checkout / "examples" / "embedded_world" / "pyproject.toml").is_file():
        roots.append(checkout)
    for root in roots:
        try:
            return str(path.resolve().relative_to(root.resolve()))
        except ValueError:
            continue
    return str(path)


def is_fresh(
    results: Path,
    models: Sequence[str],
    k_eval: int,
    max_questions: int | QuestionCap | None,
    limits: Mapping[str, int] | None = None,
    outcome_feedback: bool = False,
    restates_question: bool = False,
) -> bool:
    """Whether ``results`` (a results.json of ``python -m mr_search.eval``) evaluated exactly ``models``
    (``LABEL=PATH``, as passed to it) with ``k_eval`` attempts on the first ``max_questions`` per data source, with
    the ``limits`` given (keys as its meta names them, e.g. ``"max new tokens per turn"``, ``"max turns per
    attempt"``) and with outcome feedback on or off as ``outcome_feedback`` says and reflection turns that restate
    the question or not as ``restates_question`` says (evaluations from before those options had them off)."""
    if not results.is_file():
        return False
    evaluation = json.loads(results.read_text(encoding="utf-8"))
    meta = evaluation.get("meta", {})
    evaluated = [m.strip() for m in str(meta.get("models", "")).split(",")]
    evaluated_k, _, evaluated_feedback = evaluation_settings(evaluation)
    return (
        sorted(evaluated) == sorted(models)
        and evaluated_k == k_eval
        and meta.get("max questions per source", "unknown") == recorded(max_questions)
        and all(meta.get(key) == value for key, value in (limits or {}).items())
        and evaluated_feedback == outcome_feedback
        and bool(meta.get("reflection restates question", False)) == restates_question
    )


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m mr_search_embedded.compare", description=__doc__.split("\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    add_plan_arguments(sub.add_parser("plan", help="print (and write) the plan: the test, before any training"))
    arms = sub.add_parser("arms", help="the arms' training and evaluation settings, one line each")
    arms.add_argument("--arms", required=True, help="names separated by spaces or commas")
    arms.add_argument("--attempts", type=int, required=True, help="MR-Search's K")
    arms.add_argument("--turns", type=int, required=True, help="model turns per attempt")
    budget = sub.add_parser("budget", help="match an arm's model-written tokens to the MR-Search run's")
    budget.add_argument("--reference", type=Path, required=True, help="MR-Search run folder (the budget)")
    budget.add_argument("--run", type=Path, required=True, help="the arm's run folder")
    budget.add_argument("--rows", type=_rows, required=True, help="rows per step of both (batch x n)")
    budget.add_argument("--out", type=Path, required=True, help="budget JSON to write")
    budget.add_argument("--at-step", type=int, default=None, help="BUDGET=updates: the arm evaluated at this step")
    budget.add_argument(
        "--tolerance", type=float, default=0.05, help="no more steps once within this fraction below (default 0.05)"
    )
    report = sub.add_parser("report", help="write the report of a work folder")
    report.add_argument("--work", type=Path, required=True, help="work folder of scripts/compare.sh")
    report.add_argument("--out", type=Path, required=True, help="report folder (history.jsonl is appended)")
    report.add_argument("--rows", type=_rows, required=True, help="rows per training step (batch x n)")
    report.add_argument("--note", default="", help="one line for the history table")
    check = sub.add_parser("gate", help="exit 2 unless the plan is committed as it stands; write WORK/gate.json")
    check.add_argument("--plan", type=Path, required=True, help="the report folder's plan.md")
    check.add_argument("--work", type=Path, required=True, help="work folder of scripts/compare.sh")
    check.add_argument("--off", action="store_true", help="PLAN_GATE=0: record that the run tests nothing")
    check.add_argument("--record", type=Path, default=None, help="PLAN_RECORD: check against gate-record's file")
    keep = sub.add_parser("gate-record", help="write what a machine without git needs to check the committed plan")
    keep.add_argument("--plan", type=Path, required=True, help="the report folder's plan.md, committed")
    keep.add_argument("--out", type=Path, required=True, help="the record (JSON) to write")
    started = sub.add_parser("launch", help="append a launch and its UTC time to WORK/launches.jsonl")
    started.add_argument("--work", type=Path, required=True)
    started.add_argument("--what", required=True, help="what is launched (a run folder, an evaluation)")
    logged = sub.add_parser("logged", help="exit 0 once a run folder has logged --steps training steps")
    logged.add_argument("--run", type=Path, required=True)
    logged.add_argument("--steps", type=int, required=True)
    sliced = sub.add_parser("dev-slice", help="write the first N dev questions of each source (the dev curves')")
    sliced.add_argument("--dev", type=Path, required=True, help="the dev parquet")
    sliced.add_argument("--per-source", type=int, required=True)
    sliced.add_argument("--out", type=Path, required=True)
    packed = sub.add_parser("piece-pack", help="a work folder's resumable state as archives (runs' last checkpoints)")
    packed.add_argument("--work", type=Path, required=True)
    packed.add_argument("--out", type=Path, required=True, help="folder to write the archives to")
    unpacked = sub.add_parser("piece-unpack", help="the archives of piece-pack back into a work folder")
    unpacked.add_argument("--pieces", type=Path, required=True, help="the folder piece-pack wrote")
    unpacked.add_argument("--work", type=Path, required=True)
    drawn = sub.add_parser("curves", help="dev_curves.json and .png of a work folder's runs")
    drawn.add_argument("--work", type=Path, required=True)
    drawn.add_argument("--out", type=Path, required=True, help="folder to write them to")
    again = sub.add_parser("recompute", help="the final-answer test from a report folder's records alone")
    again.add_argument("report_dir", type=Path)
    fresh = sub.add_parser("fresh", help="exit 0 if an evaluation of these models with these settings exists")
    fresh.add_argument("--results", type=Path, required=True, help="results.json of python -m mr_search.eval")
    fresh.add_argument("--models", nargs="+", required=True, help="LABEL=PATH of each model, as evaluated")
    fresh.add_argument("--k-eval", type=int, required=True)
    fresh.add_argument(
        "--max-questions",
        type=parse_max_questions,
        default=None,
        help="questions per data source, or e.g. 100,embedded_3hop=217 (default: all)",
    )
    fresh.add_argument("--max-turns", type=int, default=None, help="model turns per attempt, if it must match")
    fresh.add_argument("--max-new-tokens", type=int, default=None, help="new tokens per model turn, idem")
    fresh.add_argument("--max-information-tokens", type=int, default=None, help="tokens of a passages block, idem")
    fresh.add_argument("--response-length", type=int, default=None, help="meta-episode token budget, idem")
    fresh.add_argument("--outcome-feedback", action="store_true", help="evaluated with outcome feedback")
    fresh.add_argument(
        "--reflection-restates-question", action="store_true", help="evaluated with the question in reflection turns"
    )
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    if args.command == "fresh":
        limits = {
            "max turns per attempt": args.max_turns,
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
    if args.command == "logged":
        return 0 if curves.logged_steps(args.run) >= args.steps else 1
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    try:
        if args.command == "dev-slice":
            written = curves.dev_slice(args.dev, args.per_source, args.out)
            print(f"dev slice: {written} questions ({args.per_source} per source) in {args.out} (split: dev)")
        elif args.command == "gate-record":
            saved = gate.record(args.plan)
            args.out.write_text(json.dumps(saved, indent=1) + "\n", encoding="utf-8")
            print(f"plan {saved['plan']}: commit {saved['commit']} at {saved['committed_at']}, blob {saved['blob']}")
        elif args.command == "piece-pack":
            for path in piece.pack(args.work, args.out):
                print(f"{path} ({path.stat().st_size / 1e6:.1f} MB)")
        elif args.command == "piece-unpack":
            runs = piece.unpack(args.pieces, args.work)
            print(f"restored into {args.work}: {', '.join(runs) or 'no run with a checkpoint'}")
        elif args.command == "curves":
            path = curves.write_curves(args.work, args.out)
            print(f"dev curves: {path}" if path else f"dev curves: no run in {args.work} logged a dev point")
        elif args.command == "plan":
            print(plan_from_arguments(args), end="")
        elif args.command == "arms":
            for arm in build_arms(parse_arms(args.arms), args.attempts, args.turns):
                gamma = "-" if arm.gamma is None else f"{arm.gamma:g}"
                print(arm.name, arm.attempts, arm.turns, gamma, arm.eval_attempts, arm.shape, arm.first_steps)
        elif args.command == "gate":
            found = gate.check(args.plan, args.work, enabled=not args.off, record_path=args.record)
            print(
                f"plan committed at {found['plan_committed_at']} ({found['plan_commit']})"
                if not args.off
                else "plan gate off (PLAN_GATE=0): this run tests nothing"
            )
        elif args.command == "launch":
            print(gate.launch(args.work, args.what))
        elif args.command == "recompute":
            print(records.render(records.recompute(args.report_dir)))
        elif args.command == "budget":
            match = match_runs(args.reference, args.rows, args.run, args.rows, args.at_step)
            write_match(match, args.out)
            logger.info(
                "budget %.0f model-written tokens; %d steps run, %d needed, step %d evaluated (ratio %.2f)",
                match.reference_model_tokens,
                match.steps_run,
                match.steps_needed,
                match.step,
                match.ratio,
            )
            print(next_steps(match, args.tolerance), match.step, match.steps_run)
        else:
            print(write_report(args.work, args.out, args.rows, args.note))
    except (ValueError, FileNotFoundError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
