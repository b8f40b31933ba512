"""metadata.json of an index directory: what was built, from which corpus, with which encoder."""

from __future__ import annotations

import json
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

METADATA_FILE = "metadata.json"
FORMAT_VERSION = 1
BACKENDS = ("faiss", "torch", "bm25s", "pyserini")
# Conventions that change the vectors: an index built with other values is useless to this encoder.
_ENCODER_KEYS = ("fingerprint", "pooling", "normalize", "passage_prefix")


@dataclass(frozen=True)
class IndexMetadata:
    backend: str
    num_docs: int
    corpus: str
    index_type: str = ""  # FAISS index_factory string, "exact" for torch, "bm25" for lexical
    dim: int = 0
    encoder: dict[str, Any] = field(default_factory=dict)
    extra: dict[str, Any] = field(default_factory=dict)
    format_version: int = FORMAT_VERSION
    created_at: str = ""

    def __post_init__(self) -> None:
        if self.backend not in BACKENDS:
            raise ValueError(f"index backend {self.backend!r} is not valid; choose one of {', '.join(BACKENDS)}")

    @property
    def retriever(self) -> str:
        return "bm25" if self.backend in ("bm25s", "pyserini") else "dense"

    def write(self, index_dir: Path) -> Path:
        path = Path(index_dir) / METADATA_FILE
        data = asdict(self)
        data["created_at"] = data["created_at"] or time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        path.write_text(json.dumps(data, indent=2, sort_keys=True) + "\n")
        return path

    @classmethod
    def read(cls, index_dir: Path) -> IndexMetadata:
        path = Path(index_dir) / METADATA_FILE
        if not path.is_file():
            raise FileNotFoundError(
                f"index metadata {path} does not exist; build the index with mr-search-build-index "
                f"(or point --index-dir at a directory it built)"
            )
        try:
            data = json.loads(path.read_text())
            return cls(**data)
        except (json.JSONDecodeError, TypeError, ValueError) as err:
            raise ValueError(f"index metadata {path} is malformed ({err}); rebuild the index") from err

    def check_encoder(self, identity: dict[str, Any], index_dir: Path) -> None:
        """Raise when the index was built with another encoder or other encoding conventions."""
        diffs = [k for k in _ENCODER_KEYS if self.encoder.get(k) != identity.get(k)]
        if diffs:
            path = Path(index_dir) / METADATA_FILE
            built = {k: self.encoder.get(k) for k in ("name", *_ENCODER_KEYS)}
            now = {k: identity.get(k) for k in ("name", *_ENCODER_KEYS)}
            raise ValueError(
                f"index metadata {path} says the index was built with encoder {built}, but the server is "
                f"configured with {now} (differs in {', '.join(diffs)}); pass the encoder the index was built "
                f"with, or rebuild the index with mr-search-build-index"
            )

    def check_corpus_size(self, corpus_size: int, corpus_path: str, index_dir: Path) -> None:
        if corpus_size != self.num_docs:
            raise ValueError(
                f"index in {index_dir} holds {self.num_docs} passages but corpus file {corpus_path} has "
                f"{corpus_size} lines; serve the corpus the index was built from ({self.corpus}) or rebuild the index"
            )
