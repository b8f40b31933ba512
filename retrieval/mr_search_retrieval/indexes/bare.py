"""Indexes other tools built, served as they are (Search-R1's bare `e5_Flat.index`, a pyserini Lucene directory):
the start-up checks that stand in for the metadata.json they lack."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from mr_search_retrieval.indexes.metadata import METADATA_FILE

if TYPE_CHECKING:
    from mr_search_retrieval.corpus import CorpusStore
    from mr_search_retrieval.encoders import Encoder
    from mr_search_retrieval.indexes import VectorIndex

logger = logging.getLogger(__name__)

# "metadata": a directory mr-search-build-index wrote; "faiss-file": a FAISS index file alone; "lucene": a Lucene
# (pyserini) index directory.
INDEX_FORMATS = ("metadata", "faiss-file", "lucene")
WHAT = {"faiss-file": "FAISS index file", "lucene": "Lucene index"}
# A passage re-encoded on CPU in bf16 or on GPU in fp16 keeps cosine > 0.999 to its float32 vector; another
# pooling moves it to ~0.55, a "passage: " prefix MiniLM was not built with to 0.96-0.98.
MIN_COSINE = 0.99
SEARCH_R1_HINT = "Search-R1's e5_Flat.index goes with wiki-18.jsonl and the e5-base-v2 encoder"


def index_format(path: Path) -> str:
    """Which kind of index `path` is; FileNotFoundError naming what was expected when it is none."""
    if path.is_file():
        return "faiss-file"
    if path.is_dir():
        if (path / METADATA_FILE).is_file():
            return "metadata"
        if any(p.name.startswith("segments_") for p in path.iterdir()):
            return "lucene"
        files = sorted(p.name for p in path.glob("*.index"))
        hint = f"; to serve a FAISS file pass it itself, e.g. {path / files[0]}" if files else ""
        raise FileNotFoundError(
            f"index directory {path} has no {METADATA_FILE} (mr-search-build-index writes one) and is not a Lucene "
            f"index{hint}"
        )
    raise FileNotFoundError(
        f"index {path} does not exist; pass a FAISS index file (Search-R1: e5_Flat.index), a Lucene index directory "
        "or a directory built by mr-search-build-index (RETRIEVER_INDEX / --index-dir)"
    )


def faiss_file_shape(path: Path) -> tuple[int, int] | None:
    """(dim, rows) from a FAISS file's header, read without loading the index (e5_Flat.index is 65 GB); None when
    the header is not the common one (then the loaded index is checked)."""
    with path.open("rb") as f:
        head = f.read(16)
    if len(head) < 16:
        raise ValueError(f"FAISS index file {path} is only {len(head)} bytes: it is truncated; download it again")
    dim = int.from_bytes(head[4:8], "little", signed=True)
    rows = int.from_bytes(head[8:16], "little", signed=True)
    return (dim, rows) if 0 < dim < 1 << 16 and rows >= 0 else None


def check_rows(rows: int, index: Path, corpus: CorpusStore, what: str) -> None:
    if rows != len(corpus):
        raise ValueError(
            f"{what} {index} holds {rows} rows but corpus file {corpus.path} has {len(corpus)} passages (lines): row i "
            f"of the index must be line i of the corpus. Pass the corpus the index was built from ({SEARCH_R1_HINT}) "
            "with RETRIEVER_CORPUS / --corpus, or build an index of this corpus with mr-search-build-index"
        )


def check_dims(encoder_dim: int, index_dim: int, path: Path, model: str) -> None:
    if encoder_dim != index_dim:
        raise ValueError(
            f"encoder {model} makes {encoder_dim}-dim vectors but FAISS index file {path} holds {index_dim}-dim ones: "
            f"the encoder does not match the index. Pass the encoder it was built with ({SEARCH_R1_HINT}) with "
            "RETRIEVER_ENCODER / --encoder"
        )


def self_check_rows(num_docs: int, passages: int) -> np.ndarray:
    """Rows spread over the whole corpus (first, last and between)."""
    return np.unique(np.linspace(0, num_docs - 1, min(passages, num_docs)).round().astype(np.int64))


def self_check(
    encoder: Encoder, index: VectorIndex, corpus: CorpusStore, passages: int, path: Path, model: str, conventions: str
) -> None:
    """Re-encode a few corpus passages as passages and require each at rank 1 of the index (or tied with an identical
    passage): a wrong encoder, other conventions or an index of another corpus fail here, not at the first query."""
    rows = self_check_rows(len(corpus), passages)
    texts = [_contents(corpus, int(r)) for r in rows]
    embeddings = encoder.encode_passages(texts)
    scores, ids = index.search(embeddings, min(5, index.ntotal))
    found = []
    for row, text, row_scores, row_ids in zip(rows.tolist(), texts, scores, ids, strict=True):
        hits = row_ids.tolist()
        top_is_same = hits[0] == row or (hits[0] >= 0 and _contents(corpus, hits[0]) == text)
        tied = row in hits and abs(float(row_scores[hits.index(row)]) - float(row_scores[0])) <= 1e-3 * max(
            1.0, abs(float(row_scores[0]))
        )
        if not (top_is_same or tied):
            found.append(f"line {row + 1}: {f'rank {hits.index(row) + 1}' if row in hits else 'not in the top 5'}")
    # Rank 1 alone misses conventions that move every vector alike (another pooling keeps a passage nearest to
    # itself): where the index gives its vectors back, each must also point the way the re-encoded one does.
    stored = index.reconstruct(rows) if hasattr(index, "reconstruct") else None
    if stored is not None:
        cosines = np.sum(stored * embeddings, axis=1) / np.maximum(
            np.linalg.norm(stored, axis=1) * np.linalg.norm(embeddings, axis=1), 1e-12
        )
        found += [
            f"line {row + 1}: cosine {c:.3f} to its row"
            for row, c in zip(rows.tolist(), cosines.tolist(), strict=True)
            if c < MIN_COSINE
        ]
    if found:
        raise ValueError(
            f"the encoder does not match the index: encoder {model} ({conventions}) re-encoded {len(rows)} passages "
            f"of corpus file {corpus.path} and searched FAISS index file {path}; each must come back at rank 1 with "
            f"cosine >= {MIN_COSINE} to its stored row ({'; '.join(found)}). Pass the encoder the index was built with "
            f"({SEARCH_R1_HINT}) and its conventions (--query-prefix, --passage-prefix, --pooling, "
            "--normalize/--no-normalize), or the corpus it was built from; --self-check-passages 0 skips this check "
            "(approximate indexes may miss a passage)"
        )
    logger.info("self-check: %d re-encoded passages of %s found at rank 1 of %s", len(rows), corpus.path, path)


def _contents(corpus: CorpusStore, row: int) -> str:
    try:
        return str(corpus.get(row)["contents"])
    except (ValueError, KeyError, TypeError) as err:
        raise ValueError(
            f"corpus file {corpus.path}: line {row + 1} is not a JSON object with a 'contents' field ({err}); fix or "
            "remove that line"
        ) from err
