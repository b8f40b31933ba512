"""A comparison's resumable state, packed to travel between machines (a GPU session that ends, the next one bare).

``pack`` writes one ``seed_<s>_<arm>.tar.xz`` a training run (its metrics, console log, launch times and its last
checkpoint only: model, optimizer and dataloader state, a few MB for the tiny policy) and ``work.tar.xz`` with the
work folder's own files (the plan, the gate and launch records, meta, budgets and evaluations). ``unpack`` puts them
into a work folder again, where compare.sh continues: verl resumes each run from its checkpoint. A work folder that
already holds another plan is refused: a continued run keeps the test it was started with.

``pack`` also works on runs that are still training, so a machine that goes back between two calls loses at most
the steps since the last pack: a run's archive holds the checkpoint its tracker names (verl writes the tracker after
the checkpoint is complete), read again if a newer save removes it mid-read; metrics files are cut after their last
whole line; and each archive is written under a temporary name and renamed, so a pack cut short leaves no half
archive under an archive's name.
"""

from __future__ import annotations

import io
import json
import os
import tarfile
from pathlib import Path
from typing import Final

from mr_search_embedded.compare.layout import PLAN_JSON, seed_dirs

WORK_ARCHIVE: Final = "work.tar.xz"
_WORK_FILES: Final = ("plan.json", "plan.md", "gate.json", "launches.jsonl", "meta.json")
_WORK_GLOBS: Final = ("warm_eval_*", "seed_*/budget_*.json", "seed_*/eval_*")
_TRACKER: Final = "latest_checkpointed_iteration.txt"
_TRIES: Final = 3  # a live run saves every few steps: a checkpoint removed mid-read is read again, this many times


def _run_members(run: Path) -> list[Path]:
    """What a run needs to be resumed and reported: metrics, log, times, the tracker and the checkpoint it names."""
    members = [run / "metrics", run.parent / f"{run.name}.log", run.parent / f"{run.name}.times"]
    tracker = run / "checkpoints" / _TRACKER
    if tracker.is_file():
        step = tracker.read_text(encoding="utf-8").strip()
        members += [tracker, run / "checkpoints" / f"global_step_{step}"]
    return [m for m in members if m.exists()]


def _add(archive: tarfile.TarFile, member: Path, work: Path) -> None:
    """Adds ``member``; a metrics file is cut after its last newline (a live run may be writing its last line)."""
    arcname = str(member.relative_to(work))
    if member.is_dir():
        archive.add(member, arcname=arcname, recursive=False)
        for child in sorted(member.iterdir()):
            _add(archive, child, work)
        return
    if member.parent.name == "metrics" and member.suffix == ".jsonl":
        data = member.read_bytes()
        data = data[: data.rfind(b"\n") + 1]
        info = tarfile.TarInfo(arcname)
        info.size, info.mtime, info.mode = len(data), int(member.stat().st_mtime), 0o644
        archive.addfile(info, io.BytesIO(data))
        return
    archive.add(member, arcname=arcname)


def _write(path: Path, members: list[Path], work: Path) -> None:
    """Writes the archive under a temporary name, then renames it into place; a failed write leaves nothing."""
    partial = path.with_name(path.name + ".partial")
    try:
        with tarfile.open(partial, "w:xz") as archive:
            for member in members:
                _add(archive, member, work)
    except BaseException:
        partial.unlink(missing_ok=True)
        raise
    os.replace(partial, path)


def _pack_run(run: Path, path: Path, work: Path) -> None:
    for attempt in range(_TRIES):
        try:
            _write(path, _run_members(run), work)
            return
        except FileNotFoundError:  # the named checkpoint went (a newer save replaced it): read the tracker again
            if attempt == _TRIES - 1:
                raise


def pack(work: Path, out: Path) -> list[Path]:
    """Writes the archives of ``work`` into ``out`` (its runs may still be training); returns their paths."""
    work, out = Path(work), Path(out)
    if not (work / PLAN_JSON).is_file():
        raise FileNotFoundError(f"{work}/{PLAN_JSON}: not a compare.sh work folder (no plan)")
    out.mkdir(parents=True, exist_ok=True)
    written = []
    for seed in seed_dirs(work):
        for run in sorted(p for p in seed.root.iterdir() if (p / "metrics").is_dir()):
            path = out / f"{seed.root.name}_{run.name}.tar.xz"
            _pack_run(run, path, work)
            written.append(path)
    path = out / WORK_ARCHIVE
    members = [work / name for name in _WORK_FILES if (work / name).exists()]
    members += sorted(p for pattern in _WORK_GLOBS for p in work.glob(pattern))
    _write(path, members, work)
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
