"""An SGLang server in its own process group for a benchmark, and the CPU its process tree uses.

The engine benchmarks (``engine_idle_cpu.py``, ``engine_decode_cpu.py``) start SGLang's HTTP server on the lab's tiny
policy the way verl configures it for the lab (triton attention, torch sampling, no grammar, 0.1 of the card) and
read the CPU of the server's whole tree (HTTP front, scheduler, detokenizer) from ``/proc``: on a host where several
runs share the cores, that is what one engine takes from the others.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterable, Iterator
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import Any

CLOCK = os.sysconf("SC_CLK_TCK")
# The lab's engine settings (compare.sh on an engine; configs/engine/sglang.yaml), less the CUDA-graph choice.
LAB_FLAGS = (
    "--mem-fraction-static", "0.1", "--attention-backend", "triton", "--sampling-backend", "pytorch",
    "--grammar-backend", "none", "--log-level", "error", "--skip-server-warmup",
)  # fmt: skip
# The lab's ENFORCE_EAGER=1 (its default), as train_grpo_step.sh hands it to SGLang: neither decode graphs nor
# piecewise prefill graphs. ENFORCE_EAGER=0 passes neither flag.
EAGER_FLAGS = ("--disable-cuda-graph", "--disable-piecewise-cuda-graph")


def _stat(pid: int) -> tuple[str, int, int] | None:
    """(name, parent pid, user + system ticks) of a process, or None once it is gone."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except (FileNotFoundError, ProcessLookupError, PermissionError):
        return None
    name, rest = text[text.index("(") + 1 : text.rindex(")")], text[text.rindex(")") + 2 :].split()
    return name, int(rest[1]), int(rest[11]) + int(rest[12])


def process_tree(root: int) -> list[int]:
    """``root`` and every process below it."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit() and (stat := _stat(int(entry))) is not None:
            children.setdefault(stat[1], []).append(int(entry))
    tree, todo = [], [root]
    while todo:
        pid = todo.pop()
        tree.append(pid)
        todo.extend(children.get(pid, []))
    return tree


def tree_ticks(root: int) -> dict[int, tuple[str, int]]:
    """Each live process under ``root``: its name and the CPU ticks it has used so far."""
    return {pid: (stat[0], stat[2]) for pid in process_tree(root) if (stat := _stat(pid)) is not None}


def cpu_seconds_since(before: dict[int, tuple[str, int]]) -> dict[str, float]:
    """CPU seconds each process of ``before`` used since it was read (``name[pid]`` keys; gone ones left out)."""
    used = {}
    for pid, (name, ticks) in before.items():
        if (after := _stat(pid)) is not None:
            used[f"{name}[{pid}]"] = (after[2] - ticks) / CLOCK
    return used


def tree_cpu_percent(root: int, seconds: float) -> dict[str, float]:
    """Each process's CPU use under ``root`` over ``seconds``, in % of one core (``name[pid]`` keys)."""
    before = tree_ticks(root)
    time.sleep(seconds)
    return {name: round(100.0 * used / seconds, 1) for name, used in cpu_seconds_since(before).items()}


def wait_up(port: int, server: subprocess.Popen, limit_s: float) -> float:
    """Seconds until the server at ``port`` answers ``/health``; an error once it exits or ``limit_s`` passes."""
    start = time.monotonic()
    while time.monotonic() - start < limit_s:
        if server.poll() is not None:
            raise RuntimeError(f"the SGLang server exited with {server.returncode} before it answered /health")
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=1):
                return time.monotonic() - start
        except OSError:
            time.sleep(1)
    raise TimeoutError(f"no answer on /health of port {port} in {limit_s:.0f} s")


def post_generate(port: int, body: dict[str, Any], timeout_s: float = 600) -> tuple[float, Any]:
    """One ``/generate`` call of the server at ``port``: (its seconds, the reply's JSON)."""
    request = urllib.request.Request(
        f"http://127.0.0.1:{port}/generate",
        data=json.dumps(body).encode(),
        headers={"Content-Type": "application/json"},
    )
    start = time.perf_counter()
    with urllib.request.urlopen(request, timeout=timeout_s) as reply:
        data = reply.read()
    return time.perf_counter() - start, json.loads(data)


def _exit(signum: int, _frame: object) -> None:
    raise SystemExit(128 + signum)


@contextmanager
def sglang_server(model: Path, port: int, flags: Iterable[str], limit_s: float = 300) -> Iterator[tuple[int, float]]:
    """SGLang's server on ``model`` with ``LAB_FLAGS`` and ``flags``: yields (its pid, seconds until it answered).

    The server's process group ends with the block, also when the benchmark is stopped by SIGTERM (``timeout``).
    """
    signal.signal(signal.SIGTERM, _exit)
    command = [sys.executable, "-m", "sglang.launch_server", "--model-path", str(model), "--port", str(port)]
    server = subprocess.Popen([*command, *LAB_FLAGS, *flags], start_new_session=True)
    try:
        yield server.pid, wait_up(port, server, limit_s)
    finally:
        with suppress(ProcessLookupError):  # the server exited already (its error is what the caller sees)
            os.killpg(server.pid, signal.SIGKILL)
        server.wait()


def require_model(parser: argparse.ArgumentParser, model: Path) -> None:
    """Stops with a usage error unless ``model`` is a Hugging Face folder."""
    if not (model / "config.json").is_file():
        parser.error(f"--model {model}: no config.json there; give a Hugging Face model folder")
