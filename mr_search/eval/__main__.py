"""``python -m mr_search.eval``: evaluate models on a test parquet through the meta-episode loop."""

from __future__ import annotations

import argparse
import logging
import sys
from collections.abc import Sequence
from pathlib import Path

from mr_search.eval.evaluate import ModelSpec, evaluate
from mr_search.eval.question_cap import parse_max_questions
from mr_search.eval.runner import EvalConfig


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m mr_search.eval", description=__doc__)
    parser.add_argument(
        "--model",
        action="append",
        required=True,
        metavar="[LABEL=]PATH",
        help="model folder, verl checkpoint (global_step_N) or run folder; repeat to compare",
    )
    parser.add_argument(
        "--data",
        type=Path,
        required=True,
        help="parquet to evaluate (embedded: python -m mr_search_embedded.prepare dev; test: once, the final number)",
    )
    parser.add_argument("--out", type=Path, required=True, help="output folder")
    parser.add_argument("--retriever-url", default="http://127.0.0.1:8000/retrieve")
    parser.add_argument("--attempts", type=int, default=EvalConfig.attempts, help="K_eval (default: 3)")
    parser.add_argument(
        "--max-questions",
        default=None,
        help="first N questions per data source, or e.g. 100,embedded_3hop=217 (a default and counts per source)",
    )
    parser.add_argument("--max-turns", type=int, default=EvalConfig.max_turns_per_attempt)
    parser.add_argument("--topk", type=int, default=EvalConfig.topk)
    parser.add_argument("--max-new-tokens", type=int, default=EvalConfig.max_new_tokens_per_turn)
    parser.add_argument("--max-information-tokens", type=int, default=EvalConfig.max_information_tokens)
    parser.add_argument("--prompt-length", type=int, default=EvalConfig.prompt_length)
    parser.add_argument("--response-length", type=int, default=EvalConfig.response_length)
    parser.add_argument(
        "--outcome-feedback",
        action="store_true",
        help="the reflection turn says whether the previous answer was right (MAGE-style; paper: off)",
    )
    parser.add_argument(
        "--reflection-restates-question",
        action="store_true",
        help="the reflection turn ends with the question's line (paper: off)",
    )
    parser.add_argument("--concurrency", type=int, default=EvalConfig.concurrency)
    parser.add_argument(
        "--workers",
        type=int,
        default=1,
        help="models evaluated at once, each in a process on one thread (default 1: one after the other)",
    )
    parser.add_argument("--no-progress", action="store_true")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    try:
        models = [ModelSpec.parse(m) for m in args.model]
        config = EvalConfig(
            attempts=args.attempts,
            max_turns_per_attempt=args.max_turns,
            topk=args.topk,
            max_new_tokens_per_turn=args.max_new_tokens,
            max_information_tokens=args.max_information_tokens,
            prompt_length=args.prompt_length,
            response_length=args.response_length,
            outcome_feedback=args.outcome_feedback,
            reflection_restates_question=args.reflection_restates_question,
            max_questions=None if args.max_questions is None else parse_max_questions(args.max_questions),
            concurrency=args.concurrency,
        )
        data = args.data
        paths = evaluate(
            models,
            data,
            args.out,
            retriever_url=args.retriever_url,
            config=config,
            progress=not args.no_progress,
            workers=args.workers,
        )
    except (ValueError, FileNotFoundError, RuntimeError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    for name in ("results.md", "results.json", "em_by_attempt.png", "trajectories.html", "trajectories.jsonl"):
        logging.getLogger(__name__).info("%s: %s", name, paths[name])
    print(args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
