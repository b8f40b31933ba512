"""Corpus store: a JSON-lines file read through mmap and a numpy array of line offsets.

Millions of passages stay on disk (the page cache holds the hot ones); only the passages a
search returns are parsed into Python objects.
"""

from __future__ import annotations

import hashlib
import json
import logging
import mmap
import os
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from mr_search_retrieval.config import default_cache_dir

logger = logging.getLogger(__name__)

_SCAN_CHUNK = 64 * 1024 * 1024
# Line spans up to this size are copied into RAM (21M passages: 336 MB); an np.memmap costs ~10x more per
# lookup (its __getitem__/__array_finalize__), so larger ones are still read as a plain ndarray view of the map.
SPANS_IN_RAM_BYTES = 1 << 30


def _scan_offsets(buf: mmap.mmap | bytes, size: int) -> np.ndarray:
    """(n, 2) int64 [start, end) of every non-blank line, found with numpy rather than a Python loop."""
    newlines = []
    for base in range(0, size, _SCAN_CHUNK):
        chunk = np.frombuffer(buf[base : min(size, base + _SCAN_CHUNK)], dtype=np.uint8)
        newlines.append(np.flatnonzero(chunk == 10).astype(np.int64) + base)
    nl = np.concatenate(newlines) if newlines else np.zeros(0, dtype=np.int64)
    ends = np.concatenate([nl, [size]]) if (size and (nl.size == 0 or nl[-1] != size - 1)) else nl
    starts = np.concatenate([[0], ends[:-1] + 1]).astype(np.int64)
    spans = np.stack([starts, ends], axis=1)
    return spans[spans[:, 1] - spans[:, 0] > 1]  # drop blank lines ("" or a lone "\r")


def _first_non_object_line(buf: mmap.mmap, spans: np.ndarray) -> int | None:
    """Index of the first line that is not shaped like a JSON object ({ ... }), or None. Vectorised over the lines'
    first and last bytes (21M lines: well under a second), so that a line that is not JSON stops the server at
    start-up, not at the query that returns it; only lines with surrounding whitespace are looked at one by one."""
    if not len(spans):
        return None
    data = np.frombuffer(buf, dtype=np.uint8)
    odd = np.flatnonzero((data[spans[:, 0]] != ord("{")) | (data[spans[:, 1] - 1] != ord("}")))
    del data  # a live view of the map would keep it from closing
    for i in odd.tolist():
        line = bytes(buf[int(spans[i, 0]) : int(spans[i, 1])]).strip()
        if not (line.startswith(b"{") and line.endswith(b"}")):
            return i
    return None


def _offsets_path(corpus: Path, cache_dir: Path | None) -> Path:
    beside = corpus.with_name(corpus.name + ".offsets.npy")
    if os.access(corpus.parent, os.W_OK):
        return beside
    key = hashlib.sha256(str(corpus.resolve()).encode()).hexdigest()[:16]
    return (cache_dir or default_cache_dir()) / "corpus_offsets" / f"{corpus.stem}-{key}.npy"


class CorpusStore:
    """Random access to passage i of a JSON-lines corpus (row i of the index is line i of the file)."""

    def __init__(self, path: str | Path, cache_dir: Path | None = None) -> None:
        self.path = Path(path)
        if not self.path.is_file():
            raise FileNotFoundError(
                f"corpus file {self.path} does not exist; pass a JSON-lines file of {{'id', 'contents'}} objects"
            )
        size = self.path.stat().st_size
        if size == 0:
            raise ValueError(f"corpus file {self.path} is empty")
        self._file = self.path.open("rb")
        self._mm = mmap.mmap(self._file.fileno(), 0, access=mmap.ACCESS_READ)
        self._spans = self._load_or_build_offsets(size, cache_dir)
        self._check_line(0)
        self._check_line(len(self) - 1)
        # Lines whose ids are JSON strings can be spliced into responses as they are, unparsed.
        self.raw_ok = all(isinstance(json.loads(self.raw(i)).get("id"), str) for i in (0, len(self) - 1))

    def _load_or_build_offsets(self, size: int, cache_dir: Path | None) -> np.ndarray:
        sidecar = _offsets_path(self.path, cache_dir)
        if sidecar.is_file() and sidecar.stat().st_mtime >= self.path.stat().st_mtime:
            spans = np.load(sidecar, mmap_mode="r")
            if spans.ndim == 2 and spans.shape[0] and int(spans[-1, 1]) in (size, size - 1, size - 2):
                return np.array(spans) if spans.nbytes <= SPANS_IN_RAM_BYTES else np.asarray(spans)
        logger.info("indexing line offsets of %s", self.path)
        spans = _scan_offsets(self._mm, size)
        bad = _first_non_object_line(self._mm, spans)
        if bad is not None:  # the offsets are not cached: the check runs again once the file is fixed
            snippet = bytes(self._mm[int(spans[bad, 0]) : int(min(spans[bad, 1], spans[bad, 0] + 80))])
            self.close()
            raise ValueError(
                f"corpus file {self.path}: line {bad + 1} is not valid JSON (not an object: {snippet!r}); "
                'every line must be one {"id": ..., "contents": ...} object: fix or remove that line'
            )
        try:
            sidecar.parent.mkdir(parents=True, exist_ok=True)
            tmp = sidecar.with_name(sidecar.name + f".{os.getpid()}.tmp.npy")
            np.save(tmp, spans)
            tmp.replace(sidecar)
        except OSError as err:  # a read-only place only costs a rescan next time
            logger.warning("could not cache corpus offsets at %s: %s", sidecar, err)
        return spans

    def _check_line(self, i: int) -> None:
        try:
            doc = self.get(i)
        except json.JSONDecodeError as err:
            raise ValueError(f"corpus file {self.path}: line {i + 1} is not valid JSON ({err})") from err
        if not isinstance(doc, dict) or "id" not in doc or "contents" not in doc:
            raise ValueError(f"corpus file {self.path}: line {i + 1} lacks the 'id' and 'contents' fields")

    def __len__(self) -> int:
        return int(self._spans.shape[0])

    def raw(self, i: int) -> bytes:
        """Line i as stored: one JSON object (no newline; may end in whitespace)."""
        start, end = self._spans[i]
        return self._mm[int(start) : int(end)]

    def raw_many(self, ids: Sequence[int]) -> list[bytes]:
        """Lines `ids` as stored (one vectorised span lookup for all of them)."""
        mm = self._mm
        return [mm[a:b] for a, b in self._spans[np.asarray(ids, dtype=np.int64)].tolist()]

    def get(self, i: int) -> dict[str, Any]:
        doc = json.loads(self.raw(i))
        if isinstance(doc, dict) and not isinstance(doc.get("id"), str) and "id" in doc:
            doc["id"] = str(doc["id"])
        return doc

    def get_many(self, ids: Sequence[int]) -> list[dict[str, Any]]:
        return [self.get(int(i)) for i in ids]

    def iter_docs(self, start: int = 0) -> Iterator[dict[str, Any]]:
        for i in range(start, len(self)):
            yield self.get(i)

    def close(self) -> None:
        self._mm.close()
        self._file.close()
