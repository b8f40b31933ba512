"""A local HTTP file server on 127.0.0.1 with Range support and a switch that cuts transfers short."""

from __future__ import annotations

import hashlib
import re
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest


@dataclass
class FileServer:
    url: str
    files: dict[str, bytes] = field(default_factory=dict)
    cut_after: int | None = None  # send at most this many body bytes per response, then drop the connection
    honour_range: bool = True
    send_sha: bool = True
    requests: list[dict[str, str]] = field(default_factory=list)


@pytest.fixture
def file_server() -> Iterator[FileServer]:
    state = FileServer(url="")

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args: object) -> None:
            pass

        def do_GET(self) -> None:
            state.requests.append({"path": self.path, "range": self.headers.get("Range", "")})
            body = state.files.get(self.path.rsplit("/", 1)[-1])
            if body is None:
                self.send_error(404, "no such file")
                return
            start, status = 0, 200
            match = re.fullmatch(r"bytes=(\d+)-", self.headers.get("Range", ""))
            if match and state.honour_range:
                start, status = int(match.group(1)), 206
                if start >= len(body):
                    self.send_error(416, "range not satisfiable")
                    return
            chunk = body[start:]
            self.send_response(status)
            self.send_header("Content-Length", str(len(chunk)))
            if status == 206:
                self.send_header("Content-Range", f"bytes {start}-{len(body) - 1}/{len(body)}")
            if state.send_sha:
                self.send_header("X-Linked-Etag", f'"{hashlib.sha256(body).hexdigest()}"')
            self.end_headers()
            if state.cut_after is not None:
                chunk = chunk[: state.cut_after]
            self.wfile.write(chunk)
            self.wfile.flush()
            if state.cut_after is not None:
                self.close_connection = True

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    state.url = f"http://127.0.0.1:{server.server_address[1]}"
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    try:
        yield state
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)
