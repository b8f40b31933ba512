"""The plan gate: a comparison that tests anything starts only once its plan is committed, and records when.

``check`` runs after compare.sh writes ``REPORT_DIR/plan.md`` and before anything trains or reads the test split: it
asks git whether that file is committed as it stands (tracked, no change against HEAD) and writes
``WORK_DIR/gate.json`` with the commit and its time. ``launch`` appends each launch (training or evaluation) to
``WORK_DIR/launches.jsonl`` with its UTC time; the report states the plan's commit time and the first launch's.
``PLAN_GATE=0`` runs without the gate (a run that tests nothing: CI, smoke runs); its report says so.

A machine without the repository's history (a GPU node that got a copy of the tree) checks the plan against a record
instead: ``record`` writes, where git is, the plan's commit, its time and its git blob id; ``check`` with that record
passes only when the plan on disk hashes to the same blob, i.e. is byte for byte the committed plan.
"""

from __future__ import annotations

import hashlib
import json
import subprocess
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Final

GATE: Final = "gate.json"
LAUNCHES: Final = "launches.jsonl"


class PlanNotCommitted(ValueError):
    """The plan differs from what git holds, or git holds none."""


def _git(folder: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["git", "-C", str(folder), *args], capture_output=True, text=True, check=False)


def utc_now() -> str:
    return datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def committed_plan(plan: Path) -> dict[str, str]:
    """``{"commit", "committed_at"}`` of the last commit that holds ``plan`` as it is on disk; raises
    PlanNotCommitted with the command that commits it otherwise."""
    plan = Path(plan).resolve()
    if not plan.is_file():
        raise PlanNotCommitted(f"{plan}: no plan to check; compare.sh writes it before the gate")
    folder = plan.parent
    fix = (
        f"review it, then commit it (git add {plan} && git commit -m 'plan: <world> comparison') and run the "
        "same command again; PLAN_GATE=0 runs without the gate, as a run that tests nothing"
    )
    if _git(folder, "rev-parse", "--show-toplevel").returncode != 0:
        raise PlanNotCommitted(f"{plan} is not in a git repository, so its commit cannot precede the runs: {fix}")
    if _git(folder, "ls-files", "--error-unmatch", plan.name).returncode != 0:
        raise PlanNotCommitted(f"{plan} is not committed: {fix}")
    if _git(folder, "diff", "--quiet", "HEAD", "--", plan.name).returncode != 0:
        raise PlanNotCommitted(f"{plan} differs from its committed version: {fix}")
    log = _git(folder, "log", "-1", "--format=%H %cI", "--", plan.name)
    commit, _, when = log.stdout.strip().partition(" ")
    stamp = datetime.fromisoformat(when).astimezone(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    return {"commit": commit, "committed_at": stamp}


def blob_id(path: Path) -> str:
    """The git blob id of a file's bytes (``git hash-object``), computed without git."""
    data = Path(path).read_bytes()
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


def record(plan: Path) -> dict[str, str]:
    """What a machine without the history needs to check the plan: its commit, the commit's time, its blob id."""
    found = committed_plan(plan)
    return {**found, "blob": blob_id(plan), "plan": Path(plan).name}


def committed_by_record(plan: Path, record_path: Path) -> dict[str, str]:
    """``{"commit", "committed_at"}`` from a ``record`` when ``plan`` is byte for byte the plan it names."""
    saved = json.loads(Path(record_path).read_text(encoding="utf-8"))
    if not Path(plan).is_file():
        raise PlanNotCommitted(f"{plan}: no plan to check; compare.sh writes it before the gate")
    if blob_id(plan) != saved.get("blob"):
        raise PlanNotCommitted(
            f"{plan} is not the plan committed in {saved.get('commit')} (its blob id differs from {record_path}'s): "
            "write the record again where the history is (python -m mr_search_embedded.compare gate-record) after "
            "committing this plan, or give the knobs the committed plan was written with"
        )
    return {"commit": saved["commit"], "committed_at": saved["committed_at"]}


def check(plan: Path, work: Path, enabled: bool = True, record_path: Path | None = None) -> dict[str, Any]:
    """Writes ``work/gate.json``: the plan's commit (or that the gate was off). Raises PlanNotCommitted."""
    record: dict[str, Any] = {"plan": str(plan), "gate": enabled, "checked_at": utc_now()}
    if enabled and record_path is not None:
        found = committed_by_record(plan, record_path)
        record.update(plan_commit=found["commit"], plan_committed_at=found["committed_at"], checked_by=str(record_path))
    elif enabled:
        found = committed_plan(plan)
        record.update(plan_commit=found["commit"], plan_committed_at=found["committed_at"])
    else:
        record.update(plan_commit=None, plan_committed_at=None)
    Path(work).mkdir(parents=True, exist_ok=True)
    (Path(work) / GATE).write_text(json.dumps(record, indent=1) + "\n", encoding="utf-8")
    return record


def launch(work: Path, what: str) -> str:
    """Appends one launch to ``work/launches.jsonl``; returns its time."""
    when = utc_now()
    with (Path(work) / LAUNCHES).open("a", encoding="utf-8") as handle:
        handle.write(json.dumps({"at": when, "what": what}) + "\n")
    return when


def provenance(work: Path) -> dict[str, Any]:
    """``plan_committed_at``, ``plan_commit``, ``first_launch_at`` and every launch of a work folder (None where
    not recorded: a folder from before the gate, or with the gate off)."""
    work = Path(work)
    gate = json.loads((work / GATE).read_text(encoding="utf-8")) if (work / GATE).is_file() else {}
    path = work / LAUNCHES
    launches = (
        [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
        if path.is_file()
        else []
    )
    return {
        "plan_gate": gate.get("gate"),
        "plan_commit": gate.get("plan_commit"),
        "plan_committed_at": gate.get("plan_committed_at"),
        "first_launch_at": min((x["at"] for x in launches), default=None),
        "launches": launches,
    }
