"""FlashRAG-format question sets -> verl parquet: NQ+HotpotQA train, seven test sets, ASearcher."""

from __future__ import annotations

import json
import logging
import random
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from mr_search.data.rows import make_row, write_parquet

logger = logging.getLogger(__name__)

TRAIN_SETS: Final = ("nq", "hotpotqa")
TEST_SETS: Final = ("nq", "triviaqa", "popqa", "hotpotqa", "2wikimultihopqa", "musique", "bamboogle")
TEST_SPLIT_ORDER: Final = ("test", "dev", "train")
# Validation questions per test set: the whole ~51k would cost ~160 paper steps a pass; 200 a set costs ~4.
VAL_PER_SOURCE: Final = 200
# Keys that other releases use for the gold answers (ASearcher's data has "answer").
_ANSWER_KEYS: Final = ("golden_answers", "answers", "answer")


class DataFormatError(ValueError):
    """A question file is missing or malformed; the message names the file and line."""


@dataclass(frozen=True)
class QuestionRecord:
    id: str
    question: str
    golden_answers: tuple[str, ...]


def _answers(raw: dict[str, Any], where: str) -> tuple[str, ...]:
    for key in _ANSWER_KEYS:
        if key in raw:
            value = raw[key]
            if isinstance(value, str):
                value = [value]
            if not isinstance(value, list) or not all(isinstance(v, (str, int, float)) for v in value):
                raise DataFormatError(f"{where}: {key!r} must be a string or a list of strings, got {value!r}")
            answers = tuple(str(v).strip() for v in value if str(v).strip())
            if not answers:
                raise DataFormatError(f"{where}: {key!r} holds no non-empty answer")
            return answers
    raise DataFormatError(f"{where}: no gold answers; expected one of the keys {list(_ANSWER_KEYS)}")


def read_questions(path: Path, *, progress: bool = False) -> Iterator[QuestionRecord]:
    """Yields the questions of a JSON-lines file; raises ``DataFormatError`` naming the file and line."""
    path = Path(path)
    if not path.is_file():
        raise DataFormatError(f"{path}: no such file; expected FlashRAG JSON lines {{id, question, golden_answers}}")
    from tqdm.auto import tqdm

    with path.open(encoding="utf-8") as handle:
        for lineno, line in enumerate(tqdm(handle, desc=path.name, unit=" q", disable=not progress), start=1):
            if not line.strip():
                continue
            where = f"{path}:{lineno}"
            try:
                raw = json.loads(line)
            except json.JSONDecodeError as err:
                raise DataFormatError(f"{where}: not valid JSON ({err.msg} at column {err.colno})") from err
            if not isinstance(raw, dict):
                raise DataFormatError(f"{where}: expected a JSON object, got {type(raw).__name__}")
            question = raw.get("question")
            if not isinstance(question, str) or not question.strip():
                raise DataFormatError(f"{where}: 'question' must be a non-empty string, got {question!r}")
            yield QuestionRecord(str(raw.get("id", lineno - 1)), question.strip(), _answers(raw, where))


def find_split(root: Path, dataset: str, order: Sequence[str] = TEST_SPLIT_ORDER) -> tuple[str, Path]:
    """The first split of ``order`` that exists for ``dataset`` under ``root``, with its path."""
    candidates = [Path(root) / dataset / f"{split}.jsonl" for split in order]
    for split, path in zip(order, candidates, strict=True):
        if path.is_file():
            return split, path
    listed = ", ".join(str(p) for p in candidates)
    raise DataFormatError(f"dataset {dataset!r}: none of {listed} exists; download FlashRAG's {dataset} into {root}")


def _rows(records: Sequence[QuestionRecord], data_source: str, split: str) -> list[dict[str, Any]]:
    return [
        make_row(
            question=r.question,
            golden_answers=r.golden_answers,
            data_source=data_source,
            index=i,
            split=split,
            extra={"id": r.id},
        )
        for i, r in enumerate(records)
    ]


def convert_flashrag(
    root: Path,
    out_dir: Path,
    *,
    train_sets: Sequence[str] = TRAIN_SETS,
    test_sets: Sequence[str] = TEST_SETS,
    progress: bool = True,
    val_per_source: int = VAL_PER_SOURCE,
    seed: int = 0,
) -> tuple[Path, Path]:
    """Writes ``train.parquet``, ``test.parquet`` and ``val.parquet`` (a seeded sample of each test set)."""
    if val_per_source < 1:
        raise ValueError(f"val_per_source={val_per_source!r}: must be >= 1 (questions per test set in val.parquet)")
    train_rows: list[dict[str, Any]] = []
    for name in train_sets:
        path = Path(root) / name / "train.jsonl"
        if not path.is_file():
            raise DataFormatError(f"dataset {name!r}: {path} does not exist; training needs its train split")
        train_rows += _rows(list(read_questions(path, progress=progress)), name, "train")
    test_rows: list[dict[str, Any]] = []
    val_rows: list[dict[str, Any]] = []
    for name in test_sets:
        split, path = find_split(root, name)
        logger.info("test set %s: using the %s split (%s)", name, split, path)
        rows = _rows(list(read_questions(path, progress=progress)), name, "test")
        test_rows += rows
        keep = sorted(random.Random(f"{seed}:{name}").sample(range(len(rows)), min(val_per_source, len(rows))))
        val_rows += [rows[i] for i in keep]
    out_dir = Path(out_dir)
    write_parquet(val_rows, out_dir / "val.parquet")
    return write_parquet(train_rows, out_dir / "train.parquet"), write_parquet(test_rows, out_dir / "test.parquet")


def convert_asearcher(
    path: Path,
    out_dir: Path,
    *,
    seed: int = 0,
    test_fraction: float = 0.1,
    data_source: str = "asearcher",
    progress: bool = True,
) -> tuple[Path, Path]:
    """Splits ASearcher's questions 90/10 with a seeded shuffle; writes ``asearcher_{train,test}.parquet``."""
    if not 0.0 < test_fraction < 1.0:
        raise ValueError(f"test_fraction={test_fraction!r}: must be in (0, 1)")
    records = list(read_questions(Path(path), progress=progress))
    if len(records) < 2:
        raise DataFormatError(f"{path}: {len(records)} question(s); a train/test split needs at least 2")
    order = list(range(len(records)))
    random.Random(seed).shuffle(order)
    n_test = min(len(records) - 1, max(1, round(test_fraction * len(records))))
    test = [records[i] for i in sorted(order[:n_test])]
    train = [records[i] for i in sorted(order[n_test:])]
    out_dir = Path(out_dir)
    return (
        write_parquet(_rows(train, data_source, "train"), out_dir / f"{data_source}_train.parquet"),
        write_parquet(_rows(test, data_source, "test"), out_dir / f"{data_source}_test.parquet"),
    )
