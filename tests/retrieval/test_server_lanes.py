"""`--lanes 0` (the default): a dense index served on the CPU gets one batch lane per core; anything else one lane."""

from __future__ import annotations

import pytest

from mr_search_retrieval import server


@pytest.fixture
def cpus(monkeypatch: pytest.MonkeyPatch):
    def set_cpus(n: int) -> None:
        monkeypatch.setattr(server, "_usable_cpus", lambda: n)

    return set_cpus


def lanes_for(*argv: str) -> tuple[int, int]:
    return server.auto_lanes(server.build_parser().parse_args(["--device", "cpu", "--index-device", "cpu", *argv]))


@pytest.mark.parametrize(
    ("n_cpus", "argv", "expected"),
    [
        (2, [], (2, 1)),  # the 2-core box: two lanes of one intra-op thread
        (16, [], (server.MAX_AUTO_LANES, 2)),  # capped lanes share the cores
        (8, ["--torch-threads", "2"], (4, 2)),  # fixed threads per lane: as many lanes as fit
        (8, ["--lanes", "3"], (3, 0)),  # explicit lanes keep torch's threads unless told
        (8, ["--retriever", "bm25"], (1, 0)),  # only dense searchers are known to allow concurrent calls
        (8, ["--http-workers", "2"], (1, 0)),  # fronts forward batches to one search worker
    ],
)
def test_auto_lanes(cpus, n_cpus: int, argv: list[str], expected: tuple[int, int]) -> None:
    cpus(n_cpus)
    assert lanes_for(*argv) == expected


@pytest.mark.parametrize("argv", [["--retriever", "bm25"], ["--http-workers", "2"]])
def test_several_lanes_are_refused_where_the_searcher_cannot_take_concurrent_calls(argv: list[str]) -> None:
    with pytest.raises(ValueError, match="--lanes 2 needs a dense retriever served in one process"):
        lanes_for("--lanes", "2", *argv)


def test_lanes_reach_the_batcher_config(cpus, tmp_path) -> None:
    from mr_search_retrieval.indexes.metadata import IndexMetadata

    cpus(2)
    IndexMetadata(backend="faiss", num_docs=1, corpus=str(tmp_path / "c.jsonl")).write(tmp_path)
    args = server.build_parser().parse_args(["--index-dir", str(tmp_path), "--corpus", str(tmp_path / "c.jsonl")])
    args.lanes, args.torch_threads = 2, 1
    assert server.config_from_args(args).batcher.lanes == 2


@pytest.mark.parametrize(
    ("flag", "lanes", "expected"),
    [
        (0, 2, server.CPU_LANE_MAX_BATCH),  # CPU lanes: small batches (bare encode+search is fastest there)
        (0, 1, 128),  # one lane (GPU, BM25, HTTP fronts): the BatcherConfig default the GPU figures used
        (32, 2, 32),  # an explicit size is kept
        (256, 1, 256),
    ],
)
def test_auto_max_batch(flag: int, lanes: int, expected: int) -> None:
    assert server.auto_max_batch(flag, lanes) == expected


def test_the_cpu_default_reaches_the_batcher_config(cpus, tmp_path) -> None:
    from mr_search_retrieval.indexes.metadata import IndexMetadata

    cpus(2)
    IndexMetadata(backend="faiss", num_docs=1, corpus=str(tmp_path / "c.jsonl")).write(tmp_path)
    argv = ["--index-dir", str(tmp_path), "--corpus", str(tmp_path / "c.jsonl"), "--device", "cpu"]
    args = server.build_parser().parse_args([*argv, "--index-device", "cpu"])
    args.lanes, args.torch_threads = server.auto_lanes(args)
    assert server.config_from_args(args).batcher.max_batch_size == server.CPU_LANE_MAX_BATCH == 64
    args = server.build_parser().parse_args([*argv, "--index-device", "cpu", "--retriever", "bm25"])
    args.lanes, args.torch_threads = server.auto_lanes(args)
    args.retriever = "dense"  # the metadata above says dense; only the lanes decide the batch
    assert server.config_from_args(args).batcher.max_batch_size == 128
