"""Shared fixtures of the retrieval service tests: the embedded world's indexes (built once), fakes, ports."""

from __future__ import annotations

import hashlib
import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="session")
def cache_dir(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """$MR_SEARCH_CACHE when set (the Makefile sets it: builds are reused across runs), else a temp dir."""
    env = os.environ.get("MR_SEARCH_CACHE")
    path = Path(env) if env else tmp_path_factory.mktemp("mr_search_cache")
    os.environ["MR_SEARCH_CACHE"] = str(path)
    yield path
    if env is None:
        os.environ.pop("MR_SEARCH_CACHE", None)


@pytest.fixture(scope="session")
def world(cache_dir: Path):
    from mr_search_embedded.world.world import ensure_world

    return ensure_world()


@pytest.fixture(scope="session")
def dense_index(world, cache_dir: Path) -> Path:
    from mr_search_retrieval.index_cache import ensure_index

    return ensure_index(Path(world.corpus), "dense", cache_dir=cache_dir)


@pytest.fixture(scope="session")
def bm25_index(world, cache_dir: Path) -> Path:
    from mr_search_retrieval.index_cache import ensure_index

    return ensure_index(Path(world.corpus), "bm25", cache_dir=cache_dir)


@pytest.fixture(scope="session")
def test_questions(world) -> list[dict]:
    return [json.loads(line) for line in Path(world.test).read_text().splitlines() if line.strip()]


class HashEncoder:
    """Deterministic bag-of-words encoder (no model): texts sharing words get similar vectors."""

    def __init__(self, dim: int = 64) -> None:
        self.dim = dim
        self.calls: list[int] = []

    def _vec(self, text: str) -> np.ndarray:
        v = np.zeros(self.dim, dtype=np.float32)
        for word in text.lower().split():
            v[int(hashlib.md5(word.encode()).hexdigest(), 16) % self.dim] += 1.0
        return v / max(float(np.linalg.norm(v)), 1e-6)

    def encode_queries(self, texts):
        self.calls.append(len(texts))
        return np.stack([self._vec(t) for t in texts]) if texts else np.zeros((0, self.dim), np.float32)

    def encode_passages(self, texts):
        return self.encode_queries(texts)

    def identity(self) -> dict:
        return {
            "name": "hash",
            "fingerprint": f"hash{self.dim}",
            "pooling": "mean",
            "normalize": True,
            "query_prefix": "",
            "passage_prefix": "",
        }


@pytest.fixture
def hash_encoder() -> HashEncoder:
    return HashEncoder()


def write_corpus(path: Path, texts: list[str]) -> Path:
    with path.open("w") as f:
        for i, text in enumerate(texts):
            f.write(json.dumps({"id": str(i), "contents": f'"Title {i}"\n{text}'}) + "\n")
    return path


@pytest.fixture
def small_corpus(tmp_path: Path) -> Path:
    words = ["amber", "basalt", "cedar", "delta", "ember", "fjord", "granite", "harbor", "iris", "juniper"]
    texts = [f"{words[i % 10]} {words[(i * 3 + 1) % 10]} passage number {i}" for i in range(40)]
    return write_corpus(tmp_path / "corpus.jsonl", texts)


@pytest.fixture
def hash_loader(small_corpus: Path, hash_encoder: HashEncoder):
    """An app loader over `small_corpus` with the model-free HashEncoder and an exact torch index."""
    from mr_search_retrieval.corpus import CorpusStore
    from mr_search_retrieval.indexes.torch_exact import TorchExactIndex
    from mr_search_retrieval.retriever import DenseSearcher

    def load(config):
        store = CorpusStore(small_corpus)
        matrix = hash_encoder.encode_passages([d["contents"] for d in store.iter_docs()])
        return DenseSearcher(hash_encoder, TorchExactIndex.from_numpy(matrix, device="cpu")), store

    return load


@pytest.fixture
def hash_config(small_corpus: Path):
    from mr_search_retrieval.config import ServerConfig

    return ServerConfig(index_dir="unused-with-hash-loader", corpus=str(small_corpus))


@pytest.fixture(scope="session")
def test_client_cls():
    """starlette's TestClient (runs the app's lifespan in-process); imported quietly: it warns about its httpx use."""
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        from starlette.testclient import TestClient
    return TestClient


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class LaunchedServer:
    def __init__(self, proc: subprocess.Popen, url: str, log: Path) -> None:
        self.proc, self.url, self.log = proc, url, log

    def stop(self, timeout: float = 30) -> int:
        """SIGTERM the launch script (its trap stops the server it started) and return its exit status."""
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)  # its own session: the script and its server only
                self.proc.wait()
        return self.proc.returncode


@pytest.fixture(scope="module")
def launch(tmp_path_factory: pytest.TempPathFactory, cache_dir: Path):
    """Start `bash retrieval_launch.sh [args]` on a free 127.0.0.1 port; wait for its ready line; stop it after."""
    started: list[LaunchedServer] = []

    def _launch(*args: str, env: dict[str, str] | None = None, timeout: float = 180) -> LaunchedServer:
        port = free_port()
        log = tmp_path_factory.mktemp("launch") / "server.log"
        full_env = {
            **os.environ,
            "RETRIEVER_PORT": str(port),
            "PYTHON": sys.executable,
            "MR_SEARCH_CACHE": str(cache_dir),
            **(env or {}),
        }
        with log.open("w") as out:
            proc = subprocess.Popen(
                ["bash", str(REPO / "retrieval_launch.sh"), *args],
                cwd=REPO,
                env=full_env,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        server = LaunchedServer(proc, f"http://127.0.0.1:{port}", log)
        started.append(server)
        deadline = time.monotonic() + timeout
        while "retrieval_launch.sh: ready" not in log.read_text():
            if proc.poll() is not None:
                pytest.fail(f"retrieval_launch.sh exited with {proc.returncode}:\n{log.read_text()[-3000:]}")
            if time.monotonic() > deadline:
                pytest.fail(f"retrieval_launch.sh not ready after {timeout}s:\n{log.read_text()[-3000:]}")
            time.sleep(0.3)
        return server

    yield _launch
    for server in started:
        server.stop()
