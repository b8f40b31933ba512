"""``python -m mr_search_embedded.compare plan``: the plan's arguments (compare.sh's knobs) and its building."""

from __future__ import annotations

import argparse
import dataclasses
from pathlib import Path

from mr_search.eval.question_cap import QuestionCap, parse_max_questions
from mr_search_embedded.compare.arms import build_arms, parse_arms
from mr_search_embedded.compare.plan import BUDGETS, TOKENS, UPDATES, Plan, render_plan, write_plan, written_of
from mr_search_embedded.compare.walltime import plan_wall_time, timings_from_comparison

DEFAULT_SOURCES = 2  # data sources assumed for the wall time when neither the test split nor the timings say


def add_plan_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--arms", required=True, help="the ARMS knob: names separated by spaces or commas")
    parser.add_argument("--attempts", type=int, required=True, help="MR-Search's K")
    parser.add_argument("--turns", type=int, required=True, help="model turns per attempt")
    parser.add_argument("--seeds", type=int, nargs="+", required=True, help="the seeds, in order")
    parser.add_argument("--steps", type=int, required=True, help="MR-Search's steps (the budget)")
    parser.add_argument("--baseline-steps", type=int, required=True, help="the K = 1 arms' first launch")
    parser.add_argument("--batch", type=int, required=True)
    parser.add_argument("--group", type=int, required=True)
    parser.add_argument("--lr", required=True)
    parser.add_argument("--tolerance", type=float, required=True)
    parser.add_argument(
        "--max-questions",
        required=True,
        help="first N test questions per data source, or e.g. 100,embedded_3hop=217 (a default and counts per source)",
    )
    parser.add_argument("--response-length", type=int, required=True)
    parser.add_argument("--max-new-tokens", type=int, required=True)
    parser.add_argument("--max-information-tokens", type=int, required=True)
    parser.add_argument("--world", required=True)
    parser.add_argument("--policy", required=True)
    parser.add_argument("--timings", type=Path, default=None, help="a comparison.json with measured step times")
    parser.add_argument("--aim-minutes", type=float, default=60.0, help="the wall time aimed at")
    parser.add_argument("--overlap", type=int, choices=(0, 1), default=1, help="OVERLAP_EVAL")
    parser.add_argument("--budget", choices=BUDGETS, default=TOKENS, help="BUDGET: what every arm is matched on")
    parser.add_argument("--dev-questions", type=int, default=0, help="DEV_QUESTIONS: dev curve questions per source")
    parser.add_argument("--dev-freq", type=int, default=0, help="DEV_FREQ: steps between dev curve points")
    parser.add_argument("--parallel", type=int, default=1, help="PARALLEL_RUNS: training runs at once")
    parser.add_argument("--engine", default="", help="ROLLOUT_ENGINE as resolved")
    parser.add_argument("--positive-control", type=int, choices=(0, 1), default=0, help="OUTCOME_FEEDBACK")
    parser.add_argument("--warmstart-recipe", default="world", help="WARMSTART_RECIPE: world or control")
    parser.add_argument("--mini-batch", type=int, default=None, help="MINI_BATCH: questions an update")
    for split in ("train", "dev", "test"):
        parser.add_argument(f"--{split}", type=Path, default=None, help=f"the {split} parquet (absent: a dry run)")
    parser.add_argument("--out", type=Path, default=None, help="work folder: write plan.json and plan.md there")
    parser.add_argument("--report-dir", type=Path, default=None, help="also write plan.md there (with --out)")


def _questions(test: Path | None, max_questions: int | QuestionCap) -> int | None:
    if test is None:
        return None
    from mr_search.eval.evaluate import load_rows

    return len(load_rows(test, max_questions))


def _estimate(cap: int | QuestionCap, sources: int) -> int:
    """Questions a dry run's plan expects: the per-source count times the sources (a cap: its named counts, and its
    default for the sources it does not name)."""
    if isinstance(cap, int):
        return cap * sources
    named = sum(cap.by_source.values())
    return named + (cap.default or 0) * max(0, sources - len(cap.by_source))


def _sources_in(timings: Path | None) -> int:
    import json

    if timings is None or not timings.is_file():
        return DEFAULT_SOURCES
    sources = [s for s in json.loads(timings.read_text(encoding="utf-8")).get("sources", []) if s != "average"]
    return len(sources) or DEFAULT_SOURCES


