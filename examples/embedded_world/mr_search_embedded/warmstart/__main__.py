"""``python -m mr_search_embedded.warmstart [--base DIR | --policy NAME] [--outcome-feedback] [--namesake-recipe N]``:
builds (or finds) the warm-started policy and prints its dir."""

from __future__ import annotations

import argparse
import logging
from pathlib import Path

from mr_search_embedded.tiny_model import ensure_tiny_model
from mr_search_embedded.warmstart.train import (
    NAMESAKE_RECIPE,
    NAMESAKE_RECIPES,
    ensure_warmstart,
    policy_config,
    warmstart_config,
)
from mr_search_embedded.world.variant import world_variant


def add_namesake_recipe(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--namesake-recipe",
        type=int,
        default=None,
        help=f"in the namesake world (MR_SEARCH_WORLD=namesake), the warm-start recipe (1-{NAMESAKE_RECIPES}, default "
        f"{NAMESAKE_RECIPE}, or 6 on the world's version 4; 2 is the build reports/compare_namesake's first run used; "
        "4 starts from a policy whose "
        "tokenizer has each person-name word as one token; 5 adds a decision stage to 3; 6 is for world version 4 "
        "(MR_SEARCH_NAMESAKE_VERSION=4: the presence check), 7 too (6 with its decision windows mixed into the whole "
        "transcripts, names from every name word, a fixed answer kept more often), 8 too (7 with B's article at any "
        "place among the passages); "
        "mr_search_embedded.warmstart.train.default_namesake_recipe)",
    )


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m mr_search_embedded.warmstart", description=__doc__)
    parser.add_argument("--base", type=Path, default=None, help="HF model dir to start from (default: the tiny policy)")
    parser.add_argument("--out", type=Path, default=None, help="output dir (default: $MR_SEARCH_CACHE/warmstart/<key>)")
    parser.add_argument(
        "--policy",
        default="tiny",
        help="shape of the tiny policy to start from when --base is not given: tiny (default), small or wide "
        "(mr_search_embedded.tiny_model.POLICY_SHAPES)",
    )
    parser.add_argument(
        "--threads",
        type=int,
        default=0,
        help="torch threads while training (default 0: chosen by timing steps as the machine's load changes)",
    )
    parser.add_argument(
        "--outcome-feedback",
        action="store_true",
        help="transcripts whose reflection turns say whether the previous answer was right (MAGE-style; paper: off),"
        " for training with mr_search.episode.outcome_feedback=true",
    )
    parser.add_argument(
        "--device",
        default="cpu",
        choices=("cpu", "cuda", "auto"),
        help="where to train (default cpu; auto: a GPU when torch sees one; a GPU build has a cache key of its own)",
    )
    add_namesake_recipe(parser)
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    try:
        config = warmstart_config(args.outcome_feedback, world_variant(), args.namesake_recipe)
        shape = policy_config(args.policy, world_variant(), args.namesake_recipe)
    except ValueError as error:
        parser.error(str(error))
    base = args.base if args.base is not None else ensure_tiny_model(config=shape)
    try:
        built = ensure_warmstart(
            base_model=base, out_dir=args.out, config=config, threads=args.threads, device=args.device
        )
    except ValueError as error:
        parser.error(str(error))
    print(built)


if __name__ == "__main__":
    main()
