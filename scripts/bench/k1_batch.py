"""The K = 1 run's batch that samples about as many tokens a step as MR-Search's run did.

    python scripts/bench/k1_batch.py RUN_DIR_K3 --train-batch-size 64 [--ppo-mini-batch-size 32]
    # prints: K1_TRAIN_BATCH_SIZE K1_PPO_MINI_BATCH_SIZE

A K = 1 episode is one attempt, so it samples about what attempt 1 of a MR-Search meta-episode samples (same policy,
question, turn and token limits). Over the MR-Search run's steady steps (``step_cost.py``), the scale
is its model-written tokens over attempt 1's (``mr_search/model_tokens`` over ``mr_search/attempt_1/trained_tokens``:
3.0 when every attempt writes as much as the first). The K = 1 run keeps the group size (``rollout.n``) and the
updates a step (train_batch_size / ppo_mini_batch_size) and takes train_batch_size x scale questions, rounded to a
whole number of mini-batches of a multiple of ``--multiple`` questions (the GPU count, so that verl splits the rows
evenly). ``k1_cost.py`` prints how close the two runs' tokens a step came.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Final

from mr_search.runlog.training_log import step_record

sys.path.insert(0, str(Path(__file__).resolve().parent))
from step_cost import steady_steps

FIRST_ATTEMPT: Final = "mr_search/attempt_1/trained_tokens"


def token_scale(run_dir: Path) -> float:
    """Model-written tokens over attempt 1's, summed over the run's steady steps.

    Raises:
        ValueError: no steady step, or the counts not logged (the mr_search estimator logs them).
    """
    steady, skipped = steady_steps(run_dir)
    if not steady:
        raise ValueError(f"{run_dir}: no step after the first of a launch (left out: {skipped}); train 2 steps or more")
    total = first = 0.0
    for step, data in steady:
        model = step_record(step, data, rows=1).model_tokens  # rows only scale the response tokens, unused here
        if model is None or FIRST_ATTEMPT not in data:
            raise ValueError(
                f"{run_dir} step {step}: no model-written tokens per attempt logged; train MR-Search with "
                "algorithm.adv_estimator=mr_search, or give the K = 1 batch by hand (K1_TRAIN_BATCH_SIZE)"
            )
        total += model
        first += float(data[FIRST_ATTEMPT])
    if first <= 0:
        raise ValueError(f"{run_dir}: attempt 1 wrote no tokens in the steady steps; give the K = 1 batch by hand")
    return total / first


def k1_batch(train_batch_size: int, ppo_mini_batch_size: int, scale: float, multiple: int = 1) -> tuple[int, int]:
    """(train_batch_size, ppo_mini_batch_size) of the K = 1 run: ``scale`` x the questions, the same updates a step,
    the mini-batch a multiple of ``multiple`` questions (the GPU count: verl splits every mini-batch's rows evenly)."""
    if train_batch_size < 1 or ppo_mini_batch_size < 1 or train_batch_size % ppo_mini_batch_size:
        raise ValueError(
            f"train_batch_size={train_batch_size}, ppo_mini_batch_size={ppo_mini_batch_size}: expected whole numbers "
            ">= 1, the mini-batch dividing the batch"
        )
    if scale <= 0:
        raise ValueError(f"scale={scale}: expected a positive token scale")
    if multiple < 1:
        raise ValueError(f"multiple={multiple}: expected a whole number of questions >= 1 (e.g. the GPU count)")
    updates = train_batch_size // ppo_mini_batch_size
    mini = multiple * max(1, round(train_batch_size * scale / updates / multiple))
    return mini * updates, mini


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("mr_search_run", type=Path, help="MR-Search's run folder")
    parser.add_argument("--train-batch-size", type=int, required=True, help="MR-Search's questions a step")
    parser.add_argument("--ppo-mini-batch-size", type=int, default=None, help="MR-Search's (default: the batch)")
    parser.add_argument("--multiple", type=int, default=1, help="questions a mini-batch is a multiple of (GPUs)")
    args = parser.parse_args(argv)
    try:
        scale = token_scale(args.mr_search_run)
        batch, mini = k1_batch(
            args.train_batch_size, args.ppo_mini_batch_size or args.train_batch_size, scale, args.multiple
        )
    except (FileNotFoundError, ValueError) as error:
        print(f"k1_batch: {error}", file=sys.stderr)
        return 2
    print(f"k1_batch: model-written tokens / attempt 1's = {scale:.3f}", file=sys.stderr)
    print(batch, mini)
    return 0


if __name__ == "__main__":
    sys.exit(main())