def build_plan(args: argparse.Namespace) -> Plan:
    from mr_search_embedded.reads import probed

    arms = tuple(build_arms(parse_arms(args.arms), args.attempts, args.turns))
    args.max_questions = parse_max_questions(args.max_questions)
    for name in ("steps", "baseline_steps", "batch", "group", "parallel"):
        if getattr(args, name) < 1:
            raise ValueError(f"--{name.replace('_', '-')}={getattr(args, name)}: give a whole number >= 1")
    if args.dev_questions < 0 or (args.dev_questions and args.dev_freq < 1):
        raise ValueError(
            f"--dev-questions={args.dev_questions} --dev-freq={args.dev_freq}: give DEV_QUESTIONS >= 0 and, with "
            "dev questions, DEV_FREQ >= 1 (steps between the dev curve's points)"
        )
    if args.parallel > 1 and args.budget != UPDATES:
        raise ValueError(
            f"--parallel={args.parallel} needs --budget updates: under the token budget an arm's steps depend on "
            "MR-Search's finished run, so the arms train one after another (BUDGET=updates to train them side by side)"
        )
    questions = _questions(args.test, args.max_questions)
    reference = args.budget == UPDATES
    first = {a.name: args.steps if reference or a.first_steps == "reference" else args.baseline_steps for a in arms}
    timings = wall = None
    note = ""
    if args.timings is None:
        note = "no comparison.json with measured step times was given (TIMINGS)"
    else:
        try:
            timings = timings_from_comparison(args.timings, [a.name for a in arms])
        except (FileNotFoundError, ValueError) as err:
            note = str(err)
    if timings is not None:
        estimate = questions if questions is not None else _estimate(args.max_questions, _sources_in(args.timings))
        wall = plan_wall_time(
            arms, len(args.seeds), first, estimate, timings, 60.0 * args.aim_minutes, bool(args.overlap)
        )
    splits = {
        name: str(path) if path is not None else f"python -m mr_search_embedded.splits {name} (resolved at the start)"
        for name, path in (("train", args.train), ("dev", args.dev), ("test", args.test))
    }
    return Plan(
        world=args.world,
        policy=args.policy,
        arms=arms,
        seeds=tuple(args.seeds),
        steps=args.steps,
        baseline_steps=args.baseline_steps,
        batch=args.batch,
        group=args.group,
        lr=args.lr,
        tolerance=args.tolerance,
        max_questions=args.max_questions,
        questions=questions,
        response_length=args.response_length,
        max_new_tokens=args.max_new_tokens,
        max_information_tokens=args.max_information_tokens,
        splits=splits,
        # The comparison's own read (its warm start's test evaluation, recorded at its launch) is not an earlier one.
        probed=None if args.test is None else probed(args.test, args.dev, work=args.out).as_dict(),
        timings=timings,
        wall=wall,
        wall_note=note,
        budget=args.budget,
        dev_questions=args.dev_questions,
        dev_freq=args.dev_freq if args.dev_questions else 0,
        parallel=args.parallel,
        engine=args.engine,
        positive_control=bool(args.positive_control),
        mini_batch=args.mini_batch or args.batch,
        warmstart_recipe=args.warmstart_recipe,
    )


def plan_from_arguments(args: argparse.Namespace) -> str:
    """Builds the plan; with ``--out`` writes it (a continued run keeps its first plan). Returns its markdown."""
    plan = build_plan(args)
    if args.out is None:
        return render_plan(plan)
    if args.report_dir is not None:
        plan = _as_committed(plan, args.report_dir / "plan.md")
    _, md_path = write_plan(plan, args.out)
    text = md_path.read_text(encoding="utf-8")
    if args.report_dir is not None:
        args.report_dir.mkdir(parents=True, exist_ok=True)
        (args.report_dir / "plan.md").write_text(text, encoding="utf-8")
    return text


def _as_committed(plan: Plan, report_plan: Path) -> Plan:
    """``plan`` with the writing time of the report folder's plan where that plan says the same otherwise.

    The report's plan is the one committed before any launch; a machine that writes it again (a GPU node's copy of
    the tree, a later piece) must leave its bytes alone, or the plan gate's blob id never matches there.
    """
    if not report_plan.is_file():
        return plan
    existing = report_plan.read_text(encoding="utf-8")
    written = written_of(existing)
    if written is None:
        return plan
    kept = dataclasses.replace(plan, written=written)
    return kept if render_plan(kept) == existing else plan
