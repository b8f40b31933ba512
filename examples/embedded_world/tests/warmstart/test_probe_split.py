"""The probe reads dev by default, refuses test without its flag, and says what it read (JSON and the ledger)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from mr_search_embedded.reads import read_ledger
from mr_search_embedded.warmstart import probe


@pytest.fixture
def fake_probe(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict:
    """The probe's CLI over fake splits (one file each) and a fake agent run; returns what the run was given."""
    files = {}
    for split in ("train", "dev", "test"):
        files[split] = tmp_path / "data" / f"{split}.parquet"
        files[split].parent.mkdir(parents=True, exist_ok=True)
        files[split].write_bytes(split.encode())
    seen: dict = {}

    def run(model, questions, samples, attempts, url, outcome_feedback=False, parquet=None):
        seen.update(model=model, parquet=parquet)
        return {"greedy_em_at_k": [50.0]}, []

    monkeypatch.setattr(probe, "split_parquet", lambda split: files[split])
    monkeypatch.setattr(probe, "probe", run)
    return {"files": files, "seen": seen, "model": tmp_path / "model"}


def test_dev_is_the_default_and_the_json_says_what_was_read(fake_probe, capsys) -> None:
    probe.main(["--model", str(fake_probe["model"]), "--samples", "0"])
    out = json.loads(capsys.readouterr().out)
    assert out["split"] == "dev" and out["parquet"] == str(fake_probe["files"]["dev"])
    assert out["greedy_em_at_k"] == [50.0]
    assert fake_probe["seen"]["parquet"] == fake_probe["files"]["dev"]
    (read,) = read_ledger(fake_probe["files"]["dev"])
    assert (read.split, read.reader, read.detail["questions"]) == ("dev", "probe", 50)


def test_test_is_refused_without_the_flag_and_nothing_is_read(fake_probe, capsys) -> None:
    with pytest.raises(SystemExit):
        probe.main(["--model", str(fake_probe["model"]), "--split", "test"])
    assert probe.TEST_FLAG in capsys.readouterr().err
    assert fake_probe["seen"] == {} and read_ledger(fake_probe["files"]["test"]) == []


def test_test_with_the_flag_is_read_and_recorded(fake_probe, capsys) -> None:
    probe.main(["--model", str(fake_probe["model"]), "--split", "test", probe.TEST_FLAG, "--questions", "7"])
    assert json.loads(capsys.readouterr().out)["split"] == "test"
    (read,) = read_ledger(fake_probe["files"]["test"])
    assert read.split == "test" and read.detail == {"model": str(fake_probe["model"]), "questions": 7}
