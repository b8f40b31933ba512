"""``python -m mr_search_embedded.prepare [WHAT ...]``: builds (once, cached) what the embedded default needs and
prints the paths asked for, one a line, in the order asked.

WHAT: ``corpus`` (the world's passages, JSON lines), ``train``, ``dev`` and ``test`` (verl parquet: train on
``train``, choose on ``dev``, evaluate once on ``test``; ``world/world.py`` says which is which), ``dense-index`` and
``bm25-index`` (the retrieval service's indexes of the corpus), ``policy`` (the warm-started tiny policy; the first
build takes a few minutes; ``$MR_SEARCH_WARMSTART_SCALE`` trains a share of its steps, ``warmstart/scale.py``),
``all`` (every one, in that order). The product's launchers call this for their
embedded defaults, so neither the plugin nor the retrieval service imports the world. ``$MR_SEARCH_WORLD`` picks the
world (``default``, ``namesake`` or ``threehop``), ``$MR_SEARCH_CACHE`` the cache folder.
"""

from __future__ import annotations

import argparse
import logging
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Final


def corpus() -> Path:
    from mr_search_embedded.world.world import ensure_world

    return Path(ensure_world().corpus)


def _parquet(split: str) -> Callable[[], Path]:
    def build() -> Path:
        from mr_search_embedded.data import ensure_embedded_parquet

        return getattr(ensure_embedded_parquet(), split)

    return build


def _index(retriever: str) -> Callable[[], Path]:
    def build() -> Path:
        from mr_search_retrieval.index_cache import ensure_index

        return ensure_index(corpus(), retriever)

    return build


def policy() -> Path:
    from mr_search_embedded.tiny_model import ensure_tiny_model, policy_shape
    from mr_search_embedded.warmstart.scale import scaled, warmstart_scale
    from mr_search_embedded.warmstart.train import ensure_warmstart, warmstart_config
    from mr_search_embedded.world.variant import world_variant

    config = scaled(warmstart_config(False, world_variant()), warmstart_scale())
    base = ensure_tiny_model(config=policy_shape("tiny"))
    return ensure_warmstart(base_model=base, config=config)


PIECES: Final[dict[str, Callable[[], Path]]] = {
    "corpus": corpus,
    "train": _parquet("train"),
    "dev": _parquet("dev"),
    "test": _parquet("test"),
    "dense-index": _index("dense"),
    "bm25-index": _index("bm25"),
    "policy": policy,
}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m mr_search_embedded.prepare", description=__doc__.splitlines()[0])
    parser.add_argument(
        "what",
        nargs="*",
        default=["all"],
        choices=[*PIECES, "all"],
        metavar="WHAT",
        help=f"any of {', '.join(PIECES)}, or all (default)",
    )
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s", stream=sys.stderr)
    names = [name for what in args.what for name in (PIECES if what == "all" else [what])]
    for name in names:
        print(PIECES[name](), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
