"""An index of a corpus file, built once under the cache folder and reused while the corpus and encoder match."""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import logging
import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

from mr_search_retrieval.build_index import build_bm25_index, build_dense_index, index_is_current
from mr_search_retrieval.config import EncoderConfig, default_cache_dir
from mr_search_retrieval.encoders import bundled_minilm_dir, encoder_identity
from mr_search_retrieval.indexes.metadata import IndexMetadata

logger = logging.getLogger(__name__)


def index_name(corpus: Path, retriever: str, backend: str, index_type: str, encoder: EncoderConfig) -> str:
    """The cache folder's name: the corpus file's stem and a hash of its full path (two corpora named alike, e.g.
    two worlds' ``corpus.jsonl``, never share a folder), then what decides the index's contents."""
    where = hashlib.sha1(str(Path(corpus).resolve()).encode()).hexdigest()[:8]
    if retriever == "bm25":
        return f"{corpus.stem}-{where}-bm25"
    enc = Path(encoder.model_dir).name if encoder.model_dir else "minilm"
    return f"{corpus.stem}-{where}-{enc}-{backend}-{index_type.replace(',', '_')}"


@contextlib.contextmanager
def _build_lock(path: Path) -> Iterator[None]:
    """An exclusive lock on ``path`` (a sibling of the index folder), held while one process builds; others wait."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a+") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def ensure_index(
    corpus: Path,
    retriever: str = "dense",
    backend: str = "faiss",
    index_type: str = "Flat",
    encoder: EncoderConfig | None = None,
    cache_dir: Path | None = None,
) -> Path:
    """Index folder for ``corpus`` under ``<cache>/indexes``: built on first use, reused while corpus and encoder match.

    Safe for several launchers on one cold cache (one host, or a filesystem shared by several): one builds while
    holding ``<folder>.lock``, into a temporary folder beside the final one that is renamed into place when complete;
    the others wait on the lock and then serve the published folder. A reader never sees a half-built index.
    """
    corpus = Path(corpus)
    if not corpus.is_file():
        raise FileNotFoundError(f"corpus file {corpus} does not exist; pass a JSON-lines file of {{'id', 'contents'}}")
    encoder = encoder or EncoderConfig()
    out = (cache_dir or default_cache_dir()) / "indexes" / index_name(corpus, retriever, backend, index_type, encoder)
    if _is_current(out, corpus, retriever, encoder):
        return out
    with _build_lock(out.with_name(out.name + ".lock")):
        if _is_current(out, corpus, retriever, encoder):  # another process built it while this one waited
            return out
        logger.info("building the %s index of %s into %s (once; cached)", retriever, corpus, out)
        staging = Path(tempfile.mkdtemp(prefix=f".{out.name}.", dir=out.parent))
        try:
            if retriever == "bm25":
                build_bm25_index(corpus, staging)
            else:
                build_dense_index(corpus, staging, encoder, backend=backend, index_type=index_type)
            _publish(staging, out)
        finally:
            shutil.rmtree(staging, ignore_errors=True)
    return out


def _publish(staging: Path, out: Path) -> None:
    """Moves a complete build into place: a stale folder is renamed aside first, so ``out`` is always whole."""
    if out.exists():
        stale = out.with_name(f".{out.name}.stale-{os.getpid()}")
        out.rename(stale)
        shutil.rmtree(stale, ignore_errors=True)
    staging.rename(out)


def _is_current(out: Path, corpus: Path, retriever: str, encoder: EncoderConfig) -> bool:
    return index_is_current(out, corpus) and (retriever == "bm25" or _same_encoder(out, encoder))


def _same_encoder(index_dir: Path, encoder: EncoderConfig) -> bool:
    model_dir = Path(encoder.model_dir) if encoder.model_dir else bundled_minilm_dir()
    try:
        IndexMetadata.read(index_dir).check_encoder(encoder_identity(model_dir, encoder), index_dir)
    except ValueError:
        return False
    return True
