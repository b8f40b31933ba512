"""The embedded default: the world engineer's synthetic mini-wiki, indexed once and cached."""

from __future__ import annotations

import logging
from pathlib import Path

from mr_search_retrieval.build_index import build_bm25_index, build_dense_index, index_is_current
from mr_search_retrieval.config import EncoderConfig, default_cache_dir
from mr_search_retrieval.encoders import bundled_minilm_dir, encoder_identity
from mr_search_retrieval.indexes.metadata import IndexMetadata

logger = logging.getLogger(__name__)


def embedded_corpus() -> Path:
    """Corpus file of the embedded world (generated once under $MR_SEARCH_CACHE/world)."""
    from mr_search_retrieval.embedded.world import ensure_world

    return Path(ensure_world().corpus)


def ensure_index(
    corpus: Path,
    retriever: str = "dense",
    backend: str = "faiss",
    index_type: str = "Flat",
    encoder: EncoderConfig | None = None,
    cache_dir: Path | None = None,
) -> Path:
    """Index directory for `corpus`: built on first use under <cache>/indexes, reused while corpus and encoder match."""
    encoder = encoder or EncoderConfig()
    if retriever == "bm25":
        name = f"{corpus.stem}-bm25"
    else:
        enc = Path(encoder.model_dir).name if encoder.model_dir else "minilm"
        name = f"{corpus.stem}-{enc}-{backend}-{index_type.replace(',', '_')}"
    out = (cache_dir or default_cache_dir()) / "indexes" / name
    if index_is_current(out, corpus) and (retriever == "bm25" or _same_encoder(out, encoder)):
        return out
    logger.info("building the %s index of %s into %s (once; cached)", retriever, corpus, out)
    if retriever == "bm25":
        build_bm25_index(corpus, out)
    else:
        build_dense_index(corpus, out, encoder, backend=backend, index_type=index_type)
    return out


def _same_encoder(index_dir: Path, encoder: EncoderConfig) -> bool:
    model_dir = Path(encoder.model_dir) if encoder.model_dir else bundled_minilm_dir()
    try:
        IndexMetadata.read(index_dir).check_encoder(encoder_identity(model_dir, encoder), index_dir)
    except ValueError:
        return False
    return True
