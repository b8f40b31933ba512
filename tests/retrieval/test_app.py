"""Contract of the app in-process: every /retrieve schema variant on the real embedded index; health, metrics, docs."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from mr_search_retrieval.app import create_app
from mr_search_retrieval.config import LimitsConfig, ServerConfig


@pytest.fixture(scope="module")
def client(world, dense_index: Path, test_client_cls):
    app = create_app(ServerConfig(index_dir=str(dense_index), corpus=str(world.corpus)))
    with test_client_cls(app) as c:
        yield c


def _check_doc(doc: dict) -> None:
    assert isinstance(doc["id"], str) and isinstance(doc["contents"], str)
    assert doc["contents"].startswith('"')  # title on the first line, quoted as in wiki-18


@pytest.mark.parametrize(
    ("payload", "n_queries", "k", "scores"),
    [
        ({"queries": ["Where was Pekrul Zuk born?"]}, 1, 3, False),  # topk missing -> default 3
        ({"queries": ["Where was Pekrul Zuk born?"], "topk": None}, 1, 3, False),  # topk null -> default 3
        ({"queries": ["Where was Pekrul Zuk born?"], "topk": 5, "return_scores": True}, 1, 5, True),
        ({"queries": ["who founded it?", "a painter"], "topk": 1, "return_scores": False}, 2, 1, False),
        ({"queries": ["x"] * 3, "topk": 2, "return_scores": True, "client": "verl"}, 3, 2, True),  # extra key ignored
    ],
)
def test_retrieve_schema_variants(client, payload: dict, n_queries: int, k: int, scores: bool) -> None:
    r = client.post("/retrieve", json=payload)
    assert r.status_code == 200, r.text
    result = r.json()["result"]
    assert len(result) == n_queries and all(len(items) == k for items in result)
    for items in result:
        if scores:
            assert all(set(item) == {"document", "score"} for item in items)
            values = [item["score"] for item in items]
            assert values == sorted(values, reverse=True)  # best first
            for item in items:
                _check_doc(item["document"])
        else:
            for doc in items:
                _check_doc(doc)


def test_gold_passage_comes_back_with_its_fields(client, test_questions: list[dict]) -> None:
    q = next(q for q in test_questions if q["hops"] == 1)
    docs = client.post("/retrieve", json={"queries": [q["question"]], "topk": 3}).json()["result"][0]
    assert q["gold_doc_ids"][0] in [d["id"] for d in docs]
    assert all({"title", "text"} <= set(d) for d in docs)  # extra corpus fields pass through


def test_health_metrics_and_docs(client) -> None:
    health = client.get("/health")
    assert health.status_code == 200 and health.json()["ready"] is True
    assert health.json()["detail"]["num_docs"] > 1000
    client.post("/retrieve", json={"queries": ["a", "b"]})
    client.post("/retrieve", json={"queries": []})
    text = client.get("/metrics").text
    for name in (
        "requests_total",
        "queries_total",
        "batch_size_bucket",
        "queue_depth",
        "request_latency_seconds_count",
    ):
        assert f"mr_search_retrieval_{name}" in text
    assert 'mr_search_retrieval_requests_total{status="422"}' in text
    assert client.get("/docs").status_code == 200
    spec = client.get("/openapi.json").json()
    assert set(
        spec["paths"]["/retrieve"]["post"]["requestBody"]["content"]["application/json"]["schema"]["properties"]
    ) == {"queries", "topk", "return_scores"}


def test_not_ready_until_loaded(hash_config: ServerConfig, hash_loader, test_client_cls) -> None:
    client = test_client_cls(create_app(hash_config, loader=hash_loader))  # no `with`: lifespan (loading) never ran
    assert client.get("/health").status_code == 503
    r = client.post("/retrieve", json={"queries": ["a"]})
    assert r.status_code == 503 and "not loaded" in r.json()["detail"]


def test_startup_failure_propagates_the_loader_message(hash_config: ServerConfig, test_client_cls) -> None:
    def broken(config):
        raise ValueError("index metadata /x/metadata.json says the index was built with encoder e5")

    app = create_app(hash_config, loader=broken)
    with pytest.raises(ValueError, match=r"metadata\.json says"), test_client_cls(app):
        pass


def test_search_error_is_a_500_with_the_reason_and_the_server_keeps_serving(
    hash_config: ServerConfig, hash_loader, test_client_cls
) -> None:
    def flaky_loader(config):
        searcher, store = hash_loader(config)
        real = searcher.search

        def search(queries, k):
            if "explode" in queries:
                raise RuntimeError("index shard went away")
            return real(queries, k)

        searcher.search = search
        return searcher, store

    with test_client_cls(create_app(hash_config, loader=flaky_loader)) as c:
        r = c.post("/retrieve", json={"queries": ["explode"]})
        assert r.status_code == 500 and "index shard went away" in r.json()["detail"]
        assert c.post("/retrieve", json={"queries": ["amber"]}).status_code == 200


def test_unicode_queries_and_documents_round_trip(hash_config: ServerConfig, hash_loader, test_client_cls) -> None:
    with test_client_cls(create_app(hash_config, loader=hash_loader)) as c:
        r = c.post("/retrieve", json={"queries": ["Zürich — 東京 🙂"], "return_scores": True})
        assert r.status_code == 200 and np.isfinite(r.json()["result"][0][0]["score"])


def test_limits_are_configurable(small_corpus, hash_loader, test_client_cls) -> None:
    config = ServerConfig(
        index_dir="unused",
        corpus=str(small_corpus),
        default_topk=2,
        limits=LimitsConfig(max_queries_per_request=2, max_topk=4),
    )
    with test_client_cls(create_app(config, loader=hash_loader)) as c:
        assert len(c.post("/retrieve", json={"queries": ["a"]}).json()["result"][0]) == 2
        r = c.post("/retrieve", json={"queries": ["a", "b", "c"]})
        assert r.status_code == 422 and "max_queries_per_request=2" in r.json()["detail"]


def test_fast_path_and_fastapi_route_answer_alike(hash_config: ServerConfig, hash_loader, test_client_cls) -> None:
    """POST /retrieve skips FastAPI's routing; its FastAPI route (kept for /docs) must give the same answers."""
    requests = [
        {"queries": ["amber cedar", "delta"], "topk": 2, "return_scores": True},
        {"queries": ["granite"], "topk": None},
        {"queries": ["iris"], "topk": 0},  # 422 naming topk
        {"queries": "not a list"},  # 422 worded by pydantic
    ]
    app = create_app(hash_config, loader=hash_loader)
    assert app.retrieve_asgi is not None
    with test_client_cls(app) as c:
        fast = [c.post("/retrieve", json=body) for body in requests]
        fast.append(c.post("/retrieve", content=b"{not json", headers={"content-type": "application/json"}))
        app.retrieve_asgi = None
        routed = [c.post("/retrieve", json=body) for body in requests]
        routed.append(c.post("/retrieve", content=b"{not json", headers={"content-type": "application/json"}))
    assert [r.status_code for r in fast] == [200, 200, 422, 422, 422]
    assert [(r.status_code, r.content, r.headers["content-type"]) for r in fast] == [
        (r.status_code, r.content, r.headers["content-type"]) for r in routed
    ]
    assert "queries" in fast[3].json()["detail"] and "topk" in fast[2].json()["detail"]
