"""The streamed search-worker protocol: fronts with batches in flight, tokens merged in the worker, same results."""

from __future__ import annotations

import multiprocessing as mp
import pickle
import threading
import time

import numpy as np
import pytest

from mr_search_retrieval.config import EncoderConfig
from mr_search_retrieval.graph_encoder import BucketedEncoder
from mr_search_retrieval.indexes.torch_exact import TorchExactIndex
from mr_search_retrieval.multiproc import FrontOptions
from mr_search_retrieval.retriever import DenseSearcher
from mr_search_retrieval.search_worker import SearchWorkerError
from mr_search_retrieval.stream_worker import StreamRemoteSearcher, front_tokenizer, serve_stream
from mr_search_retrieval.token_rows import TokenRows, merge_token_rows

TEXTS = [
    "Who wrote Tarn Ridge?",
    "Ketil",
    "Which band released the album that the river Ousel gave its name to, and in which year did it chart first?",
    "How tall is the Velmor tower?",
    "mayor of Sallow",
]


class GateSearcher:
    """Row id = the number in the query; the first batch waits for `gate` (so the others queue behind it)."""

    num_docs = 1000

    def __init__(self) -> None:
        self.batches: list[list[str]] = []
        self.gate = threading.Event()

    def search(self, queries: list[str], k: int) -> tuple[np.ndarray, np.ndarray]:
        self.batches.append(list(queries))
        if len(self.batches) == 1:
            self.gate.wait(5)
        if "boom" in queries:
            raise RuntimeError("cannot search 'boom'")
        ids = np.array([[int(q.split()[-1]) + j for j in range(k)] for q in queries], dtype=np.int64)
        return -ids.astype(np.float32), ids


def _start(searcher: object, n: int, gather_s: float = 0.0):
    pipes = [mp.Pipe(duplex=True) for _ in range(n)]
    worker = threading.Thread(target=serve_stream, args=(searcher, [w for w, _ in pipes], gather_s))
    worker.start()
    return worker, [StreamRemoteSearcher(front, 1000) for _, front in pipes]


def test_a_front_keeps_batches_in_flight_and_what_queues_meanwhile_is_one_merged_batch() -> None:
    searcher = GateSearcher()
    worker, remotes = _start(searcher, 2)
    results: dict[str, object] = {}

    def ask(name: str, remote: StreamRemoteSearcher, queries: list[str], k: int) -> None:
        results[name] = remote.search(queries, k)

    calls = [("a", 0, ["q 0"], 1), ("b", 0, ["q 10", "q 20"], 2), ("c", 1, ["q 30"], 3), ("d", 0, ["q 40"], 1)]
    threads = [threading.Thread(target=ask, args=(name, remotes[f], qs, k)) for name, f, qs, k in calls]
    threads[0].start()
    time.sleep(0.3)  # batch 1 (q 0) is on the "GPU"; the rest arrive meanwhile, front 0 sends two more
    for t in threads[1:]:
        t.start()
    time.sleep(0.3)
    searcher.gate.set()
    for t in threads:
        t.join(10)
    assert len(searcher.batches) == 2 and searcher.batches[0] == ["q 0"]
    assert sorted(searcher.batches[1]) == ["q 10", "q 20", "q 30", "q 40"]  # three requests, one pass
    assert results["a"][1].tolist() == [[0]]
    assert results["b"][1].tolist() == [[10, 11], [20, 21]]  # each caller gets its own rows, cut to its k
    assert results["c"][1].tolist() == [[30, 31, 32]] and results["d"][1].tolist() == [[40]]
    with pytest.raises(SearchWorkerError, match="cannot search 'boom'"):
        remotes[1].search(["boom"], 1)
    assert remotes[1].search(["q 5"], 1)[1].tolist() == [[5]]  # the worker survived the bad batch
    for r in remotes:
        r.close()
    worker.join(10)
    assert not worker.is_alive(), "the worker stops once every front has closed its connection"


@pytest.mark.parametrize(("tile", "expected"), [(8, [1, 8, 2]), (0, [1, 10])])
def test_a_batch_just_over_a_tile_multiple_is_cut_back_and_the_rest_goes_next(tile: int, expected: list[int]) -> None:
    searcher = GateSearcher()
    pipes = [mp.Pipe(duplex=True) for _ in range(5)]
    worker = threading.Thread(target=serve_stream, args=(searcher, [w for w, _ in pipes], 0.0, 1024, 0, tile))
    worker.start()
    remotes = [StreamRemoteSearcher(front, 1000) for _, front in pipes]
    first = threading.Thread(target=remotes[0].search, args=(["q 0"], 1))
    first.start()
    time.sleep(0.3)  # batch 1 is on the "GPU": 10 queries (5 requests of 2) queue behind it
    rest = [threading.Thread(target=r.search, args=([f"q {i}", f"q {i + 1}"], 1)) for i, r in enumerate(remotes)]
    for t in rest:
        t.start()
    time.sleep(0.3)
    searcher.gate.set()
    for t in [first, *rest]:
        t.join(10)
    assert [len(b) for b in searcher.batches] == expected  # 10 = 8 + 2 is cut to one tile of 8, the rest goes next
    for r in remotes:
        r.close()
    worker.join(10)


