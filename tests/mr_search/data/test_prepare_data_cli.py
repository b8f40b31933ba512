"""scripts/prepare_data.py as a user runs it: a real process, exit codes and printed paths."""

from __future__ import annotations

import gzip
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

from mr_search.data.cli import main

SCRIPT = Path(__file__).resolve().parents[3] / "scripts" / "prepare_data.py"


def test_a_malformed_input_exits_2_with_file_and_line(tmp_path: Path) -> None:
    src = tmp_path / "asearcher.jsonl"
    src.write_text('{"question": "q?", "answer": "a"}\n{"question": 3, "answer": "b"}\n')
    done = subprocess.run(
        [sys.executable, str(SCRIPT), "asearcher", "--input", str(src), "--out", str(tmp_path)],
        capture_output=True,
        text=True,
    )
    assert done.returncode == 2
    assert f"{src}:2: 'question' must be a non-empty string" in done.stderr


def test_download_all_fetches_unpacks_and_assembles(file_server: Any, tmp_path: Path, capsys: Any) -> None:
    corpus = b"".join(json.dumps({"id": str(i), "contents": f'"T{i}"\ntext {i}'}).encode() + b"\n" for i in range(5))
    file_server.files.update({"wiki-18.jsonl.gz": gzip.compress(corpus), "part_aa": b"INDEX-", "part_ab": b"REST"})
    rc = main(["download", "all", "--out", str(tmp_path), "--base-url", file_server.url, "--no-progress"])
    assert rc == 0
    assert (tmp_path / "wiki-18.jsonl").read_bytes() == corpus
    assert (tmp_path / "e5_Flat.index").read_bytes() == b"INDEX-REST"
    assert str(tmp_path / "e5_Flat.index") in capsys.readouterr().out
    assert {r["path"] for r in file_server.requests} == {
        "/PeterJinGo/wiki-18-corpus/resolve/main/wiki-18.jsonl.gz",
        "/PeterJinGo/wiki-18-e5-index/resolve/main/part_aa",
        "/PeterJinGo/wiki-18-e5-index/resolve/main/part_ab",
    }


def test_download_errors_exit_2(file_server: Any, tmp_path: Path, capsys: Any) -> None:
    rc = main(["download", "index", "--out", str(tmp_path), "--base-url", file_server.url, "--no-progress"])
    assert rc == 2
    assert "part_aa: HTTP 404" in capsys.readouterr().err
