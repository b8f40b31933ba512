"""FAISS indexes from `index_factory` strings (Flat, HNSW32, IVF1024,PQ64, SQ8, ...), inner-product metric."""

from __future__ import annotations

import contextlib
import logging
from pathlib import Path

import numpy as np

logger = logging.getLogger(__name__)

INDEX_FILE = "index.faiss"
_ADD_ROWS = 1 << 16
_MAX_TRAIN_ROWS = 256 * 1024
# Search-time defaults for approximate indexes; override with e.g. "nprobe=64,efSearch=256".
DEFAULT_SEARCH_PARAMS = "nprobe=32,efSearch=128"


def _faiss():
    try:
        import faiss
    except ImportError as err:
        raise ImportError("FAISS indexes need faiss: pip install faiss-cpu (or faiss-gpu-cu12)") from err
    return faiss


def gpu_count() -> int:
    faiss = _faiss()
    return int(faiss.get_num_gpus()) if hasattr(faiss, "get_num_gpus") else 0


def build_faiss_index(embeddings: np.ndarray, factory: str):
    """Train (when the type needs it) on a sample and add all rows, in pieces so a memmap never loads whole."""
    faiss = _faiss()
    n, dim = embeddings.shape
    try:
        index = faiss.index_factory(dim, factory, faiss.METRIC_INNER_PRODUCT)
    except RuntimeError as err:
        raise ValueError(
            f"FAISS cannot build index_factory string {factory!r} ({err}); try Flat, HNSW32, IVF1024,PQ64 or SQ8"
        ) from err
    if not index.is_trained:
        rows = np.sort(np.random.default_rng(0).choice(n, size=min(n, _MAX_TRAIN_ROWS), replace=False))
        logger.info("training %s on %d vectors", factory, rows.size)
        index.train(np.ascontiguousarray(embeddings[rows], dtype=np.float32))
    for start in range(0, n, _ADD_ROWS):
        index.add(np.ascontiguousarray(embeddings[start : start + _ADD_ROWS], dtype=np.float32))
    return index


class FaissIndex:
    """A FAISS index, moved to every visible GPU when faiss-gpu is installed and a GPU device is asked for."""

    def __init__(self, index, device: str = "auto", search_params: str = DEFAULT_SEARCH_PARAMS) -> None:
        faiss = _faiss()
        self._apply_params(index, search_params)
        wants_gpu = device != "cpu"
        if wants_gpu and gpu_count() > 0:
            opts = faiss.GpuMultipleClonerOptions()
            opts.shard = True
            opts.useFloat16 = True
            index = faiss.index_cpu_to_all_gpus(index, co=opts)
            logger.info("FAISS index moved to %d GPU(s)", gpu_count())
        elif device.startswith("cuda"):
            raise ValueError(f"index device {device!r} needs faiss-gpu (pip install faiss-gpu-cu12) or backend torch")
        self.index = index
        self.ntotal = int(index.ntotal)
        self.dim = int(index.d)

    @staticmethod
    def _apply_params(index, search_params: str) -> None:
        faiss = _faiss()
        space = faiss.ParameterSpace()
        for item in filter(None, (p.strip() for p in search_params.split(","))):
            name, _, value = item.partition("=")
            # A parameter that does not apply to this index type (nprobe on HNSW, ...) is skipped.
            with contextlib.suppress(RuntimeError):
                space.set_index_parameter(index, name, float(value))

    @classmethod
    def load(cls, index_dir: Path, device: str = "auto", search_params: str = DEFAULT_SEARCH_PARAMS) -> FaissIndex:
        path = Path(index_dir) / INDEX_FILE
        if not path.is_file():
            raise FileNotFoundError(f"FAISS index file {path} does not exist; build it with mr-search-build-index")
        return cls.load_file(path, device, search_params)

    @classmethod
    def load_file(cls, path: Path, device: str = "auto", search_params: str = DEFAULT_SEARCH_PARAMS) -> FaissIndex:
        """Any FAISS index file (ours or another tool's, e.g. Search-R1's e5_Flat.index)."""
        try:
            index = _faiss().read_index(str(path))
        except RuntimeError as err:
            raise ValueError(f"FAISS cannot read index file {path} ({err}); is it a complete FAISS index?") from err
        return cls(index, device=device, search_params=search_params)

    def save(self, index_dir: Path) -> Path:
        path = Path(index_dir) / INDEX_FILE
        _faiss().write_index(self.index, str(path))
        return path

    def reconstruct(self, rows: np.ndarray) -> np.ndarray | None:
        """The stored vectors of `rows` (float32 (n, dim)); None where the index type cannot give them back."""
        try:
            return np.stack([self.index.reconstruct(int(r)) for r in rows]).astype(np.float32, copy=False)
        except RuntimeError:
            return None

    def search(self, queries: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
        k = min(int(k), self.ntotal)
        scores, ids = self.index.search(np.ascontiguousarray(queries, dtype=np.float32), k)
        return scores.astype(np.float32, copy=False), ids.astype(np.int64, copy=False)
