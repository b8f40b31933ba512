"""FlashRAG / ASearcher JSON lines -> verl parquet, on fixture files written here."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

from mr_search.data.flashrag import TEST_SETS, DataFormatError, convert_asearcher, convert_flashrag, read_questions


def _write(path: Path, rows: list[dict]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def _qs(name: str, split: str, n: int = 3) -> list[dict]:
    return [
        {
            "id": f"{split}_{i}",
            "question": f"{name} {split} question {i}?",
            "golden_answers": [f"{name}-{i}"],
            "metadata": {},
        }
        for i in range(n)
    ]


@pytest.fixture
def flashrag_root(tmp_path: Path) -> Path:
    root = tmp_path / "flashrag"
    for name in ("nq", "hotpotqa"):
        _write(root / name / "train.jsonl", _qs(name, "train", 4))
        _write(root / name / "dev.jsonl", _qs(name, "dev"))
    _write(root / "nq" / "test.jsonl", _qs("nq", "test"))
    for name in ("triviaqa", "popqa", "2wikimultihopqa", "musique"):
        _write(root / name / "dev.jsonl", _qs(name, "dev"))
    _write(root / "bamboogle" / "test.jsonl", _qs("bamboogle", "test", 2))
    _write(root / "popqa" / "test.jsonl", _qs("popqa", "test", 2))
    return root


def test_train_is_nq_plus_hotpotqa_and_test_prefers_test_then_dev(flashrag_root: Path, tmp_path: Path) -> None:
    train, test = convert_flashrag(flashrag_root, tmp_path / "out", progress=False)
    tr, te = pd.read_parquet(train), pd.read_parquet(test)
    assert list(tr["data_source"]) == ["nq"] * 4 + ["hotpotqa"] * 4
    assert set(te["data_source"]) == set(TEST_SETS)
    splits = {
        source: {q.split()[1] for q in group}
        for source, group in te.groupby("data_source")["extra_info"].apply(lambda s: [i["question"] for i in s]).items()
    }
    assert splits["nq"] == {"test"} and splits["popqa"] == {"test"} and splits["hotpotqa"] == {"dev"}
    assert splits["triviaqa"] == {"dev"} and splits["bamboogle"] == {"test"}
    first = tr.iloc[0]
    assert list(first["reward_model"]["ground_truth"]["target"]) == ["nq-0"]
    assert "nq train question 0?" in first["prompt"][0]["content"]
    assert first["extra_info"]["id"] == "train_0" and first["agent_name"] == "mr_search"


def test_a_missing_test_set_names_the_paths_it_tried(flashrag_root: Path, tmp_path: Path) -> None:
    with pytest.raises(DataFormatError, match=r"'webq'.*webq/test\.jsonl.*webq/dev\.jsonl"):
        convert_flashrag(flashrag_root, tmp_path / "out", test_sets=["webq"], progress=False)


def test_a_missing_train_split_is_a_clear_error(flashrag_root: Path, tmp_path: Path) -> None:
    with pytest.raises(DataFormatError, match=r"musique.*train\.jsonl does not exist"):
        convert_flashrag(flashrag_root, tmp_path / "out", train_sets=["musique"], progress=False)


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ("{not json", "not valid JSON"),
        ('["a list"]', "expected a JSON object"),
        ('{"golden_answers": ["x"]}', "'question' must be a non-empty string"),
        ('{"question": "q?"}', "no gold answers"),
        ('{"question": "q?", "golden_answers": []}', "holds no non-empty answer"),
        ('{"question": "q?", "golden_answers": {"a": 1}}', "must be a string or a list of strings"),
    ],
)
def test_malformed_lines_name_the_file_and_line(tmp_path: Path, line: str, message: str) -> None:
    path = tmp_path / "bad.jsonl"
    path.write_text(json.dumps({"question": "fine?", "golden_answers": ["ok"]}) + "\n" + line + "\n")
    with pytest.raises(DataFormatError, match=rf"bad\.jsonl:2: .*{message}"):
        list(read_questions(path))


def test_asearcher_split_is_seeded_disjoint_and_90_10(tmp_path: Path) -> None:
    rows = [{"question": f"question {i}?", "answer": f"answer {i}"} for i in range(50)]
    src = _write(tmp_path / "asearcher.jsonl", rows)
    train, test = convert_asearcher(src, tmp_path / "a", seed=7, progress=False)
    tr, te = pd.read_parquet(train), pd.read_parquet(test)
    assert (len(tr), len(te)) == (45, 5)
    questions = lambda frame: [i["question"] for i in frame["extra_info"]]  # noqa: E731
    assert not set(questions(tr)) & set(questions(te))
    assert set(te["data_source"]) == {"asearcher"}
    _, again_test = convert_asearcher(src, tmp_path / "b", seed=7, progress=False)
    assert questions(pd.read_parquet(again_test)) == questions(te)
    _, other = convert_asearcher(src, tmp_path / "c", seed=8, progress=False)
    assert questions(pd.read_parquet(other)) != questions(te)


def test_missing_input_file_is_named(tmp_path: Path) -> None:
    with pytest.raises(DataFormatError, match=r"nope\.jsonl: no such file"):
        convert_asearcher(tmp_path / "nope.jsonl", tmp_path / "out", progress=False)


def test_val_parquet_caps_each_test_set_with_a_seeded_sample(flashrag_root: Path, tmp_path: Path) -> None:
    """Validation during training is bounded per data source; test.parquet keeps every question."""
    _, test = convert_flashrag(flashrag_root, tmp_path / "a", progress=False, val_per_source=2)
    val = pd.read_parquet(tmp_path / "a" / "val.parquet")
    full = pd.read_parquet(test)
    assert val.groupby("data_source").size().to_dict() == {s: 2 for s in TEST_SETS}
    assert len(full) > len(val)
    questions = {i["question"] for i in full["extra_info"]}
    assert all(i["question"] in questions for i in val["extra_info"])  # a subset, not new rows
    convert_flashrag(flashrag_root, tmp_path / "b", progress=False, val_per_source=2)
    again = pd.read_parquet(tmp_path / "b" / "val.parquet")
    assert [i["question"] for i in again["extra_info"]] == [i["question"] for i in val["extra_info"]]  # seeded
    with pytest.raises(ValueError, match="val_per_source"):
        convert_flashrag(flashrag_root, tmp_path / "c", progress=False, val_per_source=0)
