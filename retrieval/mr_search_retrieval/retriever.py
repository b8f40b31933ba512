"""Searchers: queries in, (scores, row ids) out; and loading one from an index directory with its checks."""

from __future__ import annotations

import contextlib
import logging
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Protocol

import numpy as np

from mr_search_retrieval.config import EncoderConfig, ServerConfig
from mr_search_retrieval.corpus import CorpusStore
from mr_search_retrieval.encoders import Encoder
from mr_search_retrieval.graph_encoder import make_encoder
from mr_search_retrieval.indexes import TextIndex, VectorIndex
from mr_search_retrieval.indexes.metadata import IndexMetadata

logger = logging.getLogger(__name__)


class Searcher(Protocol):
    num_docs: int

    def search(self, queries: list[str], k: int) -> tuple[np.ndarray, np.ndarray]:
        """Scores float32 (n, k') and row ids int64 (n, k'), best first, k' = min(k, num_docs); id -1 = no hit."""
        ...


class DenseSearcher:
    """One encode and one index search for a whole batch of queries."""

    def __init__(self, encoder: Encoder, index: VectorIndex) -> None:
        if encoder.dim != index.dim:
            raise ValueError(f"encoder dimension {encoder.dim} does not match index dimension {index.dim}")
        self.encoder = encoder
        self.index = index
        self.num_docs = int(index.ntotal)
        # Encoders that may be entered by several threads at once (HFEncoder on CPU: `thread_safe`) run concurrently
        # (the server's batch lanes); others are serialized.
        self._encode_lock = contextlib.nullcontext() if getattr(encoder, "thread_safe", False) else threading.Lock()

    def search(self, queries: list[str], k: int) -> tuple[np.ndarray, np.ndarray]:
        # Safe to call from several threads (the search worker overlaps batches, the server's lanes run at once):
        # encoders that are not thread-safe (a GPU encoder) are serialized here, and one batch's search overlaps the
        # next's encoding; HFEncoder guards its tokenizer itself.
        with self._encode_lock:
            embeddings = self.encoder.encode_queries(queries)
        return self.index.search(embeddings, k)

    def search_tokens(self, batch: dict[str, np.ndarray], k: int) -> tuple[np.ndarray, np.ndarray]:
        """`search` for queries tokenized already (the HTTP fronts do it, token_rows.py): needs an encoder with
        `embed_tokens` (graph_encoder.BucketedEncoder) and an index with `search_tensor` (TorchExactIndex); the
        embeddings stay on the GPU between the two, and the results come back with one synchronisation."""
        with self._encode_lock:
            embeddings = self.encoder.embed_tokens(batch)  # type: ignore[attr-defined]
        scores, ids = self.index.search_tensor(embeddings, k)  # type: ignore[attr-defined]
        return scores.cpu().numpy(), ids.cpu().numpy()


class LexicalSearcher:
    def __init__(self, index: TextIndex) -> None:
        self.index = index
        self.num_docs = int(index.ntotal)

    def search(self, queries: list[str], k: int) -> tuple[np.ndarray, np.ndarray]:
        return self.index.search_text(queries, k)


def load_vector_index(meta: IndexMetadata, index_dir: Path, device: str, search_params: str | None = None):
    if meta.backend == "torch":
        from mr_search_retrieval.indexes.torch_exact import TorchExactIndex

        return TorchExactIndex.from_file(index_dir / "embeddings.npy", device=device)
    from mr_search_retrieval.indexes.faiss_index import DEFAULT_SEARCH_PARAMS, FaissIndex

    return FaissIndex.load(index_dir, device=device, search_params=search_params or DEFAULT_SEARCH_PARAMS)


def load_searcher(
    config: ServerConfig,
    corpus: CorpusStore,
    encoder_factory: Callable[[EncoderConfig], Encoder] = make_encoder,
) -> Searcher:
    """Load the configured index; fail with a message naming the file when it does not fit corpus or encoder."""
    index_dir = Path(config.index_dir)
    meta = IndexMetadata.read(index_dir)
    if meta.retriever != config.retriever:
        raise ValueError(
            f"index metadata {index_dir / 'metadata.json'} describes a {meta.retriever} index "
            f"(backend {meta.backend}) but the server was asked for retriever={config.retriever!r}"
        )
    meta.check_corpus_size(len(corpus), config.corpus, index_dir)
    if meta.backend == "bm25s":
        from mr_search_retrieval.indexes.bm25 import BM25sIndex

        searcher: Searcher = LexicalSearcher(BM25sIndex.load(index_dir, meta.extra.get("stemmer")))
    elif meta.backend == "pyserini":
        from mr_search_retrieval.indexes.bm25 import PyseriniIndex

        searcher = LexicalSearcher(PyseriniIndex(meta.extra["lucene_dir"], meta.num_docs))
    else:
        encoder = encoder_factory(config.encoder)
        if config.check_encoder:
            meta.check_encoder(encoder.identity(), index_dir)
        searcher = DenseSearcher(encoder, load_vector_index(meta, index_dir, config.index_device, config.search_params))
    if searcher.num_docs != meta.num_docs:
        raise ValueError(
            f"index files in {index_dir} hold {searcher.num_docs} vectors but metadata.json says {meta.num_docs}; "
            "the build was interrupted or files were mixed: rebuild the index"
        )
    return searcher
