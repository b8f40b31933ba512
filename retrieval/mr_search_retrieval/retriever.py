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
    if config.index_format == "faiss-file":
        return load_bare_faiss(config, corpus, encoder_factory)
    if config.index_format == "lucene":
        return load_lucene(config, corpus)
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


def describe_conventions(config: EncoderConfig) -> str:
    norm = "L2-normalised" if config.normalize else "not normalised"
    return (
        f"query prefix {config.query_prefix!r}, passage prefix {config.passage_prefix!r}, {config.pooling} pooling, "
        f"{norm}"
    )


def load_bare_faiss(
    config: ServerConfig, corpus: CorpusStore, encoder_factory: Callable[[EncoderConfig], Encoder] = make_encoder
) -> DenseSearcher:
    """A FAISS index file without metadata (Search-R1's e5_Flat.index): its rows are checked against the corpus (from
    the file's header, before the index loads), its width against the encoder, then a self-check re-encodes a few
    corpus passages and requires each at rank 1."""
    from mr_search_retrieval.indexes import bare
    from mr_search_retrieval.indexes.faiss_index import DEFAULT_SEARCH_PARAMS, FaissIndex

    path = Path(config.index_dir)
    shape = bare.faiss_file_shape(path)
    if shape is not None:
        bare.check_rows(shape[1], path, corpus, bare.WHAT["faiss-file"])
    encoder = encoder_factory(config.encoder)
    model = str(getattr(encoder, "model_dir", config.encoder.model_dir))
    if shape is not None:
        bare.check_dims(encoder.dim, shape[0], path, model)
    index = FaissIndex.load_file(path, config.index_device, config.search_params or DEFAULT_SEARCH_PARAMS)
    bare.check_rows(index.ntotal, path, corpus, bare.WHAT["faiss-file"])
    bare.check_dims(encoder.dim, index.dim, path, model)
    if config.self_check_passages:
        bare.self_check(
            encoder, index, corpus, config.self_check_passages, path, model, describe_conventions(config.encoder)
        )
    return DenseSearcher(encoder, index)


def load_lucene(config: ServerConfig, corpus: CorpusStore) -> LexicalSearcher:
    """A pyserini/Lucene BM25 index directory without metadata: document count and docids checked against the corpus."""
    from mr_search_retrieval.indexes import bare
    from mr_search_retrieval.indexes.bm25 import PyseriniIndex

    path = Path(config.index_dir)
    index = PyseriniIndex(path)
    bare.check_rows(index.ntotal, path, corpus, bare.WHAT["lucene"])
    if config.self_check_passages:
        index.check_docids(corpus, bare.self_check_rows(len(corpus), config.self_check_passages).tolist())
    return LexicalSearcher(index)
