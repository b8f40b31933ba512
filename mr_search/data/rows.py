"""One question -> one verl RL row (the layout every MR-Search dataset uses), and parquet writing."""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Final

from mr_search.prompts import question_prompt

ABILITY: Final = "fact-reasoning"
AGENT_NAME: Final = "mr_search"
COLUMNS: Final = ("data_source", "prompt", "ability", "reward_model", "extra_info", "agent_name")


def make_row(
    *,
    question: str,
    golden_answers: Sequence[str],
    data_source: str,
    index: int,
    split: str,
    gold_doc_ids: Sequence[str] = (),
    extra: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """The verl row of one question (chat prompt, golds for the reward, raw fields for evaluation)."""
    answers = [str(a) for a in golden_answers if str(a).strip()]
    if not answers:
        raise ValueError(f"question {question!r} ({data_source}, index {index}) has no non-empty golden answer")
    extra_info: dict[str, Any] = {
        "index": index,
        "split": split,
        "question": question,
        "golden_answers": answers,
        "gold_doc_ids": [str(d) for d in gold_doc_ids],
    }
    if extra:
        extra_info.update(extra)
    return {
        "data_source": data_source,
        "prompt": [{"role": "user", "content": question_prompt(question)}],
        "ability": ABILITY,
        "reward_model": {"style": "rule", "ground_truth": {"target": answers}},
        "extra_info": extra_info,
        "agent_name": AGENT_NAME,
    }


def write_parquet(rows: Sequence[Mapping[str, Any]], path: Path) -> Path:
    """Writes ``rows`` to ``path`` atomically (a reader never sees a half-written file)."""
    import pandas as pd

    if not rows:
        raise ValueError(f"no rows to write to {path}: the input held no questions")
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    pd.DataFrame(list(rows), columns=list(COLUMNS)).to_parquet(tmp, index=False)
    os.replace(tmp, path)
    return path