def test_a_gone_worker_fails_waiting_and_later_calls_with_a_clear_error() -> None:
    front, back = mp.Pipe(duplex=True)
    remote = StreamRemoteSearcher(front, 10)
    errors: list[BaseException] = []

    def ask() -> None:
        try:
            remote.search(["q 1"], 1)
        except SearchWorkerError as err:
            errors.append(err)

    t = threading.Thread(target=ask)
    t.start()
    back.recv()
    back.close()  # the worker dies with the call in flight
    t.join(5)
    assert len(errors) == 1 and "search worker process is gone" in str(errors[0])
    with pytest.raises(SearchWorkerError, match="gone"):
        remote.search(["q 2"], 1)


@pytest.fixture(scope="module")
def dense() -> DenseSearcher:
    encoder = BucketedEncoder(EncoderConfig(device="cpu", cpu_bf16=False))
    rows = np.random.default_rng(0).standard_normal((300, encoder.dim)).astype(np.float32)
    rows /= np.linalg.norm(rows, axis=1, keepdims=True)
    return DenseSearcher(encoder, TorchExactIndex.from_numpy(rows, device="cpu"))


def test_token_rows_merged_are_the_tokenizer_output_for_all_queries_at_once(dense: DenseSearcher) -> None:
    tokenizer = pickle.loads(pickle.dumps(front_tokenizer(dense)))  # shipped to the fronts like this
    parts = [tokenizer(TEXTS[:2]), tokenizer(TEXTS[2:3]), tokenizer(TEXTS[3:])]
    merged = merge_token_rows(parts, dense.encoder.pad_token_id)
    cfg = dense.encoder.config
    texts = [cfg.query_prefix + t for t in TEXTS]
    whole = dense.encoder.tokenizer(
        texts, padding=True, truncation=True, max_length=cfg.max_length, return_tensors="np"
    )
    assert set(merged) == set(whole.keys())
    for key, value in merged.items():
        assert np.array_equal(value, whole[key]), key
    with pytest.raises(ValueError, match="attention_mask"):
        TokenRows(("input_ids",), np.zeros((1, 2), np.int32), np.array([2], np.int32))


def test_searching_token_rows_finds_what_searching_the_strings_finds(dense: DenseSearcher) -> None:
    tokenizer = front_tokenizer(dense)
    batch = merge_token_rows([tokenizer(TEXTS)], dense.encoder.pad_token_id)
    emb = dense.encoder.embed_tokens(batch).numpy()
    assert np.allclose(emb, dense.encoder.encode_queries(TEXTS), atol=1e-5)
    scores, ids = dense.search_tokens(batch, 5)
    ref_scores, ref_ids = dense.search(TEXTS, 5)
    assert np.array_equal(ids, ref_ids) and np.allclose(scores, ref_scores, atol=1e-5)
    dense.encoder.sub_batch_size = 2  # several sub-batches, sorted by length: rows still come back in order
    try:
        assert np.array_equal(dense.search_tokens(batch, 5)[1], ref_ids)
    finally:
        dense.encoder.sub_batch_size = 512


def test_fronts_sending_tokens_get_the_string_results_through_the_worker(dense: DenseSearcher) -> None:
    tokenizer = front_tokenizer(dense)
    pipes = [mp.Pipe(duplex=True) for _ in range(2)]
    worker = threading.Thread(target=serve_stream, args=(dense, [w for w, _ in pipes], 0.01, 1024, 0))
    worker.start()
    remotes = [StreamRemoteSearcher(front, dense.num_docs, tokenizer) for _, front in pipes]
    got: dict[int, np.ndarray] = {}
    threads = [
        threading.Thread(target=lambda i=i: got.__setitem__(i, remotes[i % 2].search([TEXTS[i]], 3)[1]))
        for i in range(len(TEXTS))
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    _, ref_ids = dense.search(TEXTS, 3)
    assert [got[i].tolist()[0] for i in range(len(TEXTS))] == ref_ids.tolist()
    for r in remotes:
        r.close()
    worker.join(10)


def test_stream_options_reject_bad_values() -> None:
    with pytest.raises(ValueError, match="front_lanes must be >= 1"):
        FrontOptions(front_lanes=0)
    with pytest.raises(ValueError, match="gather_s must be >= 0"):
        serve_stream(GateSearcher(), [], gather_s=-1)
    with pytest.raises(ValueError, match="worker_tile must be >= 0"):
        FrontOptions(worker_tile=-1)


@pytest.mark.slow
async def test_streamed_service_answers_concurrent_clients_and_stops_cleanly(launch, dense_index) -> None:
    import asyncio

    import aiohttp

    served = launch("--front-lanes", "4", env={"RETRIEVER_HTTP_WORKERS": "2"})
    question = "Where was Pekrul Zuk born?"
    statuses: list[int] = []

    async def client(session: aiohttp.ClientSession, i: int) -> None:
        for _ in range(5):
            async with session.post(f"{served.url}/retrieve", json={"queries": [f"{question} {i}"], "topk": 3}) as r:
                statuses.append(r.status)
                body = await r.json()
                assert r.status == 200 and len(body["result"][0]) == 3

    connector = aiohttp.TCPConnector(limit=64, force_close=True)  # new connections: both fronts get requests
    async with aiohttp.ClientSession(connector=connector, timeout=aiohttp.ClientTimeout(total=60)) as s:
        async with s.post(
            f"{served.url}/retrieve", json={"queries": [question], "topk": 4, "return_scores": True}
        ) as r:
            body = await r.json()
        assert "Pekrul Zuk" in " ".join(d["document"]["contents"] for d in body["result"][0])
        await asyncio.gather(*(client(s, i) for i in range(64)))
    assert statuses == [200] * 320
    served.proc.terminate()
    served.proc.wait(60)
    log = served.log.read_text()
    assert "streamed from 2 HTTP front processes" in log and "search worker stopped after" in log
