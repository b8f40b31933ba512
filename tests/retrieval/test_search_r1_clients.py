"""Search-R1's and verl's own retrieval clients keep working: their exact request bodies and headers, and their way of
reading the response, with return_scores true and false.

- Search-R1 (`search_r1/llm_agent/generation.py`, `batch_search`): `requests.post(search_url, json={"queries": [...],
  "topk": topk, "return_scores": True}).json()["result"]`; each hit is read as `hit["document"]["contents"]`, whose
  first line is the title and the rest the text ("Doc i(Title: ...) text").
- verl's search tool (`verl/tools/utils/search_r1_like_utils.py`, `call_search_api`): the same payload with
  `return_scores` as passed (the tool passes True), headers `Content-Type` and `Accept: application/json`; 500, 502,
  503 and 504 are retried, any other non-2xx is an error, and hits are read like Search-R1's ("Doc i (Title: ...)").
- Clients of Search-R1's server with `return_scores: false` read each hit as the document itself (`hit["contents"]`).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

QUESTIONS = ["Where was Pekrul Zuk born?", "Where was Porer Ko born?"]
GOLD_IDS = ["1277", "262"]


def search_r1_body(queries: list[str], topk: int, return_scores: bool) -> bytes:
    """The bytes `requests.post(url, json=payload)` sends (requests serialises with json.dumps' defaults)."""
    return json.dumps({"queries": queries, "topk": topk, "return_scores": return_scores}).encode()


def title_and_text(contents: str) -> tuple[str, str]:
    """How both clients split a passage: the first line is the title, the rest the text."""
    lines = contents.split("\n")
    return lines[0], "\n".join(lines[1:])


def read_scored(result: list[list[dict]]) -> list[list[tuple[str, str, str]]]:
    """(id, title, text) per hit, read through hit["document"] as Search-R1 and verl do; scores must be numbers."""
    out = []
    for hits in result:
        assert all(isinstance(hit["score"], float) for hit in hits)
        out.append([(hit["document"]["id"], *title_and_text(hit["document"]["contents"])) for hit in hits])
    return out


def read_plain(result: list[list[dict]]) -> list[list[tuple[str, str, str]]]:
    return [[(hit["id"], *title_and_text(hit["contents"])) for hit in hits] for hits in result]


@pytest.fixture(scope="module")
def client(dense_index: Path, world, test_client_cls):
    from mr_search_retrieval.app import create_app
    from mr_search_retrieval.config import ServerConfig

    with test_client_cls(create_app(ServerConfig(index_dir=str(dense_index), corpus=str(world.corpus)))) as c:
        yield c


@pytest.mark.parametrize("return_scores", [True, False])
@pytest.mark.parametrize(
    "headers",
    [
        {"Content-Type": "application/json"},  # Search-R1: requests' json= sets only this
        {"Content-Type": "application/json", "Accept": "application/json"},  # verl's call_search_api
    ],
    ids=["search_r1", "verl"],
)
def test_their_request_and_their_reading_of_the_response(client, headers: dict, return_scores: bool) -> None:
    r = client.post("/retrieve", content=search_r1_body(QUESTIONS, 3, return_scores), headers=headers)
    assert r.status_code == 200  # verl: 2xx is success; it retries 500/502/503/504 and gives up on other codes
    assert r.headers["content-type"].startswith("application/json")
    result = r.json()["result"]
    assert len(result) == len(QUESTIONS)  # one list per query, in order (Search-R1 zips them with its queries)
    hits = read_scored(result) if return_scores else read_plain(result)
    for gold, per_query in zip(GOLD_IDS, hits, strict=True):
        assert len(per_query) == 3
        assert gold in [doc_id for doc_id, _, _ in per_query]
        for _, title, text in per_query:
            assert title.startswith('"') and title.endswith('"') and text  # wiki-18's '"Title"\ntext' contents
    if return_scores:
        scores = [[hit["score"] for hit in hits] for hits in result]
        assert all(s == sorted(s, reverse=True) for s in scores)


def test_search_r1_prompt_text_is_built_from_the_response(client) -> None:
    r = client.post("/retrieve", content=search_r1_body(QUESTIONS[:1], 3, True))
    hits = read_scored(r.json()["result"])[0]
    # Search-R1 renders "Doc {i}(Title: {title}) {text}\n" per hit; the gold passage's text reaches the prompt.
    rendered = "".join(f"Doc {i + 1}(Title: {title}) {text}\n" for i, (_, title, text) in enumerate(hits))
    assert '(Title: "Pekrul Zuk") Born in Brulmere' in rendered


def test_a_verl_tool_call_with_one_query_and_the_default_topk(client) -> None:
    """verl's tool sends one query list per call; topk comes from the tool config (3 by default)."""
    body = json.dumps({"queries": ["Pekrul Zuk"], "topk": 3, "return_scores": True}).encode()
    r = client.post(
        "/retrieve", content=body, headers={"Content-Type": "application/json", "Accept": "application/json"}
    )
    assert r.status_code == 200
    assert len(r.json()["result"]) == 1 and len(r.json()["result"][0]) == 3


@pytest.mark.slow
def test_with_the_requests_library_against_the_real_server(launch, dense_index: Path) -> None:
    """The clients' own HTTP library against the launched service (their calls as they make them)."""
    requests = pytest.importorskip("requests")
    server = launch()
    payload = {"queries": QUESTIONS, "topk": 3, "return_scores": True}
    result = requests.post(f"{server.url}/retrieve", json=payload, timeout=30).json()["result"]
    assert [GOLD_IDS[i] in [h[0] for h in hits] for i, hits in enumerate(read_scored(result))] == [True, True]
    headers = {"Content-Type": "application/json", "Accept": "application/json"}
    response = requests.post(f"{server.url}/retrieve", headers=headers, json={**payload, "return_scores": False})
    response.raise_for_status()
    assert [GOLD_IDS[i] in [h[0] for h in hits] for i, hits in enumerate(read_plain(response.json()["result"]))] == [
        True,
        True,
    ]
