"""The split names and the ledger of reads: a comparison's ``probed`` is true exactly when its test was seen."""

from __future__ import annotations

import json
from datetime import datetime, timezone
from pathlib import Path

import pytest

from mr_search_embedded.prepare import PIECES
from mr_search_embedded.reads import LEDGER, main, probed, read_ledger, reads_of, record_read
from mr_search_embedded.splits import SPLITS, check_split, same_questions


def _parquet(path: Path, content: bytes) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(content)
    return path


def test_every_split_has_a_builder_and_bad_names_are_refused() -> None:
    assert set(SPLITS) == {"train", "dev", "test"} and set(SPLITS) <= set(PIECES)
    with pytest.raises(ValueError, match="use one of train, dev, test"):
        check_split("heldout")


def test_a_fresh_test_split_is_not_probed_until_something_reads_it(tmp_path: Path) -> None:
    test = _parquet(tmp_path / "data" / "test.parquet", b"fresh draw")
    dev = _parquet(tmp_path / "data" / "dev.parquet", b"old held-out")
    record_read(dev, "dev", "probe", {"model": "m"})  # reads of dev say nothing about test
    state = probed(test, dev)
    assert not state.probed and state.reads == 0 and not state.dev_is_test
    when = datetime(2026, 1, 2, 3, 4, 5, tzinfo=timezone.utc)
    read = record_read(test, "test", "probe", {"model": "m", "questions": 30}, now=when)
    assert read.when == "2026-01-02T03:04:05Z" and read.sha256 == reads_of(test)[0].sha256
    state = probed(test, dev)
    assert state.probed and state.reads == 1 and "probe" in state.reason
    assert [r.split for r in read_ledger(test)] == ["dev", "test"], "one ledger next to the parquet, oldest first"
    assert (tmp_path / "data" / LEDGER).is_file()


def test_a_redrawn_split_at_the_same_path_is_unseen(tmp_path: Path) -> None:
    test = _parquet(tmp_path / "test.parquet", b"first draw")
    record_read(test, "test", "probe")
    _parquet(test, b"second draw")
    assert not probed(test).probed


def test_dev_standing_in_for_test_makes_it_probed(tmp_path: Path) -> None:
    test = _parquet(tmp_path / "a" / "test.parquet", b"held-out")
    copy = _parquet(tmp_path / "b" / "dev.parquet", b"held-out")
    assert same_questions(test, test) and same_questions(test, copy)
    state = probed(test, test)
    assert state.probed and state.dev_is_test and state.reads == 0
    assert "every earlier choice read dev" in state.reason


def test_a_comparison_does_not_probe_its_own_test_but_does_the_next_ones(tmp_path: Path) -> None:
    test = _parquet(tmp_path / "test.parquet", b"fresh")
    first, second = tmp_path / "run1", tmp_path / "run2"
    args = ["record", "--parquet", str(test), "--split", "test", "--reader", "comparison"]
    assert main([*args, "--work", str(first)]) == 0
    assert main([*args, "--work", str(first)]) == 0  # a continued run: still one line
    assert len(read_ledger(test)) == 1
    assert not probed(test, work=first).probed
    assert probed(test, work=second).probed, "a later comparison's choices may rest on the first one's result"


def test_the_cli_prints_the_state_and_names_a_broken_ledger(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    test = _parquet(tmp_path / "test.parquet", b"q")
    assert main(["probed", "--test", str(test)]) == 0
    assert json.loads(capsys.readouterr().out)["probed"] is False
    (tmp_path / LEDGER).write_text("not json\n")
    assert main(["probed", "--test", str(test)]) == 2
    assert f"{LEDGER}:1: not a read record" in capsys.readouterr().err
