"""A work folder's resumable state packed and unpacked: the last checkpoint of each run, its metrics, the plan."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from mr_search_embedded.compare.__main__ import main
from mr_search_embedded.compare.piece import WORK_ARCHIVE, pack, unpack


def _work(root: Path, plan: dict) -> Path:
    (root / "plan.json").parent.mkdir(parents=True, exist_ok=True)
    (root / "plan.json").write_text(json.dumps(plan))
    (root / "launches.jsonl").write_text('{"at": "2026-12-06T22:33:14Z", "what": "train"}\n')
    for arm in ("mr_search", "k1"):
        run = root / "seed_1" / arm
        (run / "metrics").mkdir(parents=True)
        (run / "metrics" / "1.jsonl").write_text('{"step": 1, "data": {}}\n')
        for step in (5, 10):
            (run / "checkpoints" / f"global_step_{step}" / "actor").mkdir(parents=True)
            (run / "checkpoints" / f"global_step_{step}" / "actor" / "model.pt").write_bytes(b"w" * step)
        (run / "checkpoints" / "latest_checkpointed_iteration.txt").write_text("10")
        (root / "seed_1" / f"{arm}.log").write_text("console\n")
    (root / "warm_eval_3x3").mkdir()
    (root / "warm_eval_3x3" / "results.json").write_text("{}")
    return root


def test_pack_keeps_the_last_checkpoint_and_unpack_restores_a_resumable_folder(tmp_path: Path) -> None:
    work = _work(tmp_path / "work", {"seeds": [1]})
    written = pack(work, tmp_path / "pieces")
    assert sorted(p.name for p in written) == ["seed_1_k1.tar.xz", "seed_1_mr_search.tar.xz", WORK_ARCHIVE]
    again = tmp_path / "again"
    assert unpack(tmp_path / "pieces", again) == ["seed_1/k1", "seed_1/mr_search"]
    run = again / "seed_1" / "mr_search"
    assert (run / "checkpoints" / "global_step_10" / "actor" / "model.pt").read_bytes() == b"w" * 10
    assert not (run / "checkpoints" / "global_step_5").exists(), "only the checkpoint the tracker names travels"
    assert (run / "metrics" / "1.jsonl").is_file() and (again / "seed_1" / "mr_search.log").is_file()
    assert json.loads((again / "plan.json").read_text()) == {"seeds": [1]}
    assert (again / "launches.jsonl").is_file() and (again / "warm_eval_3x3" / "results.json").is_file()


def test_unpack_refuses_a_folder_with_another_plan(tmp_path: Path) -> None:
    pack(_work(tmp_path / "work", {"seeds": [1]}), tmp_path / "pieces")
    other = tmp_path / "other"
    other.mkdir()
    (other / "plan.json").write_text(json.dumps({"seeds": [2]}))
    with pytest.raises(ValueError, match="another plan than the one in"):
        unpack(tmp_path / "pieces", other)
    assert main(["piece-unpack", "--pieces", str(tmp_path / "pieces"), "--work", str(other)]) != 0
    assert main(["piece-pack", "--work", str(tmp_path / "nowhere"), "--out", str(tmp_path / "x")]) != 0


def test_pack_of_a_live_run_keeps_whole_metric_lines_and_leaves_the_run_as_it_was(tmp_path: Path) -> None:
    work = _work(tmp_path / "work", {"seeds": [1]})
    metrics = work / "seed_1" / "mr_search" / "metrics" / "1.jsonl"
    metrics.write_text('{"step": 1, "data": {}}\n{"step": 2, "da')  # the trainer is writing step 2's line
    pack(work, tmp_path / "pieces")
    assert metrics.read_text().endswith('"da'), "the live run's own file is not touched"
    unpack(tmp_path / "pieces", tmp_path / "again")
    packed = (tmp_path / "again" / "seed_1" / "mr_search" / "metrics" / "1.jsonl").read_text()
    assert packed == '{"step": 1, "data": {}}\n'
    assert not list((tmp_path / "pieces").glob("*.partial")), "no temporary archive is left behind"


def test_pack_reads_the_tracker_again_when_a_newer_save_removes_the_checkpoint_mid_read(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import shutil

    from mr_search_embedded.compare import piece

    work = _work(tmp_path / "work", {"seeds": [1]})
    checkpoints = work / "seed_1" / "mr_search" / "checkpoints"
    real_add, saved = piece._add, []

    def a_save_lands_while_step_10_is_read(archive, member, root):  # verl saves step 15, then drops step 10
        if member.name == "global_step_10" and "mr_search" in str(member) and not saved:
            (checkpoints / "global_step_15" / "actor").mkdir(parents=True)
            (checkpoints / "global_step_15" / "actor" / "model.pt").write_bytes(b"w" * 15)
            (checkpoints / "latest_checkpointed_iteration.txt").write_text("15")
            shutil.rmtree(member)
            saved.append(15)
        real_add(archive, member, root)

    monkeypatch.setattr(piece, "_add", a_save_lands_while_step_10_is_read)
    pack(work, tmp_path / "pieces")
    assert saved == [15]
    unpack(tmp_path / "pieces", tmp_path / "again")
    restored = tmp_path / "again" / "seed_1" / "mr_search" / "checkpoints"
    assert (restored / "latest_checkpointed_iteration.txt").read_text() == "15"
    assert (restored / "global_step_15" / "actor" / "model.pt").read_bytes() == b"w" * 15
    assert not (restored / "global_step_10").exists()
