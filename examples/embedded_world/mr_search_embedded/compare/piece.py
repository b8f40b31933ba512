"""A comparison's resumable state, packed to travel between machines (a GPU session that ends, the next one bare).

``pack`` writes one ``seed_<s>_<arm>.tar.xz`` a training run (its metrics, console log, launch times and its last
checkpoint only: model, optimizer and dataloader state, a few MB for the tiny policy) and ``work.tar.xz`` with the
work folder's own files (the plan, the gate and launch records, meta, budgets and evaluations). ``unpack`` puts them
into a work folder again, where compare.sh continues: verl resumes each run from its checkpoint. A work folder that
already holds another plan is refused: a continued run keeps the test it was started with.
"""

from __future__ import annotations

import json
import tarfile
from pathlib import Path
from typing import Final

from mr_search_embedded.compare.layout import PLAN_JSON, seed_dirs

WORK_ARCHIVE: Final = "work.tar.xz"
_WORK_FILES: Final = ("plan.json", "plan.md", "gate.json", "launches.jsonl", "meta.json")
_WORK_GLOBS: Final = ("warm_eval_*", "seed_*/budget_*.json", "seed_*/eval_*")
_TRACKER: Final = "latest_checkpointed_iteration.txt"


def _run_members(run: Path) -> list[Path]:
    """What a run needs to be resumed and reported: metrics, log, times, the tracker and the checkpoint it names."""
    members = [run / "metrics", run.parent / f"{run.name}.log", run.parent / f"{run.name}.times"]
    tracker = run / "checkpoints" / _TRACKER
    if tracker.is_file():
        step = tracker.read_text(encoding="utf-8").strip()
        members += [tracker, run / "checkpoints" / f"global_step_{step}"]
    return [m for m in members if m.exists()]


def pack(work: Path, out: Path) -> list[Path]:
    """Writes the archives of ``work`` into ``out``; returns their paths."""
    work, out = Path(work), Path(out)
    if not (work / PLAN_JSON).is_file():
        raise FileNotFoundError(f"{work}/{PLAN_JSON}: not a compare.sh work folder (no plan)")
    out.mkdir(parents=True, exist_ok=True)
    written = []
    for seed in seed_dirs(work):
        for run in sorted(p for p in seed.root.iterdir() if (p / "metrics").is_dir()):
            path = out / f"{seed.root.name}_{run.name}.tar.xz"
            with tarfile.open(path, "w:xz") as archive:
                for member in _run_members(run):
                    archive.add(member, arcname=str(member.relative_to(work)))
            written.append(path)
    path = out / WORK_ARCHIVE
    with tarfile.open(path, "w:xz") as archive:
        members = [work / name for name in _WORK_FILES if (work / name).exists()]
        members += sorted(p for pattern in _WORK_GLOBS for p in work.glob(pattern))
        for member in members:
            archive.add(member, arcname=str(member.relative_to(work)))
    written.append(path)
    return written


def unpack(pieces: Path, work: Path) -> list[str]:
    """Extracts every archive of ``pieces`` into ``work``; returns the runs restored (``seed_<s>/<arm>``)."""
    pieces, work = Path(pieces), Path(work)
    archives = sorted(pieces.glob("*.tar.xz"))
    if not (pieces / WORK_ARCHIVE).is_file():
        raise FileNotFoundError(f"{pieces}/{WORK_ARCHIVE}: no work archive; pack writes it beside the runs' archives")
    with tarfile.open(pieces / WORK_ARCHIVE, "r:xz") as archive:
        plan = archive.extractfile(PLAN_JSON)
        if plan is None:
            raise ValueError(f"{pieces}/{WORK_ARCHIVE} holds no {PLAN_JSON}")
        packed_plan = json.loads(plan.read())
    if (work / PLAN_JSON).is_file():
        here = json.loads((work / PLAN_JSON).read_text(encoding="utf-8"))
        if here != packed_plan:
            raise ValueError(
                f"{work}/{PLAN_JSON} is another plan than the one in {pieces}: unpack into an empty WORK_DIR"
            )
    work.mkdir(parents=True, exist_ok=True)
    for path in archives:
        with tarfile.open(path, "r:xz") as archive:
            archive.extractall(work, filter="data")  # refuses members outside the folder, links out of it
    return [
        f"{seed.root.name}/{run.name}"
        for seed in seed_dirs(work)
        for run in sorted(p for p in seed.root.iterdir() if (p / "checkpoints" / _TRACKER).is_file())
    ]
