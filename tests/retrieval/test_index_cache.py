"""The index cache: one build per corpus, published whole, safe for several launchers on one cold cache."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from .conftest import REPO, free_port, write_corpus


def _texts(n: int = 30) -> list[str]:
    return [f"passage {i} about topic{i % 7} and place{i % 5}" for i in range(n)]


def test_two_corpora_named_alike_get_their_own_folders(tmp_path: Path) -> None:
    from mr_search_retrieval.config import EncoderConfig
    from mr_search_retrieval.index_cache import index_name

    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    a = write_corpus(tmp_path / "a" / "corpus.jsonl", _texts())
    b = write_corpus(tmp_path / "b" / "corpus.jsonl", _texts())
    for retriever in ("bm25", "dense"):
        names = {index_name(c, retriever, "faiss", "Flat", EncoderConfig()) for c in (a, b)}
        assert len(names) == 2, names


def test_concurrent_callers_build_once_and_both_get_a_whole_index(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, call_together
) -> None:
    from mr_search_retrieval import index_cache
    from mr_search_retrieval.indexes.metadata import IndexMetadata

    corpus = write_corpus(tmp_path / "corpus.jsonl", _texts())
    real_build = index_cache.build_bm25_index
    builds: list[Path] = []

    def slow_build(corpus_path: Path, out_dir: Path):
        builds.append(out_dir)
        time.sleep(0.5)  # long enough that the second caller arrives mid-build
        return real_build(corpus_path, out_dir)

    monkeypatch.setattr(index_cache, "build_bm25_index", slow_build)
    results = call_together(lambda: index_cache.ensure_index(corpus, "bm25", cache_dir=tmp_path / "cache"), timeout=30)
    assert len(builds) == 1, "the second caller must wait for the first build, not start its own"
    assert builds[0].name.startswith("."), "the build goes to a hidden staging folder, published when complete"
    assert len(set(results)) == 1 and IndexMetadata.read(results[0]).num_docs == 30
    leftovers = [p.name for p in results[0].parent.iterdir() if p.name.startswith(".")]
    assert leftovers == [], f"staging folders left behind: {leftovers}"
    # Cached: a third call builds nothing.
    assert index_cache.ensure_index(corpus, "bm25", cache_dir=tmp_path / "cache") == results[0]
    assert len(builds) == 1


def test_a_missing_corpus_names_what_to_pass(tmp_path: Path) -> None:
    from mr_search_retrieval.index_cache import ensure_index

    with pytest.raises(FileNotFoundError, match=r"nope\.jsonl does not exist; pass a JSON-lines file"):
        ensure_index(tmp_path / "nope.jsonl", "bm25", cache_dir=tmp_path)


@pytest.mark.slow
def test_two_launchers_on_one_cold_cache_both_serve(tmp_path: Path) -> None:
    """Two `retrieval_launch.sh` started at once over one corpus and one empty cache: one builds, the other waits,
    and both end up serving (before the lock, the second died on a half-written index)."""
    corpus = write_corpus(tmp_path / "corpus.jsonl", _texts(400))
    procs, logs, urls = [], [], []
    for i in range(2):
        while (port := free_port()) in {int(url.rsplit(":", 1)[1]) for url in urls}:
            pass  # the kernel's random pick met the first one's: the two services must not meet on one port
        log = tmp_path / f"launch{i}.log"
        env = {
            **os.environ,
            "PYTHON": sys.executable,
            "MR_SEARCH_CACHE": str(tmp_path / "cache"),
            "RETRIEVER_PORT": str(port),
            "RETRIEVER_TYPE": "bm25",
            "RETRIEVER_CORPUS": str(corpus),
            "RETRIEVER_DEVICE": "cpu",
        }
        with log.open("w") as out:
            procs.append(
                subprocess.Popen(
                    ["bash", str(REPO / "retrieval_launch.sh")],
                    cwd=REPO,
                    env=env,
                    stdout=out,
                    stderr=subprocess.STDOUT,
                    start_new_session=True,
                )
            )
        logs.append(log)
        urls.append(f"http://127.0.0.1:{port}")
    try:
        deadline = time.monotonic() + 240
        while not all("retrieval_launch.sh: ready" in log.read_text() for log in logs):
            for proc, log in zip(procs, logs, strict=True):
                if proc.poll() is not None:
                    pytest.fail(f"a launcher exited with {proc.returncode}:\n{log.read_text()[-3000:]}")
            if time.monotonic() > deadline:
                pytest.fail("not both ready:\n" + "\n---\n".join(log.read_text()[-2000:] for log in logs))
            time.sleep(0.3)
        import httpx

        for url in urls:
            answer = httpx.post(f"{url}/retrieve", json={"queries": ["topic3 place1"], "topk": 2}, timeout=30)
            assert answer.status_code == 200 and len(answer.json()["result"][0]) == 2
        built = sum("building the bm25 index" in log.read_text() for log in logs)
        assert built == 1, "exactly one launcher builds the index"
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.terminate()
                try:
                    proc.wait(30)
                except subprocess.TimeoutExpired:
                    os.killpg(proc.pid, 9)
