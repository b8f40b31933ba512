"""The ledger of who read a question split: ``reads.jsonl`` next to the parquet, one JSON line a read.

The probe appends a line every time it reads questions (its split, the parquet and its bytes' sha256), and a
comparison appends one when its final evaluation reads the test split. A comparison's test is ``probed`` when
anything but that comparison itself read those bytes before, or when the dev split is the same file (the stand-in
of ``mr_search_embedded.splits``: every earlier choice read dev).

    python -m mr_search_embedded.reads record --parquet P --split test --reader comparison --work W
    python -m mr_search_embedded.reads probed --test P --dev D [--work W]      # prints JSON, exit 0
"""

from __future__ import annotations

import argparse
import fcntl
import hashlib
import json
import sys
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Final

from mr_search_embedded.splits import SPLITS, check_split, same_questions

LEDGER: Final = "reads.jsonl"
READERS: Final = ("probe", "comparison")


@dataclass(frozen=True)
class Read:
    """One read of a split's questions."""

    when: str  # UTC, ISO 8601
    split: str
    parquet: str
    sha256: str  # of the parquet's bytes: a redrawn split at the same path is another set of questions
    reader: str  # "probe" or "comparison"
    detail: dict[str, Any] = field(default_factory=dict)  # the probe's model and questions; a comparison's work


@dataclass(frozen=True)
class Probed:
    """Whether a comparison's test questions were seen before its final evaluation, and why."""

    probed: bool
    reads: int  # earlier reads of the same bytes (the comparison's own left out)
    dev_is_test: bool
    reason: str

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def ledger_path(parquet: Path) -> Path:
    return Path(parquet).parent / LEDGER


def sha256(path: Path) -> str:
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def record_read(
    parquet: Path, split: str, reader: str, detail: dict[str, Any] | None = None, now: datetime | None = None
) -> Read:
    """Appends a read of ``parquet`` to its ledger (under a lock: probes may run side by side)."""
    check_split(split)
    if reader not in READERS:
        raise ValueError(f"reader {reader!r} is not valid; use one of {', '.join(READERS)}")
    parquet = Path(parquet).resolve()
    read = Read(
        when=(now or datetime.now(timezone.utc)).strftime("%Y-%m-%dT%H:%M:%SZ"),
        split=split,
        parquet=str(parquet),
        sha256=sha256(parquet),
        reader=reader,
        detail=dict(detail or {}),
    )
    path = ledger_path(parquet)
    with path.open("a", encoding="utf-8") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        handle.write(json.dumps(asdict(read), sort_keys=True) + "\n")
    return read


def read_ledger(parquet: Path) -> list[Read]:
    """Every read in the ledger next to ``parquet`` (of any split), oldest first."""
    path = ledger_path(parquet)
    if not path.is_file():
        return []
    reads = []
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip():
            continue
        try:
            reads.append(Read(**json.loads(line)))
        except (ValueError, TypeError) as err:
            raise ValueError(f"{path}:{number}: not a read record ({err}); fix or remove the line") from err
    return reads


def reads_of(parquet: Path, work: Path | None = None) -> list[Read]:
    """The reads of ``parquet``'s current bytes, under any split name; ``work``'s own comparison read left out."""
    digest = sha256(parquet)
    own = str(Path(work).resolve()) if work is not None else None
    return [
        r
        for r in read_ledger(parquet)
        if r.sha256 == digest and not (r.reader == "comparison" and own is not None and r.detail.get("work") == own)
    ]


def probed(test: Path, dev: Path | None = None, work: Path | None = None) -> Probed:
    """Whether the test questions in ``test`` were read before the comparison in ``work`` read them."""
    earlier = reads_of(test, work)
    dev_is_test = dev is not None and same_questions(dev, test)
    reasons = []
    if earlier:
        who = sorted({r.reader for r in earlier})
        reasons.append(f"{len(earlier)} earlier read(s) of these questions by {' and '.join(who)} in {LEDGER}")
    if dev_is_test:
        reasons.append("the dev split is the same questions (every earlier choice read dev)")
    reason = "; ".join(reasons) if reasons else f"no earlier read in {ledger_path(test)} and dev is another split"
    return Probed(bool(earlier) or dev_is_test, len(earlier), dev_is_test, reason)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m mr_search_embedded.reads", description=__doc__.split("\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    record = sub.add_parser("record", help="append a read to the ledger next to the parquet")
    record.add_argument("--parquet", type=Path, required=True)
    record.add_argument("--split", choices=SPLITS, required=True)
    record.add_argument("--reader", choices=READERS, required=True)
    record.add_argument("--work", type=Path, default=None, help="the comparison's work folder")
    status = sub.add_parser("probed", help="print whether a test split was read before (JSON)")
    status.add_argument("--test", type=Path, required=True)
    status.add_argument("--dev", type=Path, default=None)
    status.add_argument("--work", type=Path, default=None, help="leave this comparison's own read out")
    args = parser.parse_args(argv)
    try:
        if args.command == "record":
            detail = {"work": str(args.work.resolve())} if args.work is not None else {}
            if args.work is not None and any(
                r.reader == "comparison" and r.detail == detail for r in reads_of(args.parquet)
            ):
                return 0  # a continued comparison reads its test once: one line
            record_read(args.parquet, args.split, args.reader, detail)
        else:
            print(json.dumps(probed(args.test, args.dev, args.work).as_dict()))
    except (ValueError, FileNotFoundError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
