"""The world's question splits by name: ``train``, ``dev`` (every earlier choice read it) and ``test`` (read once, by
a comparison's final evaluation), each a verl parquet built by ``python -m mr_search_embedded.prepare``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Final

SPLITS: Final = ("train", "dev", "test")


def check_split(split: str) -> str:
    """``split`` if it is a split's name, else a ValueError naming the valid ones."""
    if split not in SPLITS:
        raise ValueError(f"split {split!r} is not valid; use one of {', '.join(SPLITS)}")
    return split


def split_parquet(split: str) -> Path:
    """The verl parquet of ``split`` for ``$MR_SEARCH_WORLD``, built (cached) if needed."""
    from mr_search_embedded.prepare import PIECES

    return Path(PIECES[check_split(split)]())


def same_questions(first: Path, second: Path) -> bool:
    """Whether two parquet files are one file or hold the same bytes."""
    first, second = Path(first), Path(second)
    if first.resolve() == second.resolve():
        return True
    return first.is_file() and second.is_file() and first.read_bytes() == second.read_bytes()


def main(argv: list[str] | None = None) -> int:
    """``python -m mr_search_embedded.splits SPLIT ...``: prints each split's parquet path, one a line."""
    import argparse

    parser = argparse.ArgumentParser(prog="python -m mr_search_embedded.splits", description=main.__doc__)
    parser.add_argument("split", nargs="+", choices=SPLITS)
    for split in parser.parse_args(argv).split:
        print(split_parquet(split), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
