"""Malformed /retrieve requests each get a 4xx whose message says what was wrong; the server stays ready."""

from __future__ import annotations

import json

import numpy as np
import pytest

from mr_search_retrieval.app import create_app
from mr_search_retrieval.config import LimitsConfig, ServerConfig
from mr_search_retrieval.corpus import CorpusStore
from mr_search_retrieval.indexes.torch_exact import TorchExactIndex
from mr_search_retrieval.retriever import DenseSearcher

LIMITS = LimitsConfig(max_queries_per_request=8, max_query_chars=200, max_topk=10, max_body_bytes=4096)

# (raw body or JSON-able payload, expected status, words the message must contain)
BAD_REQUESTS = [
    (b"", 422, "empty request body"),
    (b"not json", 422, "not valid JSON"),
    (b'{"queries": ["a"', 422, "not valid JSON"),
    (b"\xff\xfe\x00garbage", 422, "not valid JSON"),
    ([], 422, "valid dictionary"),
    ("just a string", 422, "valid dictionary"),
    ({}, 422, "queries: Field required"),
    ({"topk": 3}, 422, "queries: Field required"),
    ({"queries": "one string"}, 422, "queries: Input should be a valid list"),
    ({"queries": None}, 422, "queries: Input should be a valid list"),
    ({"queries": []}, 422, "queries is empty"),
    ({"queries": [""]}, 422, "queries.0 is empty"),
    ({"queries": ["ok", "   "]}, 422, "queries.1 is empty"),
    ({"queries": [3]}, 422, "queries.0: Input should be a valid string"),
    ({"queries": [None]}, 422, "queries.0: Input should be a valid string"),
    ({"queries": [["nested"]]}, 422, "queries.0: Input should be a valid string"),
    ({"queries": ["x" * 201]}, 422, "max_query_chars=200"),
    ({"queries": ["q"] * 9}, 422, "max_queries_per_request=8"),
    ({"queries": ["a"], "topk": 0}, 422, "topk must be >= 1"),
    ({"queries": ["a"], "topk": -5}, 422, "topk must be >= 1"),
    ({"queries": ["a"], "topk": 11}, 422, "max_topk=10"),
    ({"queries": ["a"], "topk": 10**30}, 422, "topk"),
    ({"queries": ["a"], "topk": "3"}, 422, "topk: Input should be a valid integer"),
    ({"queries": ["a"], "topk": 2.5}, 422, "topk: Input should be a valid integer"),
    ({"queries": ["a"], "return_scores": "yes"}, 422, "return_scores: Input should be a valid boolean"),
    ({"queries": ["a"], "return_scores": 1}, 422, "return_scores: Input should be a valid boolean"),
    ({"queries": ["a" * 10_000]}, 422, "max_body_bytes=4096"),
]


class OneHotEncoder:
    """Model-free encoder: the input checks under test run before any encoding."""

    dim = 20

    def encode_queries(self, texts: list[str]) -> np.ndarray:
        return np.eye(self.dim, dtype=np.float32)[[len(t) % self.dim for t in texts]]


@pytest.fixture(scope="module")
def client(tmp_path_factory, test_client_cls):
    corpus = tmp_path_factory.mktemp("bad") / "corpus.jsonl"
    corpus.write_text("".join(json.dumps({"id": str(i), "contents": f'"T{i}"\nword{i}'}) + "\n" for i in range(20)))

    def loader(config: ServerConfig):
        index = TorchExactIndex.from_numpy(np.eye(20, dtype=np.float32), device="cpu")
        return DenseSearcher(OneHotEncoder(), index), CorpusStore(corpus)

    with test_client_cls(create_app(ServerConfig(index_dir="unused", corpus=str(corpus), limits=LIMITS), loader)) as c:
        yield c


@pytest.mark.parametrize(("body", "status", "words"), BAD_REQUESTS, ids=[str(i) for i in range(len(BAD_REQUESTS))])
def test_malformed_request_gets_4xx_with_a_clear_message(client, body, status: int, words: str) -> None:
    content = body if isinstance(body, bytes) else json.dumps(body).encode()
    r = client.post("/retrieve", content=content, headers={"content-type": "application/json"})
    assert r.status_code == status, r.text
    assert words in r.json()["detail"]


def test_wrong_method_and_path_are_4xx(client) -> None:
    assert client.get("/retrieve").status_code == 405
    assert client.post("/search", json={"queries": ["a"]}).status_code == 404


def test_still_ready_and_serving_after_all_the_bad_input(client) -> None:
    for body, _, _ in BAD_REQUESTS:
        client.post("/retrieve", content=body if isinstance(body, bytes) else json.dumps(body).encode())
    assert client.get("/health").json()["ready"] is True
    r = client.post("/retrieve", json={"queries": ["a", "b"], "topk": 2, "return_scores": True})
    assert r.status_code == 200 and len(r.json()["result"]) == 2
