"""The real retrievers the world's measurements search with: a running service, or the dense or BM25 index in-process.

A ``Search`` takes queries and a top-k and returns the doc ids found for each query, best first.
"""

from __future__ import annotations

import json
import urllib.request
from collections.abc import Callable

Search = Callable[[list[str], int], list[list[str]]]  # queries, topk -> doc ids per query
RETRIEVERS = ("dense", "bm25")


def http_search(url: str, batch: int = 64) -> Search:
    """Searches a running retrieval service's ``/retrieve`` ``url``, ``batch`` queries a request."""

    def search(queries: list[str], topk: int) -> list[list[str]]:
        out: list[list[str]] = []
        for start in range(0, len(queries), batch):
            body = json.dumps({"queries": queries[start : start + batch], "topk": topk, "return_scores": False})
            request = urllib.request.Request(url, body.encode(), {"Content-Type": "application/json"})
            with urllib.request.urlopen(request, timeout=120) as response:
                result = json.loads(response.read())["result"]
            out += [[str(doc["id"]) for doc in docs] for docs in result]
        return out

    return search


def in_process_search(retriever: str = "dense") -> Search:
    """The embedded world's dense index (the one ``retrieval_launch.sh`` serves) or, with ``retriever="bm25"``, its
    BM25 index (bm25s), searched in this process (each built once and cached under the world's cache root)."""
    from mr_search_embedded.prepare import corpus as embedded_corpus
    from mr_search_retrieval.config import EncoderConfig
    from mr_search_retrieval.encoders import HFEncoder
    from mr_search_retrieval.index_cache import ensure_index
    from mr_search_retrieval.indexes.metadata import IndexMetadata
    from mr_search_retrieval.retriever import DenseSearcher, LexicalSearcher, Searcher, load_vector_index

    if retriever not in RETRIEVERS:
        raise ValueError(f"in_process_search: retriever {retriever!r} is not one of {', '.join(RETRIEVERS)}")
    index_dir = ensure_index(embedded_corpus(), retriever=retriever)
    meta = IndexMetadata.read(index_dir)
    searcher: Searcher
    if retriever == "bm25":
        from mr_search_retrieval.indexes.bm25 import BM25sIndex

        searcher = LexicalSearcher(BM25sIndex.load(index_dir, meta.extra.get("stemmer")))
    else:
        searcher = DenseSearcher(HFEncoder(EncoderConfig()), load_vector_index(meta, index_dir, "cpu"))

    def search(queries: list[str], topk: int) -> list[list[str]]:
        out: list[list[str]] = []
        for start in range(0, len(queries), 64):
            _, ids = searcher.search(queries[start : start + 64], topk)
            out += [[str(int(i)) for i in row if int(i) >= 0] for row in ids]
        return out

    return search
