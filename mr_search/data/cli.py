"""Command line of ``scripts/prepare_data.py``: FlashRAG/ASearcher conversion to verl parquet, wiki-18 downloads."""

from __future__ import annotations

import argparse
import logging
import sys
from collections.abc import Sequence
from pathlib import Path

from mr_search.data import download as dl
from mr_search.data.flashrag import (
    TEST_SETS,
    TRAIN_SETS,
    VAL_PER_SOURCE,
    DataFormatError,
    convert_asearcher,
    convert_flashrag,
)

logger = logging.getLogger(__name__)


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="prepare_data.py", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)

    fr = sub.add_parser("flashrag", help="FlashRAG JSON lines -> train.parquet (NQ+HotpotQA) and test.parquet")
    fr.add_argument("--root", type=Path, required=True, help="folder holding <dataset>/<split>.jsonl")
    fr.add_argument("--out", type=Path, required=True, help="output folder")
    fr.add_argument("--train-sets", nargs="+", default=list(TRAIN_SETS))
    fr.add_argument("--test-sets", nargs="+", default=list(TEST_SETS))
    fr.add_argument(
        "--val-per-source",
        type=int,
        default=VAL_PER_SOURCE,
        help=f"questions per test set in val.parquet, the validation set during training (default {VAL_PER_SOURCE})",
    )
    fr.add_argument("--no-progress", action="store_true")

    asr = sub.add_parser("asearcher", help="ASearcher JSON lines -> seeded 90/10 train/test parquet")
    asr.add_argument("--input", type=Path, required=True)
    asr.add_argument("--out", type=Path, required=True)
    asr.add_argument("--seed", type=int, default=0)
    asr.add_argument("--test-fraction", type=float, default=0.1)
    asr.add_argument("--no-progress", action="store_true")

    down = sub.add_parser("download", help="wiki-18 corpus and/or its e5 flat index (resumable, verified)")
    down.add_argument("what", choices=("corpus", "index", "all"))
    down.add_argument("--out", type=Path, required=True)
    down.add_argument("--base-url", default=None, help="mirror replacing https://huggingface.co/datasets")
    down.add_argument("--no-progress", action="store_true")
    return parser


def _remotes(what: str, base_url: str | None) -> list[dl.RemoteFile]:
    remotes = [
        *(dl.WIKI18_CORPUS if what in ("corpus", "all") else ()),
        *(dl.WIKI18_E5_INDEX if what in ("index", "all") else ()),
    ]
    if base_url:
        base = base_url.rstrip("/")
        remotes = [dl.RemoteFile(r.url.replace(dl.HF_DATASETS, base), r.name, r.size, r.sha256) for r in remotes]
    return remotes


def main(argv: Sequence[str] | None = None) -> int:
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    args = _parser().parse_args(argv)
    try:
        if args.command == "flashrag":
            train, test = convert_flashrag(
                args.root,
                args.out,
                train_sets=args.train_sets,
                test_sets=args.test_sets,
                progress=not args.no_progress,
                val_per_source=args.val_per_source,
            )
        elif args.command == "asearcher":
            train, test = convert_asearcher(
                args.input, args.out, seed=args.seed, test_fraction=args.test_fraction, progress=not args.no_progress
            )
        else:
            paths = dl.download_all(_remotes(args.what, args.base_url), args.out, progress=not args.no_progress)
            by_name = {p.name: p for p in paths}
            if "wiki-18.jsonl.gz" in by_name:
                print(dl.gunzip(by_name["wiki-18.jsonl.gz"]))
            if "part_aa" in by_name:
                print(dl.concatenate([by_name["part_aa"], by_name["part_ab"]], args.out / "e5_Flat.index"))
            return 0
    except (DataFormatError, dl.DownloadError, ValueError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    print(train)
    print(test)
    return 0
