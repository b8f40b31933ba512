"""Optional per-turn record of what the engine sampled and the loop kept (``MR_SEARCH_TRACE_DIR``; run_checks)."""

from __future__ import annotations

import json
import os
import socket
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Final

TRACE_ENV: Final = "MR_SEARCH_TRACE_DIR"


@dataclass(frozen=True)
class TurnTrace:
    """One model turn: ``sampled`` as the engine returned it; the loop kept its first ``kept`` ids as model tokens."""

    sampled: list[int]
    kept: int
    closing: list[int]
    stop_reason: str | None
    max_new: int


@dataclass
class EpisodeTrace:
    """The turns of one meta-episode, then what the loop handed to verl."""

    turns: list[TurnTrace] = field(default_factory=list)

    def turn(
        self, sampled: Sequence[int], kept: int, closing: Sequence[int], stop_reason: str | None, max_new: int
    ) -> None:
        ids, closers = [int(t) for t in sampled], [int(t) for t in closing]
        self.turns.append(TurnTrace(ids, int(kept), closers, stop_reason, max_new))


class Tracer:
    """Writes finished episodes to one file per process; a no-op when ``directory`` is None."""

    def __init__(self, directory: str | os.PathLike[str] | None) -> None:
        self.directory = Path(directory) if directory else None
        self._path: Path | None = None

    @classmethod
    def from_env(cls) -> Tracer:
        return cls(os.environ.get(TRACE_ENV) or None)

    @property
    def enabled(self) -> bool:
        return self.directory is not None

    def start(self) -> EpisodeTrace | None:
        return EpisodeTrace() if self.enabled else None

    def finish(
        self,
        episode: EpisodeTrace | None,
        request_id: str,
        response_ids: Sequence[int],
        mask: Sequence[int],
        attempt_ids: Sequence[int],
    ) -> None:
        if episode is None or self.directory is None:
            return
        if self._path is None:
            self.directory.mkdir(parents=True, exist_ok=True)
            self._path = self.directory / f"trace-{socket.gethostname()}-{os.getpid()}.jsonl"
        record = {
            "request_id": request_id,
            "turns": [asdict(turn) for turn in episode.turns],
            "response_ids": [int(t) for t in response_ids],
            "mask": [int(m) for m in mask],
            "attempt_ids": [int(a) for a in attempt_ids],
        }
        # One write of one whole line: episodes finishing on other threads never interleave inside a line.
        with self._path.open("a", encoding="utf-8") as handle:
            handle.write(json.dumps(record, separators=(",", ":")) + "\n")


def read_traces(directory: str | os.PathLike[str]) -> list[dict]:
    """Every episode record under ``directory`` (all processes' files)."""
    records = []
    for path in sorted(Path(directory).glob("trace-*.jsonl")):
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            if line.strip():
                try:
                    records.append(json.loads(line))
                except ValueError as error:
                    raise ValueError(f"{path}:{number}: not a trace line ({error})") from error
    return records
