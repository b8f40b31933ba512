"""BM25: bm25s (pure Python/numpy, no Java) by default; pyserini's Lucene searcher when installed."""

from __future__ import annotations

import logging
from collections.abc import Iterable
from pathlib import Path

import numpy as np

logger = logging.getLogger(__name__)

BM25S_DIR = "bm25s"


def _stemmer():
    try:
        import Stemmer  # PyStemmer: optional, improves recall
    except ImportError:
        return None
    return Stemmer.Stemmer("english")


class BM25sIndex:
    """bm25s index over corpus `contents` (title + text); row i is corpus line i."""

    def __init__(self, retriever, stemmer_name: str | None) -> None:
        self.retriever = retriever
        self.stemmer_name = stemmer_name
        self._stemmer = _stemmer() if stemmer_name else None
        if stemmer_name and self._stemmer is None:
            raise ImportError("this BM25 index was built with a PyStemmer stemmer: pip install PyStemmer")
        self.ntotal = int(retriever.scores["num_docs"])

    @classmethod
    def build(cls, texts: Iterable[str]) -> BM25sIndex:
        import bm25s

        stemmer = _stemmer()
        tokens = bm25s.tokenize(list(texts), stopwords="en", stemmer=stemmer, show_progress=True)
        retriever = bm25s.BM25()
        retriever.index(tokens, show_progress=True)
        return cls(retriever, "english" if stemmer is not None else None)

    def save(self, index_dir: Path) -> Path:
        path = Path(index_dir) / BM25S_DIR
        self.retriever.save(str(path), show_progress=False)
        return path

    @classmethod
    def load(cls, index_dir: Path, stemmer_name: str | None) -> BM25sIndex:
        import bm25s

        path = Path(index_dir) / BM25S_DIR
        if not path.is_dir():
            raise FileNotFoundError(f"BM25 index directory {path} does not exist; build it with mr-search-build-index")
        return cls(bm25s.BM25.load(str(path), mmap=True, show_progress=False), stemmer_name)

    def search_text(self, queries: list[str], k: int) -> tuple[np.ndarray, np.ndarray]:
        import bm25s

        k = min(int(k), self.ntotal)
        tokens = bm25s.tokenize(queries, stopwords="en", stemmer=self._stemmer, return_ids=False, show_progress=False)
        ids, scores = self.retriever.retrieve(tokens, k=k, show_progress=False)
        return np.asarray(scores, dtype=np.float32), np.asarray(ids, dtype=np.int64)


class PyseriniIndex:
    """Lucene BM25 through pyserini (needs Java). Lucene docids must be the corpus row numbers, as in wiki-18."""

    def __init__(self, lucene_dir: str | Path, num_docs: int | None = None) -> None:
        try:
            from pyserini.search.lucene import LuceneSearcher
        except ImportError as err:
            raise ImportError("backend 'pyserini' needs pyserini and Java: pip install pyserini") from err
        self.searcher = LuceneSearcher(str(lucene_dir))
        self.lucene_dir = Path(lucene_dir)
        self.ntotal = int(num_docs if num_docs is not None else self.searcher.num_docs)

    def check_docids(self, corpus, rows: Iterable[int]) -> None:
        """Lucene docid i must be corpus line i (rows a search returns are read from the corpus by number)."""
        for row in rows:
            doc = self.searcher.doc(str(row))
            raw = doc.raw() if doc is not None else None
            want = corpus.get(int(row))
            if doc is None or (raw and str(want.get("contents", "")) not in raw and str(want.get("id")) not in raw):
                raise ValueError(
                    f"Lucene index {self.lucene_dir} does not match corpus file {corpus.path}: its document {row} "
                    f"is {'missing' if doc is None else 'another passage'} but must be line {row + 1} of the corpus. "
                    "Pass the corpus the index was built from (RETRIEVER_CORPUS / --corpus)"
                )

    def search_text(self, queries: list[str], k: int) -> tuple[np.ndarray, np.ndarray]:
        k = min(int(k), self.ntotal)
        hits = self.searcher.batch_search(queries, [str(i) for i in range(len(queries))], k=k, threads=2)
        scores = np.full((len(queries), k), -np.inf, dtype=np.float32)
        ids = np.full((len(queries), k), -1, dtype=np.int64)
        for qi in range(len(queries)):
            for j, hit in enumerate(hits[str(qi)][:k]):
                scores[qi, j], ids[qi, j] = hit.score, int(hit.docid)
        return scores, ids
