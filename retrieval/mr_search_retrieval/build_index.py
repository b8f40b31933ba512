"""`mr-search-build-index`: encode a corpus and build a dense (FAISS / torch exact) or BM25 index + metadata."""

from __future__ import annotations

import argparse
import logging
import shutil
from collections.abc import Callable
from pathlib import Path

import numpy as np
from tqdm import tqdm

from mr_search_retrieval.config import POOLINGS, EncoderConfig
from mr_search_retrieval.conventions import Conventions
from mr_search_retrieval.corpus import CorpusStore
from mr_search_retrieval.encoders import Encoder, HFEncoder
from mr_search_retrieval.indexes.metadata import METADATA_FILE, IndexMetadata

logger = logging.getLogger(__name__)

EMBEDDINGS_FILE = "embeddings.npy"
DENSE_BACKENDS = ("faiss", "torch")
# Passages are length-sorted within a window of this many batches: far less padding per batch.
_SORT_WINDOW_BATCHES = 16


def corpus_fingerprint(corpus: Path) -> dict[str, int | str]:
    st = corpus.stat()
    return {"path": str(corpus.resolve()), "bytes": int(st.st_size), "mtime_ns": int(st.st_mtime_ns)}


def encode_corpus(
    store: CorpusStore, encoder: Encoder, out: Path, batch_size: int = 256, dtype: str = "float32"
) -> np.ndarray:
    """Encode every passage's `contents` into an (n, dim) .npy memmap at `out`."""
    n = len(store)
    emb = np.lib.format.open_memmap(out, mode="w+", dtype=np.dtype(dtype), shape=(n, encoder.dim))
    window = batch_size * _SORT_WINDOW_BATCHES
    with tqdm(total=n, desc="encoding passages", unit="passage") as bar:
        for start in range(0, n, window):
            texts = [store.get(i)["contents"] for i in range(start, min(n, start + window))]
            order = np.argsort([len(t) for t in texts], kind="stable")
            for b in range(0, len(order), batch_size):
                rows = order[b : b + batch_size]
                emb[start + rows] = encoder.encode_passages([texts[i] for i in rows]).astype(dtype, copy=False)
                bar.update(len(rows))
    emb.flush()
    return emb


def build_dense_index(
    corpus: Path,
    out_dir: Path,
    encoder_config: EncoderConfig,
    backend: str = "faiss",
    index_type: str = "Flat",
    batch_size: int = 256,
    encoder_factory: Callable[[EncoderConfig], Encoder] = HFEncoder,
) -> IndexMetadata:
    if backend not in DENSE_BACKENDS:
        raise ValueError(f"dense backend {backend!r} is not valid; choose one of {', '.join(DENSE_BACKENDS)}")
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / METADATA_FILE).unlink(missing_ok=True)  # metadata is written last: it marks a complete build
    store = CorpusStore(corpus)
    encoder = encoder_factory(encoder_config)
    # torch keeps fp16 on disk (half the size; the GPU serves fp16 anyway); FAISS wants float32.
    dtype = "float16" if backend == "torch" else "float32"
    emb = encode_corpus(store, encoder, out_dir / EMBEDDINGS_FILE, batch_size, dtype)
    if backend == "faiss":
        from mr_search_retrieval.indexes.faiss_index import FaissIndex, build_faiss_index

        logger.info("building FAISS %s over %d vectors", index_type, len(store))
        FaissIndex(build_faiss_index(emb, index_type), device="cpu").save(out_dir)
        del emb
        (out_dir / EMBEDDINGS_FILE).unlink()
    else:
        index_type = "exact"
    meta = IndexMetadata(
        backend=backend,
        num_docs=len(store),
        corpus=str(corpus),
        index_type=index_type,
        dim=encoder.dim,
        encoder=encoder.identity(),
        extra={"corpus_fingerprint": corpus_fingerprint(corpus)},
    )
    store.close()
    meta.write(out_dir)
    return meta


def build_bm25_index(corpus: Path, out_dir: Path) -> IndexMetadata:
    from mr_search_retrieval.indexes.bm25 import BM25S_DIR, BM25sIndex

    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / METADATA_FILE).unlink(missing_ok=True)
    shutil.rmtree(out_dir / BM25S_DIR, ignore_errors=True)
    store = CorpusStore(corpus)
    index = BM25sIndex.build(d["contents"] for d in tqdm(store.iter_docs(), total=len(store), desc="reading corpus"))
    index.save(out_dir)
    meta = IndexMetadata(
        backend="bm25s",
        num_docs=len(store),
        corpus=str(corpus),
        index_type="bm25",
        extra={"stemmer": index.stemmer_name, "corpus_fingerprint": corpus_fingerprint(corpus)},
    )
    store.close()
    meta.write(out_dir)
    return meta


