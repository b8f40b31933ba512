"""Resumable downloads of the wiki-18 corpus and its e5 index, renamed only once size and sha256 check out."""

from __future__ import annotations

import gzip
import hashlib
import logging
import os
import re
import shutil
import urllib.error
import urllib.request
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

logger = logging.getLogger(__name__)

Opener = Callable[..., Any]  # urllib.request.urlopen's signature: (request, timeout=...) -> response
CHUNK: Final = 1 << 20
HF_DATASETS: Final = "https://huggingface.co/datasets"


@dataclass(frozen=True)
class RemoteFile:
    """One file to fetch; ``size``/``sha256`` None means "take the server's word"."""

    url: str
    name: str
    size: int | None = None
    sha256: str | None = None

    def __post_init__(self) -> None:
        if not self.url.startswith(("http://", "https://")):
            raise ValueError(f"RemoteFile.url={self.url!r}: must be an http:// or https:// URL")
        if not self.name or "/" in self.name or self.name.startswith("."):
            raise ValueError(f"RemoteFile.name={self.name!r}: must be a plain file name")
        if self.sha256 is not None and not re.fullmatch(r"[0-9a-f]{64}", self.sha256):
            raise ValueError(f"RemoteFile.sha256={self.sha256!r}: must be 64 lowercase hex digits")


# Search-R1's release of the 2018 Wikipedia dump and its e5-base-v2 flat index (two parts to concatenate).
WIKI18_CORPUS: Final = (
    RemoteFile(f"{HF_DATASETS}/PeterJinGo/wiki-18-corpus/resolve/main/wiki-18.jsonl.gz", "wiki-18.jsonl.gz"),
)
WIKI18_E5_INDEX: Final = (
    RemoteFile(f"{HF_DATASETS}/PeterJinGo/wiki-18-e5-index/resolve/main/part_aa", "part_aa"),
    RemoteFile(f"{HF_DATASETS}/PeterJinGo/wiki-18-e5-index/resolve/main/part_ab", "part_ab"),
)


class DownloadError(RuntimeError):
    """A download failed or did not verify; the message says which file and why."""


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        while block := handle.read(CHUNK):
            digest.update(block)
    return digest.hexdigest()


def _server_sha256(headers: Any) -> str | None:
    etag = (headers.get("X-Linked-Etag") or headers.get("ETag") or "").strip('W/"')
    return etag if re.fullmatch(r"[0-9a-f]{64}", etag) else None


def _total_size(response: Any, offset: int) -> int | None:
    content_range = response.headers.get("Content-Range", "")
    match = re.fullmatch(r"bytes \d+-\d+/(\d+)", content_range.strip())
    if match:
        return int(match.group(1))
    length = response.headers.get("Content-Length")
    return int(length) + (offset if response.status == 206 else 0) if length is not None else None


def download(
    remote: RemoteFile,
    out_dir: Path,
    *,
    opener: Opener = urllib.request.urlopen,
    timeout: float = 60.0,
    progress: bool = True,
) -> Path:
    """Fetches ``remote`` into ``out_dir`` (resuming a ``.part`` file), verifies it, returns its path."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    final, part = out_dir / remote.name, out_dir / f"{remote.name}.part"
    size_ok = final.is_file() and (remote.size is None or final.stat().st_size == remote.size)
    if size_ok and (remote.sha256 is None or _sha256(final) == remote.sha256):
        logger.info("%s already present", final)
        return final
    offset = part.stat().st_size if part.is_file() else 0
    request = urllib.request.Request(remote.url, headers={"Range": f"bytes={offset}-"} if offset else {})
    try:
        response = opener(request, timeout=timeout)
    except urllib.error.HTTPError as err:
        if err.code != 416 or offset == 0 or (remote.size is not None and offset != remote.size):
            raise DownloadError(f"{remote.url}: HTTP {err.code} {err.reason}") from err
        response = None  # the .part file is already complete
    except (urllib.error.URLError, OSError) as err:
        raise DownloadError(f"{remote.url}: {err}; check the network, then re-run to resume") from err
    expected_sha = remote.sha256
    total = remote.size
    if response is not None:
        with response:
            if response.status == 200 and offset:
                logger.warning("%s: the server ignored the range request; restarting from byte 0", remote.url)
                offset = 0
            total = total if total is not None else _total_size(response, offset)
            expected_sha = expected_sha or _server_sha256(response.headers)
            _copy(response, part, offset, total, remote.name, progress)
    size = part.stat().st_size
    if total is not None and size != total:
        raise DownloadError(f"{remote.name}: got {size} of {total} bytes; re-run to resume the download")
    if expected_sha is not None and (actual := _sha256(part)) != expected_sha:
        part.unlink()
        raise DownloadError(f"{remote.name}: sha256 {actual} != expected {expected_sha}; the partial file was removed")
    os.replace(part, final)
    logger.info("%s verified (%d bytes)", final, size)
    return final


def _copy(response: Any, part: Path, offset: int, total: int | None, name: str, progress: bool) -> None:
    from tqdm.auto import tqdm

    with (
        part.open("ab" if offset else "wb") as handle,
        tqdm(total=total, initial=offset, unit="B", unit_scale=True, desc=name, disable=not progress) as bar,
    ):
        try:
            while block := response.read(CHUNK):
                handle.write(block)
                bar.update(len(block))
        except (OSError, urllib.error.URLError) as err:
            got = handle.tell()
            raise DownloadError(f"{name}: connection lost after {got} bytes ({err}); re-run to resume") from err


def download_all(
    remotes: Sequence[RemoteFile], out_dir: Path, *, opener: Opener = urllib.request.urlopen, progress: bool = True
) -> list[Path]:
    return [download(r, out_dir, opener=opener, progress=progress) for r in remotes]


def concatenate(parts: Sequence[Path], out: Path) -> Path:
    """Joins index parts (``part_aa``, ``part_ab``) into one file, atomically."""
    tmp = out.with_name(f".{out.name}.tmp")
    with tmp.open("wb") as sink:
        for part in parts:
            with Path(part).open("rb") as source:
                shutil.copyfileobj(source, sink, CHUNK)
    os.replace(tmp, out)
    return out


def gunzip(path: Path, out: Path | None = None) -> Path:
    """Decompresses ``x.gz`` to ``x`` (streaming, atomically)."""
    path = Path(path)
    out = out or path.with_suffix("")
    tmp = out.with_name(f".{out.name}.tmp")
    with gzip.open(path, "rb") as source, tmp.open("wb") as sink:
        shutil.copyfileobj(source, sink, CHUNK)
    os.replace(tmp, out)
    return out
