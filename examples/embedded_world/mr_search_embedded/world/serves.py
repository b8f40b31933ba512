"""Does a running retrieval service serve this process's embedded world? (``$MR_SEARCH_WORLD``: the default or a
variant; their corpora differ, and a service of the other one would answer every search with the wrong passages.)

    python -m mr_search_embedded.world.serves --url http://127.0.0.1:8000/retrieve

Searches a few passages of the world's corpus by their own text and requires each back at rank 1 with the same id
and text. Exit 0 when it does, 1 (with the first mismatch named) when it does not.
"""

from __future__ import annotations

import argparse
import json
import sys
import urllib.request
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from mr_search_embedded.world.variant import world_variant
from mr_search_embedded.world.world import ensure_world


def probe_passages(corpus: Path, count: int = 3) -> list[dict[str, Any]]:
    """``count`` passages spread over the corpus (first, last, between)."""
    with corpus.open(encoding="utf-8") as handle:
        rows = [json.loads(line) for line in handle if line.strip()]
    if not rows:
        raise ValueError(f"{corpus} is empty")
    picks = sorted({round(i * (len(rows) - 1) / max(1, count - 1)) for i in range(count)})
    return [rows[i] for i in picks]


def mismatch(url: str, passages: Sequence[dict[str, Any]], timeout_s: float = 60.0) -> str | None:
    """None when the service at ``url`` returns each passage first for its own text, else what it returned."""
    body = json.dumps({"queries": [p["contents"] for p in passages], "topk": 1, "return_scores": False})
    request = urllib.request.Request(url, body.encode(), {"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=timeout_s) as response:
        results = json.loads(response.read())["result"]
    for passage, docs in zip(passages, results, strict=True):
        top = docs[0] if docs else {}
        if str(top.get("id")) != str(passage["id"]) or top.get("contents") != passage["contents"]:
            return (
                f"passage {passage['id']} ({passage['title']!r}) came back as {top.get('id')!r} ({top.get('title')!r})"
            )
    return None


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--url", default="http://127.0.0.1:8000/retrieve")
    args = parser.parse_args(argv)
    found = mismatch(args.url, probe_passages(ensure_world().corpus))
    if found is None:
        return 0
    sys.stderr.write(f"{args.url} does not serve the {world_variant()!r} embedded world: {found}\n")
    return 1


if __name__ == "__main__":
    raise SystemExit(main())
