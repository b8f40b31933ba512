"""scripts/lib/retrieval.sh, the retrieval start/stop the shell entry points share, against a fake launcher."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
LIB = REPO / "scripts" / "lib" / "retrieval.sh"

# Stands in for retrieval_launch.sh: answers /health on $RETRIEVER_PORT until TERM, like the real one.
FAKE_LAUNCH = """#!/usr/bin/env bash
set -euo pipefail
exec "$PYTHON" -c '
import http.server, os
class Health(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        self.send_response(200 if self.path == "/health" else 404); self.end_headers()
    def log_message(self, *args): pass
http.server.HTTPServer(("127.0.0.1", int(os.environ["RETRIEVER_PORT"])), Health).serve_forever()
'
"""


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _bash(root: Path, body: str) -> subprocess.CompletedProcess:
    script = f"""set -euo pipefail
ROOT={root}
PYTHON={sys.executable}
die() {{ echo "test: $*" >&2; exit 1; }}
source {LIB}
trap retrieval_stop_started EXIT
{body}
"""
    env = {k: v for k, v in os.environ.items() if not k.startswith("RETRIEVER_")}
    return subprocess.run(["bash", "-c", script], capture_output=True, text=True, timeout=60, env=env)


@pytest.fixture
def fake_root(tmp_path: Path) -> Path:
    (tmp_path / "retrieval_launch.sh").write_text(FAKE_LAUNCH)
    return tmp_path


def _answers(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=1):
            return True
    except OSError:
        return False


def test_starts_the_service_when_silent_and_stops_only_what_it_started(fake_root: Path) -> None:
    port = _free_port()
    url = f"http://127.0.0.1:{port}"
    proc = _bash(
        fake_root,
        f"""retrieval_healthy {url} && exit 3
retrieval_start_local {url} {fake_root}/logs/retrieval.log 30
retrieval_healthy {url} || exit 4
echo "started $RETRIEVAL_STARTED_PID"
""",
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert f"starting the embedded retrieval service on 127.0.0.1:{port}" in proc.stdout
    assert (fake_root / "logs" / "retrieval.log").exists()
    assert not _answers(port), "the EXIT trap must stop the service this script started"


def test_leaves_a_service_it_did_not_start_alone(fake_root: Path) -> None:
    port = _free_port()
    env = {**os.environ, "RETRIEVER_PORT": str(port), "PYTHON": sys.executable}
    other = subprocess.Popen(["bash", str(fake_root / "retrieval_launch.sh")], env=env)
    try:
        proc = _bash(
            fake_root,
            f"for _ in $(seq 50); do retrieval_healthy http://127.0.0.1:{port} && exit 0; sleep 0.2; done; exit 5",
        )
        assert proc.returncode == 0, proc.stderr
        assert _answers(port), "a service someone else started must keep running"
    finally:
        other.terminate()
        other.wait(timeout=10)


def test_refuses_to_start_a_remote_url_with_a_clear_message(fake_root: Path) -> None:
    proc = _bash(fake_root, "retrieval_start_local http://10.0.0.5:8000 /dev/null 5")
    assert proc.returncode == 1
    assert "is not a local http://127.0.0.1:<port>" in proc.stderr


def test_a_launcher_that_dies_is_reported_with_its_log(fake_root: Path) -> None:
    (fake_root / "retrieval_launch.sh").write_text("echo 'index missing: build it first' >&2; exit 2\n")
    log = fake_root / "retrieval.log"
    proc = _bash(fake_root, f"retrieval_start_local http://127.0.0.1:{_free_port()} {log} 30")
    assert proc.returncode == 1
    assert f"the retrieval service exited; see {log}" in proc.stderr
    assert "index missing" in log.read_text()


def test_free_ports_are_free_and_differ(fake_root: Path) -> None:
    """The kernel's pick, drawn at random and held by no one: two in a row may meet by chance, three must not all
    (a port taken between the pick and the bind is retried: the next test)."""
    proc = _bash(fake_root, "retrieval_free_port; retrieval_free_port; retrieval_free_port")
    assert proc.returncode == 0, proc.stderr
    ports = [int(line) for line in proc.stdout.split()]
    assert len(ports) == 3 and len(set(ports)) >= 2 and 8000 not in ports, ports
    assert not any(_answers(port) for port in ports)


def test_a_picked_port_taken_before_the_service_binds_it_is_replaced(fake_root: Path) -> None:
    """Another process (a Ray worker of a run beside this one) took the picked port: the service starts on another."""
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        proc = _bash(
            fake_root,
            f"""RETRIEVER_URL=http://127.0.0.1:{port}
retrieval_launch "$RETRIEVER_URL" {fake_root}/retrieval.log 30
retrieval_wait_free {fake_root}/retrieval.log 30
retrieval_healthy "$RETRIEVER_URL" || exit 4
echo "url $RETRIEVER_URL"
""",
        )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "the port was taken before the service bound it" in proc.stdout
    url = proc.stdout.split("url ")[-1].strip()
    assert url.startswith("http://127.0.0.1:") and not url.endswith(f":{port}")


def test_a_free_port_start_that_fails_otherwise_is_reported_with_its_log(fake_root: Path) -> None:
    (fake_root / "retrieval_launch.sh").write_text("echo 'index missing: build it first' >&2; exit 2\n")
    log = fake_root / "retrieval.log"
    proc = _bash(
        fake_root,
        f"RETRIEVER_URL=http://127.0.0.1:$(retrieval_free_port); retrieval_launch $RETRIEVER_URL {log} 30; "
        f"retrieval_wait_free {log} 30",
    )
    assert proc.returncode == 1
    assert f"the retrieval service exited; see {log}" in proc.stderr
    assert proc.stdout.count("starting the embedded retrieval service") == 1, "no retry for another failure"
