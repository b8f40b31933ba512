"""retrieval_loadgen.py's start handshake: with --start-at stdin the window opens when the driver says, however late."""

from __future__ import annotations

import http.server
import json
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

LOADGEN = Path(__file__).resolve().parents[2] / "retrieval" / "benchmarks" / "retrieval_loadgen.py"


class _Answer(http.server.BaseHTTPRequestHandler):
    def do_POST(self) -> None:
        self.rfile.read(int(self.headers["content-length"]))
        body = b'{"result":[[{"id":"0"}]]}'
        self.send_response(200)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def url() -> Iterator[str]:
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Answer)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/retrieve"
    finally:
        server.shutdown()
        server.server_close()


def _start(url: str) -> subprocess.Popen:
    args = ["--url", url, "--concurrency", "2", "--duration", "0.5", "--warmup", "0.1", "--start-at", "stdin"]
    return subprocess.Popen([sys.executable, str(LOADGEN), *args], stdin=subprocess.PIPE, stdout=subprocess.PIPE)


def test_a_window_set_after_a_late_start_still_measures(url: str) -> None:
    """The driver sends the start only once the process said it is ready, so a process that took longer to start
    than any fixed lead (here: told 3 s after it was ready) measures the same window as the others."""
    child = _start(url)
    assert child.stdout.readline() == b"ready\n"
    time.sleep(3.0)
    child.stdin.write(f"{time.time() + 0.1!r}\n".encode())
    out, _ = child.communicate(timeout=60)
    assert child.returncode == 0
    report = json.loads(out)
    assert report["queries"] > 0 and report["statuses"] == {"200": report["queries"]}
    assert report["bad_bodies"] == 0


def test_a_start_that_is_not_a_time_is_refused(url: str) -> None:
    child = _start(url)
    assert child.stdout.readline() == b"ready\n"
    child.stdin.write(b"soon\n")
    child.stdin.close()
    assert child.wait(timeout=60) != 0


def test_a_bad_start_option_says_what_it_takes() -> None:
    run = subprocess.run(
        [sys.executable, str(LOADGEN), "--url", "http://x/retrieve", "--concurrency", "1", "--start-at", "later"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert run.returncode == 2 and "give epoch seconds, 0 (now) or stdin" in run.stderr
