"""A running service is checked against this process's world before a comparison trusts it."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from mr_search_embedded.world import serves


def _corpus(tmp_path: Path, titles: list[str]) -> Path:
    path = tmp_path / "corpus.jsonl"
    rows = [
        {"id": str(i), "contents": f'"{t}"\n{t} is a city.', "title": t, "text": f"{t} is a city."}
        for i, t in enumerate(titles)
    ]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


@pytest.fixture
def service(tmp_path: Path) -> Iterator[tuple[str, list[dict]]]:
    """A stand-in /retrieve that ranks first the served passage whose contents equal the query (else the first)."""
    served: list[dict] = []

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            payload = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            result = [[next((d for d in served if d["contents"] == q), served[0])] for q in payload["queries"]]
            body = json.dumps({"result": result}).encode()
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            return

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_port}/retrieve", served
    finally:
        server.shutdown()


def test_the_same_corpus_passes_and_another_is_named(service, tmp_path: Path) -> None:
    url, served = service
    mine = _corpus(tmp_path, ["Kumholt", "Tarport", "Bolford", "Resdale"])
    served += [json.loads(line) for line in mine.read_text().splitlines()]
    passages = serves.probe_passages(mine, count=3)
    assert [p["id"] for p in passages] == ["0", "2", "3"], "first, last and one between"
    assert serves.mismatch(url, passages) is None
    served[3] = {**served[3], "id": "7"}  # the same text under another id: another world's corpus order
    found = serves.mismatch(url, passages)
    assert found is not None and "passage 3 ('Resdale') came back as '7'" in found


def test_an_empty_corpus_is_an_error(tmp_path: Path) -> None:
    empty = tmp_path / "corpus.jsonl"
    empty.write_text("")
    with pytest.raises(ValueError, match="is empty"):
        serves.probe_passages(empty)
