"""``python -m mr_search_embedded.warmstart [--base DIR | --policy NAME] [--outcome-feedback] [--recipe R]
[--device D]``: builds (or finds) the warm-started policy of the world ``$MR_SEARCH_WORLD`` names and prints its
dir."""

from __future__ import annotations

import argparse
import logging
from pathlib import Path

from mr_search_embedded.tiny_model import POLICY_SHAPES, ensure_tiny_model, policy_shape
from mr_search_embedded.warmstart.train import RECIPES, ensure_warmstart, warmstart_config
from mr_search_embedded.world.variant import world_variant


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m mr_search_embedded.warmstart", description=__doc__)
    parser.add_argument("--base", type=Path, default=None, help="HF model dir to start from (default: the tiny policy)")
    parser.add_argument("--out", type=Path, default=None, help="output dir (default: $MR_SEARCH_CACHE/warmstart/<key>)")
    parser.add_argument(
        "--policy",
        default="tiny",
        choices=tuple(POLICY_SHAPES),
        help="shape of the tiny policy to start from when --base is not given: tiny (default) or small "
        "(mr_search_embedded.tiny_model.POLICY_SHAPES; the namesake world's comparison uses small)",
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
        "--recipe",
        default="world",
        choices=RECIPES,
        help="world (default): the world's own warm start; control: the default world's positive-control recipe "
        "(renamed entities, half the transcripts three attempts long; train.control_warmstart_config)",
    )
    parser.add_argument(
        "--device",
        default="cpu",
        choices=("cpu", "cuda", "auto"),
        help="where to train (default cpu; auto: a GPU when torch sees one; a GPU build has a cache key of its own)",
    )
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    try:
        config = warmstart_config(args.outcome_feedback, world_variant(), args.recipe)
    except ValueError as error:
        parser.error(str(error))
    base = args.base if args.base is not None else ensure_tiny_model(config=policy_shape(args.policy))
    try:
        built = ensure_warmstart(
            base_model=base, out_dir=args.out, config=config, threads=args.threads, device=args.device
        )
    except ValueError as error:
        parser.error(str(error))
    print(built)


if __name__ == "__main__":
    main()
