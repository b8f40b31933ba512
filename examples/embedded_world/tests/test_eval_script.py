"""The lab's scripts/eval.sh (`make eval`) as a user runs it: a real retrieval service and the newest run."""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from mr_search_embedded.tiny_model import ensure_tiny_model

ROOT = Path(__file__).resolve().parents[3]


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.mark.slow
def test_make_eval_uses_the_newest_run_and_stops_the_service_it_started(tmp_path: Path) -> None:
    # A fake quickstart run whose checkpoint holds the (untrained) tiny model in verl's HF layout,
    # and an older run whose checkpoint is broken: the newest one must be picked.
    tiny = ensure_tiny_model()
    runs = tmp_path / "runs"
    (runs / "embedded-k3-20250101-000000" / "checkpoints" / "global_step_1" / "actor").mkdir(parents=True)
    new_hf = runs / "embedded-k3-20250102-000000" / "checkpoints" / "global_step_2" / "actor" / "huggingface"
    shutil.copytree(tiny, new_hf)
    os.utime(new_hf.parents[3], (2_000_000_000, 2_000_000_000))
    port = _free_port()
    out = tmp_path / "eval"
    env = {
        **os.environ,
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}",
        "RUNS_DIR": str(tmp_path / "runs"),
        "OUT_DIR": str(out),
        "RETRIEVER_URL": f"http://127.0.0.1:{port}",
        "MAX_QUESTIONS": "2",
        "K_EVAL": "2",
        "MAX_NEW_TOKENS": "16",
        "RETRIEVER_TYPE": "bm25",  # starts in seconds; the dense service is covered by the retrieval tests
    }
    done = subprocess.run(
        ["bash", str(ROOT / "examples" / "embedded_world" / "scripts" / "eval.sh"), "--no-progress"],
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.strip().splitlines()[-1] == str(out)
    for name in ("results.md", "results.json", "em_by_attempt.png", "trajectories.html"):
        assert (out / name).is_file(), name
    results = json.loads((out / "results.json").read_text())
    assert list(results["methods"]) == ["embedded-k3-20250102-000000"]
    assert results["meta"]["questions"] == 4 and results["meta"]["K_eval"] == 2
    assert results["meta"]["test data"].endswith("dev.parquet"), "make eval reads the dev split unless told"
    # The service the script started is gone: nothing answers on its port any more.
    with socket.socket() as sock, pytest.raises(OSError):
        sock.settimeout(2)
        sock.connect(("127.0.0.1", port))


@pytest.mark.parametrize(
    ("env", "message"),
    [
        ({"WORLD": "namesake"}, "WORLD is now MR_SEARCH_WORLD (WORLD=namesake given)"),
        ({"MR_SEARCH_WORLD": "twins"}, "MR_SEARCH_WORLD=twins is not valid; use default, namesake or threehop"),
        ({"SPLIT": "heldout"}, "SPLIT=heldout is not valid; use dev (default), test or train"),
    ],
)
def test_the_world_and_split_knobs_refuse_bad_values(tmp_path: Path, env: dict[str, str], message: str) -> None:
    inherited = {k: v for k, v in os.environ.items() if k not in ("WORLD", "MR_SEARCH_WORLD")}
    done = subprocess.run(
        ["bash", str(ROOT / "examples" / "embedded_world" / "scripts" / "eval.sh")],
        env={**inherited, "PYTHON": sys.executable, "MR_SEARCH_CACHE": str(tmp_path), **env},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode != 0 and message in done.stderr