def register_lucene_index(corpus: Path, out_dir: Path, lucene_dir: Path) -> IndexMetadata:
    """Serve an existing pyserini/Lucene BM25 index (e.g. Search-R1's wiki-18 one): metadata only, nothing built."""
    if not lucene_dir.is_dir():
        raise FileNotFoundError(f"Lucene index directory {lucene_dir} does not exist")
    out_dir.mkdir(parents=True, exist_ok=True)
    store = CorpusStore(corpus)
    meta = IndexMetadata(
        backend="pyserini",
        num_docs=len(store),
        corpus=str(corpus),
        index_type="bm25",
        extra={"lucene_dir": str(lucene_dir.resolve()), "corpus_fingerprint": corpus_fingerprint(corpus)},
    )
    store.close()
    meta.write(out_dir)
    return meta


def index_is_current(out_dir: Path, corpus: Path) -> bool:
    """True when `out_dir` holds a complete build of exactly this corpus file (for cached default builds)."""
    try:
        meta = IndexMetadata.read(out_dir)
    except (FileNotFoundError, ValueError):
        return False
    return meta.extra.get("corpus_fingerprint") == corpus_fingerprint(corpus)


def add_encoder_args(parser: argparse.ArgumentParser) -> None:
    d = EncoderConfig()
    g = parser.add_argument_group("encoder (dense)")
    g.add_argument("--encoder", default=None, help="Hugging Face encoder directory (default: bundled all-MiniLM-L6-v2)")
    # Conventions left unset come from the index's metadata.json when serving one, are inferred from the encoder
    # folder for an index without metadata (conventions.py), and are e5's when building.
    g.add_argument("--query-prefix", default=None, help=f"prepended to queries (default {d.query_prefix!r}, e5's)")
    g.add_argument("--passage-prefix", default=None, help=f"prepended to passages (default {d.passage_prefix!r})")
    g.add_argument("--pooling", default=None, choices=POOLINGS, help=f"default {d.pooling}")
    g.add_argument(
        "--normalize", action=argparse.BooleanOptionalAction, default=None, help="L2-normalise embeddings (default)"
    )
    g.add_argument("--max-length", type=int, default=d.max_length, help="tokens per text")
    g.add_argument("--device", default=d.device, help="encoder device: auto, cpu, cuda, cuda:N")
    g.add_argument("--no-fp16", action="store_true", help="run the encoder in float32 on GPU too")
    g.add_argument(
        "--no-cpu-bf16", action="store_true", help="float32 on CPU even where it has native bf16 (AVX512-BF16, AMX)"
    )
    g.add_argument(
        "--no-cpu-packed",
        action="store_true",
        help="CPU: pad each sub-batch of texts to its longest instead of running them as one token sequence",
    )
    g.add_argument(
        "--no-cuda-graphs",
        action="store_true",
        help="serving on CUDA: run the query encoder eagerly instead of replaying CUDA graphs captured at startup",
    )


def flag_conventions(args: argparse.Namespace) -> Conventions:
    """The encoder conventions given on the command line (None where a flag was not given)."""
    return Conventions(args.query_prefix, args.passage_prefix, args.pooling, args.normalize)


def encoder_config_from_args(args: argparse.Namespace, known: Conventions | None = None) -> EncoderConfig:
    """Flags first, then `known` (an index's metadata, or what its encoder folder says), then e5's conventions."""
    d = EncoderConfig()
    c = (
        flag_conventions(args)
        .over(known or Conventions())
        .over(Conventions(d.query_prefix, d.passage_prefix, d.pooling, d.normalize))
    )
    return EncoderConfig(
        model_dir=args.encoder,
        query_prefix=c.query_prefix,
        passage_prefix=c.passage_prefix,
        pooling=c.pooling,
        normalize=c.normalize,
        max_length=args.max_length,
        device=args.device,
        fp16=not args.no_fp16,
        cpu_bf16=not args.no_cpu_bf16,
        cpu_packed=not args.no_cpu_packed,
        cuda_graphs=not args.no_cuda_graphs,
    )


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(prog="mr-search-build-index", description=__doc__)
    p.add_argument("--corpus", required=True, type=Path, help="JSON lines {'id', 'contents'}")
    p.add_argument("--out", required=True, type=Path, help="index directory to write (metadata.json + index files)")
    p.add_argument("--retriever", default="dense", choices=("dense", "bm25"))
    p.add_argument("--backend", default="faiss", choices=DENSE_BACKENDS, help="dense: FAISS or exact torch search")
    p.add_argument("--index-type", default="Flat", help="FAISS index_factory string: Flat, HNSW32, IVF1024,PQ64, SQ8")
    p.add_argument("--batch-size", type=int, default=256, help="passages per encoder batch")
    p.add_argument("--lucene-index", type=Path, default=None, help="bm25: serve this pyserini Lucene index instead")
    add_encoder_args(p)
    args = p.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    if args.retriever == "bm25" and args.lucene_index is not None:
        meta = register_lucene_index(args.corpus, args.out, args.lucene_index)
    elif args.retriever == "bm25":
        meta = build_bm25_index(args.corpus, args.out)
    else:
        meta = build_dense_index(
            args.corpus, args.out, encoder_config_from_args(args), args.backend, args.index_type, args.batch_size
        )
    logger.info("built %s index (%s) of %d passages in %s", meta.retriever, meta.backend, meta.num_docs, args.out)


if __name__ == "__main__":
    main()
