"""Indexes return the true nearest rows: torch exact (chunked, sharded) and FAISS types vs brute force; BM25."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

from mr_search_retrieval.build_index import build_bm25_index, build_dense_index, register_lucene_index
from mr_search_retrieval.config import EncoderConfig, ServerConfig
from mr_search_retrieval.corpus import CorpusStore
from mr_search_retrieval.indexes.faiss_index import FaissIndex, build_faiss_index
from mr_search_retrieval.indexes.metadata import IndexMetadata
from mr_search_retrieval.indexes.torch_exact import TorchExactIndex
from mr_search_retrieval.retriever import load_searcher


def _brute_force(matrix: np.ndarray, queries: np.ndarray, k: int) -> np.ndarray:
    return np.argsort(-(queries @ matrix.T), axis=1, kind="stable")[:, :k]


def _unit_rows(rng: np.random.Generator, n: int, dim: int) -> np.ndarray:
    x = rng.standard_normal((n, dim)).astype(np.float32)
    return x / np.linalg.norm(x, axis=1, keepdims=True)


@pytest.mark.parametrize("chunk_rows", [7, 64, 10_000])
def test_torch_exact_chunked_and_sharded_matches_brute_force(chunk_rows: int) -> None:
    rng = np.random.default_rng(0)
    matrix, queries = _unit_rows(rng, 1000, 32), _unit_rows(rng, 20, 32)
    # Two shards on the CPU stand in for two GPUs: the cross-shard merge is what is under test.
    shards = [torch.from_numpy(matrix[:400]), torch.from_numpy(matrix[400:])]
    scores, ids = TorchExactIndex(shards, chunk_rows=chunk_rows).search(queries, 5)
    np.testing.assert_array_equal(ids, _brute_force(matrix, queries, 5))
    np.testing.assert_allclose(scores, np.take_along_axis(queries @ matrix.T, ids, 1), rtol=1e-5)
    assert (np.diff(scores, axis=1) <= 0).all(), "best first"


@pytest.mark.parametrize(("chunk_rows", "group"), [(96, 8), (96, 1), (1000, 4), (64, 64)])
def test_torch_exact_grouped_topk_matches_brute_force_including_ties(chunk_rows: int, group: int) -> None:
    rng = np.random.default_rng(1)
    base = _unit_rows(rng, 150, 16)
    # Every row appears twice (ties between groups and inside one), plus a ragged tail chunk.
    matrix = np.concatenate([base, base[::-1], base[:37]])
    queries = _unit_rows(rng, 25, 16)
    shards = [torch.from_numpy(matrix[:192]), torch.from_numpy(matrix[192:])]
    index = TorchExactIndex(shards, chunk_rows=chunk_rows, group=group)
    scores, ids = index.search(queries, 7)
    full = queries @ matrix.T
    expected = np.take_along_axis(full, _brute_force(matrix, queries, 7), 1)
    np.testing.assert_allclose(scores, expected, rtol=1e-5, atol=1e-6)  # the k best scores, best first
    np.testing.assert_allclose(np.take_along_axis(full, ids, 1), scores, rtol=1e-5, atol=1e-6)  # ids carry them
    assert all(len(set(row)) == 7 for row in ids.tolist()), "no row returned twice"
    with pytest.raises(ValueError, match="group must be >= 1"):
        TorchExactIndex(shards, group=0)


def test_torch_exact_from_random_and_from_file(tmp_path: Path) -> None:
    index = TorchExactIndex.from_random(3000, 16, device="cpu", seed=1)
    assert (index.ntotal, index.dim) == (3000, 16)
    assert index.shards[0].dtype == torch.float32  # CPU keeps float32
    q = index.shards[0][:3].numpy()
    _, ids = index.search(q, 1)
    assert ids[:, 0].tolist() == [0, 1, 2]  # a unit row is its own nearest neighbour
    np.save(tmp_path / "e.npy", np.asarray(index.shards[0].numpy(), dtype=np.float16))
    _, ids2 = TorchExactIndex.from_file(tmp_path / "e.npy", device="cpu").search(q, 1)
    assert ids2[:, 0].tolist() == [0, 1, 2]
    with pytest.raises(ValueError, match=r"shape \(n, 16\)"):
        index.search(np.zeros((2, 8), np.float32), 1)


def test_k_larger_than_the_index_returns_every_row() -> None:
    index = TorchExactIndex.from_random(4, 8, device="cpu")
    assert index.search(np.ones((1, 8), np.float32), 10)[1].shape == (1, 4)


@pytest.mark.parametrize(("factory", "min_recall"), [("Flat", 1.0), ("HNSW16", 0.9), ("SQ8", 0.9), ("IVF4,PQ4x4", 0.3)])
def test_faiss_index_types_find_the_nearest_rows(factory: str, min_recall: float) -> None:
    rng = np.random.default_rng(0)
    matrix, queries = _unit_rows(rng, 1000, 16), _unit_rows(rng, 50, 16)
    index = FaissIndex(build_faiss_index(matrix, factory), device="cpu")
    _, ids = index.search(queries, 10)
    truth = _brute_force(matrix, queries, 10)
    recall = np.mean([len(set(a) & set(b)) / 10 for a, b in zip(ids, truth, strict=True)])
    assert recall >= min_recall, f"{factory}: recall@10 {recall:.2f}"


def test_bad_factory_string_is_a_clear_error() -> None:
    with pytest.raises(ValueError, match="index_factory string 'Nonsense42'"):
        build_faiss_index(np.zeros((10, 8), np.float32), "Nonsense42")


def test_bm25_build_load_and_search(small_corpus: Path, tmp_path: Path) -> None:
    build_bm25_index(small_corpus, tmp_path / "bm25")
    store = CorpusStore(small_corpus)
    searcher = load_searcher(
        ServerConfig(index_dir=str(tmp_path / "bm25"), corpus=str(small_corpus), retriever="bm25"), store
    )
    scores, ids = searcher.search(["passage number 17", "the of and"], 3)
    assert ids[0, 0] == 17
    assert ids.shape == (2, 3) and scores.dtype == np.float32


def test_dense_build_and_startup_checks_name_the_file(small_corpus: Path, tmp_path: Path, hash_encoder) -> None:
    out = tmp_path / "dense"
    meta = build_dense_index(
        small_corpus, out, EncoderConfig(), backend="torch", encoder_factory=lambda c: hash_encoder
    )
    assert (meta.num_docs, meta.dim, meta.index_type) == (40, 64, "exact")
    cfg = ServerConfig(index_dir=str(out), corpus=str(small_corpus))
    store = CorpusStore(small_corpus)
    searcher = load_searcher(cfg, store, encoder_factory=lambda c: hash_encoder)
    assert searcher.search([store.get(30)["contents"]], 1)[1][0, 0] == 30

    other = type(hash_encoder)(dim=64)
    other.identity = lambda: {**hash_encoder.identity(), "fingerprint": "another-model"}
    with pytest.raises(ValueError, match=r"metadata.json says the index was built with encoder .* fingerprint"):
        load_searcher(cfg, CorpusStore(small_corpus), encoder_factory=lambda c: other)

    shorter = tmp_path / "short.jsonl"
    shorter.write_text("".join(small_corpus.read_text().splitlines(keepends=True)[:30]))
    with pytest.raises(ValueError, match=r"holds 40 passages but corpus file .*short.jsonl has 30 lines"):
        load_searcher(ServerConfig(index_dir=str(out), corpus=str(shorter)), CorpusStore(shorter))

    with pytest.raises(ValueError, match="describes a dense index"):
        load_searcher(
            ServerConfig(index_dir=str(out), corpus=str(small_corpus), retriever="bm25"), CorpusStore(small_corpus)
        )
    with pytest.raises(FileNotFoundError, match=r"nowhere/metadata.json does not exist"):
        IndexMetadata.read(tmp_path / "nowhere")


def test_torch_exact_index_imports_without_the_server_stack() -> None:
    """The GPU benchmark uses it alone: no FastAPI, uvicorn, faiss or transformers needed."""
    code = (
        "import sys\n"
        "for name in ('fastapi', 'uvicorn', 'faiss', 'transformers', 'bm25s', 'pydantic'):\n"
        "    sys.modules[name] = None\n"
        "from mr_search_retrieval.indexes.torch_exact import TorchExactIndex\n"
        "index = TorchExactIndex.from_random(1000, 8, device='cpu', dtype=None, chunk_rows=300)\n"
        "print(index.search(index.shards[0][:2].numpy(), 1)[1].ravel().tolist())\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[0, 1]"


def test_a_lucene_index_is_served_through_pyserini_or_says_what_to_install(small_corpus: Path, tmp_path: Path) -> None:
    (tmp_path / "lucene").mkdir()
    meta = register_lucene_index(small_corpus, tmp_path / "idx", tmp_path / "lucene")
    assert (meta.backend, meta.retriever, meta.num_docs) == ("pyserini", "bm25", 40)
    config = ServerConfig(index_dir=str(tmp_path / "idx"), corpus=str(small_corpus), retriever="bm25")
    try:
        import pyserini  # noqa: F401
    except ImportError:
        with pytest.raises(ImportError, match="pip install pyserini"):
            load_searcher(config, CorpusStore(small_corpus))
    else:
        pytest.skip("pyserini is installed: an empty Lucene directory is not a real index")
