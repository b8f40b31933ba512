"""The decode benchmark end to end against a stand-in SGLang server: its figures follow what the server does."""

from __future__ import annotations

import importlib
import json
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[2] / "scripts" / "bench"
sys.path.insert(0, str(BENCH))  # run by path, as the benchmark is
decode = importlib.import_module("engine_decode_cpu")

# `python -m sglang.launch_server`: /health, and a batched /generate of token ids that writes max_new_tokens per
# request at a fixed amount of CPU work per token, four times as much without CUDA graphs. Work, not wall time: the CPU
# it costs does not depend on what else the shared test machine runs.
FAKE_SERVER = """
import json, sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
args = sys.argv[1:]
port = int(args[args.index("--port") + 1])
assert "--skip-tokenizer-init" in args, args
work = 200000 if "--disable-cuda-graph" in args else 50000
class Handler(BaseHTTPRequestHandler):
    def log_message(self, *_): pass
    def _reply(self, body):
        data = json.dumps(body).encode()
        self.send_response(200); self.send_header("Content-Length", str(len(data))); self.end_headers()
        self.wfile.write(data)
    def do_GET(self):
        self._reply({})
    def do_POST(self):
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        n = body["sampling_params"]["max_new_tokens"]
        x = 0
        for _ in range(work * n * len(body["input_ids"])):
            x += 1
        self._reply([{"output_ids": [11] * n, "meta_info": {"completion_tokens": n}} for _ in body["input_ids"]])
ThreadingHTTPServer(("127.0.0.1", port), Handler).serve_forever()
"""


@pytest.fixture
def fake_sglang(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    package = tmp_path / "site" / "sglang"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "launch_server.py").write_text(FAKE_SERVER)
    monkeypatch.setenv("PYTHONPATH", f"{package.parent}:{BENCH}")
    model = tmp_path / "model"
    model.mkdir()
    (model / "config.json").write_text(json.dumps({"vocab_size": 64}))
    return model


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def test_the_ratios_follow_the_servers_cpu_per_token(fake_sglang: Path, capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["--model", str(fake_sglang), "--batch", "4", "--prompt-tokens", "8", "--new-tokens", "12", "--rounds", "3"]
    assert decode.main([*argv, "--port", str(_free_port())]) == 0
    lines = capsys.readouterr().out.splitlines()
    result = json.loads(next(line for line in lines if line.startswith("JSON "))[5:])
    eager, graphs = result["eager"], result["graphs"]
    assert eager["flags"] == ["--disable-cuda-graph", "--disable-piecewise-cuda-graph"] and graphs["flags"] == []
    assert eager["tokens"] == graphs["tokens"] == 3 * 4 * 12, "every request writes its tokens, every round"
    assert 0.1 < result["ratio"]["cpu_per_token"] < 0.6, result  # a quarter of the work a token, plus HTTP
    assert any(line.startswith("RATIO graphs/eager:") for line in lines)


def test_prompts_are_seeded_and_clear_of_the_special_ids() -> None:
    first = decode.prompts(3, 5, vocab=20, seed=0)
    assert first == decode.prompts(3, 5, vocab=20, seed=0) != decode.prompts(3, 5, vocab=20, seed=1)
    assert [len(p) for p in first] == [5, 5, 5] and all(10 <= t < 20 for p in first for t in p)


def test_a_server_that_writes_nothing_is_an_error_not_a_ratio() -> None:
    with pytest.raises(ValueError, match="no tokens"):
        decode.summarize([0.1], tokens=0, cpu_s=1.0)


@pytest.mark.parametrize(
    ("extra", "message"), [([], "no config.json"), (["--rounds", "0"], "--rounds 0: give a positive count")]
)
def test_bad_arguments_are_refused_before_any_server_starts(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], extra: list[str], message: str
) -> None:
    if extra:
        (tmp_path / "config.json").write_text(json.dumps({"vocab_size": 64}))
    with pytest.raises(SystemExit) as stop:
        decode.main(["--model", str(tmp_path), *extra])
    assert stop.value.code == 2 and message in capsys.readouterr().err


def test_a_benchmark_stopped_by_sigterm_takes_its_server_down(fake_sglang: Path, tmp_path: Path) -> None:
    """`timeout` sends SIGTERM: the server (its own process group) must not outlive the benchmark."""
    port = _free_port()
    code = (
        "import sys, time, pathlib; sys.path.insert(0, sys.argv[1]); from sglang_server import sglang_server\n"
        "flags = ['--skip-tokenizer-init']\n"
        "with sglang_server(pathlib.Path(sys.argv[2]), int(sys.argv[3]), flags) as (pid, _):\n"
        "    print(pid, flush=True); time.sleep(60)\n"
    )
    bench = subprocess.Popen(
        [sys.executable, "-c", code, str(BENCH), str(fake_sglang), str(port)], stdout=subprocess.PIPE, text=True
    )
    assert bench.stdout is not None
    server = int(bench.stdout.readline())
    bench.send_signal(signal.SIGTERM)
    assert bench.wait(timeout=30) == 128 + signal.SIGTERM
    for _ in range(50):
        if not Path(f"/proc/{server}").exists() or "Z" in Path(f"/proc/{server}/stat").read_text().split()[2]:
            break
        time.sleep(0.1)
    else:
        raise AssertionError(f"the server {server} still runs after its benchmark ended")
