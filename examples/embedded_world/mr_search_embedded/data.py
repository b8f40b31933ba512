"""The embedded world's questions as verl parquet (train, dev, test), cached next to the world."""

from __future__ import annotations

import fcntl
import json
import logging
from pathlib import Path
from typing import Any, Final, NamedTuple

from mr_search.data.rows import make_row, write_parquet
from mr_search_embedded.world.world import WorldPaths, default_cache_dir, ensure_world

logger = logging.getLogger(__name__)

# Bump when the row layout changes: cached parquet files of another version are rewritten.
# 2: a dev split; extra_info's split is train, dev or test.
FORMAT_VERSION: Final = 2


class EmbeddedParquet(NamedTuple):
    """The three splits' parquet files (``world.py`` says which is which): choose on ``dev``, evaluate once on
    ``test``."""

    train: Path
    dev: Path
    test: Path


def world_rows(path: Path, split: str) -> list[dict[str, Any]]:
    """Converts one of the world's question files (JSON lines) to verl rows; ``extra_info`` carries the row's
    ``split``, ``hops`` (1, 2 or 3), ``relation`` and ``id``."""
    rows = []
    with path.open(encoding="utf-8") as handle:
        for index, line in enumerate(handle):
            q = json.loads(line)
            rows.append(
                make_row(
                    question=q["question"],
                    golden_answers=q["golden_answers"],
                    data_source=q["data_source"],
                    index=index,
                    split=split,
                    gold_doc_ids=q["gold_doc_ids"],
                    extra={"id": q["id"], "hops": q["hops"], "relation": q.get("relation", "")},
                )
            )
    return rows


def _stamp(world: WorldPaths) -> dict[str, Any]:
    meta = json.loads(world.meta.read_text(encoding="utf-8"))
    return {"format": FORMAT_VERSION, "world_sha256": meta["sha256"]}


def ensure_embedded_parquet(cache_dir: Path | None = None) -> EmbeddedParquet:
    """Returns the ``(train, dev, test)`` parquet paths: the embedded world's questions in verl's RL layout.

    Built once under ``<cache_dir>/data/embedded`` (``cache_dir`` defaults to the cache root of the world
    ``$MR_SEARCH_WORLD`` names), rebuilt when the world or the row layout changes.
    """
    cache = Path(cache_dir) if cache_dir is not None else default_cache_dir()
    world = ensure_world(cache)
    out = cache / "data" / "embedded"
    paths = EmbeddedParquet(*(out / f"{split}.parquet" for split in EmbeddedParquet._fields))
    stamp_path = out / "stamp.json"
    stamp = _stamp(world)

    def current() -> bool:
        try:
            return json.loads(stamp_path.read_text()) == stamp and all(p.is_file() for p in paths)
        except (OSError, ValueError):
            return False

    if current():
        return paths
    out.mkdir(parents=True, exist_ok=True)
    with open(out / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not current():
            for split, path in zip(EmbeddedParquet._fields, paths, strict=True):
                write_parquet(world_rows(world.split(split), split), path)
            stamp_path.write_text(json.dumps(stamp, sort_keys=True) + "\n")
            logger.info("embedded parquet written to %s", out)
    return paths
