"""What a warm start reads from a world: its training questions and a search that never shows a dev or test
entity's passage.

The supervised pass trains on the transcripts' turns and (``WarmStartConfig.env_loss_weight``) on the passages they
show, so a held-out entity must not appear in either. Training questions name no held-out entity (``world/splits.py``);
the transcripts' lexical search hides every passage that names one (``splits.naming_passages``), so a twin's or a
distractor's passage about a dev or test entity never fills a result list. Renamed entities and the namesake
world's decision windows draw names no corpus title has (``rename.py``, ``decision.py``): never a held-out one.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from mr_search_embedded.warmstart.lookup import LexicalIndex
from mr_search_embedded.world.splits import HeldOut, naming_passages


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    with open(path, encoding="utf-8") as handle:
        return [json.loads(line) for line in handle if line.strip()]


def training_index(corpus: Sequence[dict[str, Any]], held_out: HeldOut) -> LexicalIndex:
    """The transcripts' lexical search over ``corpus``, hiding every passage that names a dev or test entity."""
    return LexicalIndex(corpus, hidden=naming_passages(corpus, held_out.names))


def warmstart_inputs(world) -> tuple[LexicalIndex, list[dict[str, Any]]]:
    """``(index, training questions)`` of ``world`` (a ``WorldPaths``): the only world data a warm start reads
    besides the namesake world's name words (``decision.world_name_words``)."""
    return training_index(read_jsonl(world.corpus), HeldOut.read(world.held_out)), read_jsonl(world.train)
