"""Resumable, verified downloads against a local HTTP server (no network)."""

from __future__ import annotations

import gzip
import hashlib
import io
import os
from pathlib import Path
from typing import Any, ClassVar

import pytest

from mr_search.data.download import DownloadError, RemoteFile, concatenate, download, gunzip

PAYLOAD = os.urandom(3 * 1024 * 1024 + 123)


def _remote(server: Any, name: str = "blob.bin", **kw: Any) -> RemoteFile:
    return RemoteFile(f"{server.url}/{name}", name, **kw)


def test_a_cut_download_resumes_with_a_range_request(file_server: Any, tmp_path: Path) -> None:
    file_server.files["blob.bin"] = PAYLOAD
    file_server.cut_after = 1024 * 1024
    with pytest.raises(DownloadError, match="re-run to resume"):
        download(_remote(file_server), tmp_path, progress=False)
    part = tmp_path / "blob.bin.part"
    have = part.stat().st_size
    assert 0 < have < len(PAYLOAD)
    assert not (tmp_path / "blob.bin").exists(), "an unverified file must not get its final name"
    file_server.cut_after = None
    path = download(_remote(file_server), tmp_path, progress=False)
    assert path.read_bytes() == PAYLOAD
    assert file_server.requests[-1]["range"] == f"bytes={have}-"
    assert not part.exists()


def test_a_finished_file_is_not_fetched_again(file_server: Any, tmp_path: Path) -> None:
    file_server.files["blob.bin"] = PAYLOAD
    sha = hashlib.sha256(PAYLOAD).hexdigest()
    download(_remote(file_server, size=len(PAYLOAD), sha256=sha), tmp_path, progress=False)
    count = len(file_server.requests)
    download(_remote(file_server, size=len(PAYLOAD), sha256=sha), tmp_path, progress=False)
    assert len(file_server.requests) == count


def test_a_server_that_ignores_range_restarts_cleanly(file_server: Any, tmp_path: Path) -> None:
    file_server.files["blob.bin"] = PAYLOAD
    file_server.honour_range = False
    (tmp_path / "blob.bin.part").write_bytes(b"garbage from an older attempt")
    assert download(_remote(file_server), tmp_path, progress=False).read_bytes() == PAYLOAD


def test_a_wrong_checksum_is_refused_and_the_part_removed(file_server: Any, tmp_path: Path) -> None:
    file_server.files["blob.bin"] = PAYLOAD
    with pytest.raises(DownloadError, match="sha256"):
        download(_remote(file_server, sha256="0" * 64), tmp_path, progress=False)
    assert not (tmp_path / "blob.bin.part").exists() and not (tmp_path / "blob.bin").exists()


def test_the_server_sha256_header_is_checked(file_server: Any, tmp_path: Path) -> None:
    file_server.files["blob.bin"] = PAYLOAD
    file_server.cut_after = 1000
    with pytest.raises(DownloadError):
        download(_remote(file_server), tmp_path, progress=False)
    # Corrupt the partial file: the resumed download completes but its sha256 cannot match the header's.
    part = tmp_path / "blob.bin.part"
    part.write_bytes(b"x" * part.stat().st_size)
    file_server.cut_after = None
    with pytest.raises(DownloadError, match="sha256"):
        download(_remote(file_server), tmp_path, progress=False)


def test_a_size_mismatch_is_an_error(file_server: Any, tmp_path: Path) -> None:
    file_server.files["blob.bin"] = PAYLOAD
    with pytest.raises(DownloadError, match=f"got {len(PAYLOAD)} of {len(PAYLOAD) + 1} bytes"):
        download(_remote(file_server, size=len(PAYLOAD) + 1), tmp_path, progress=False)


def test_http_errors_name_the_url(file_server: Any, tmp_path: Path) -> None:
    with pytest.raises(DownloadError, match=r"missing\.bin: HTTP 404"):
        download(_remote(file_server, "missing.bin"), tmp_path, progress=False)


def test_the_opener_is_injectable(tmp_path: Path) -> None:
    class Response(io.BytesIO):
        status = 200
        headers: ClassVar[dict[str, str]] = {"Content-Length": "5"}

    seen: list[str] = []

    def opener(request: Any, timeout: float) -> Response:
        seen.append(request.full_url)
        return Response(b"hello")

    path = download(RemoteFile("https://example.invalid/x.txt", "x.txt"), tmp_path, opener=opener, progress=False)
    assert path.read_bytes() == b"hello" and seen == ["https://example.invalid/x.txt"]


def test_remote_file_rejects_bad_specs() -> None:
    with pytest.raises(ValueError, match="http"):
        RemoteFile("ftp://x/y", "y")
    with pytest.raises(ValueError, match="plain file name"):
        RemoteFile("https://x/y", "../y")


def test_index_parts_concatenate_and_corpus_gunzips(tmp_path: Path) -> None:
    (tmp_path / "part_aa").write_bytes(b"abc")
    (tmp_path / "part_ab").write_bytes(b"def")
    assert concatenate([tmp_path / "part_aa", tmp_path / "part_ab"], tmp_path / "idx").read_bytes() == b"abcdef"
    (tmp_path / "c.jsonl.gz").write_bytes(gzip.compress(b'{"id": "0"}\n'))
    assert gunzip(tmp_path / "c.jsonl.gz").read_bytes() == b'{"id": "0"}\n'
