"""Hand-written meta-episodes with known outcomes, shared by the evaluation and viewer tests."""

from __future__ import annotations

from typing import Any

import pytest

from mr_search.eval.records import make_attempt, make_record
from mr_search.prompts import REFLECTION_PROMPT


def episode(
    uid: str, source: str, answers: list[str | None], gold: str = "Brimholt", method: str = "mr_search"
) -> dict[str, Any]:
    """A meta-episode whose attempt k searches once and answers ``answers[k]`` (None: no answer)."""
    attempts = []
    for k, answer in enumerate(answers):
        turns = []
        if k:
            turns.append({"role": "user", "content": REFLECTION_PROMPT})
        opener = f"My answer {answers[k - 1]} may be wrong; search the birthplace again. " if k else ""
        query = f"<think>need facts</think><search>Aldo Venn born {k}</search>"
        turns.append({"role": "assistant", "content": opener + query})
        turns.append(
            {
                "role": "tool",
                "content": f"\n\n<information>Doc 1(Title: Aldo Venn) Aldo Venn was born in "
                f"{gold} (try {k}).</information>\n\n",
            }
        )
        final = f"<answer>{answer}</answer>" if answer is not None else "I am not sure."
        turns.append({"role": "assistant", "content": final})
        attempts.append(make_attempt(k, turns, [gold], advantage=0.5 - k))
    return make_record(
        method=method,
        uid=uid,
        data_source=source,
        question=f"Where was Aldo Venn born? ({uid})",
        golden_answers=[gold],
        attempts=attempts,
    )


@pytest.fixture
def records() -> list[dict[str, Any]]:
    return [
        episode("q1", "embedded_1hop", ["Brimholt", "Brimholt"]),  # right, stays right
        episode("q2", "embedded_1hop", ["Kumholt", "brimholt!"]),  # improved after reflection
        episode("q3", "embedded_2hop", ["Kumholt", None]),  # wrong, then no answer
        episode("q4", "embedded_2hop", ["Brim holt", "Brimholt"]),  # improved; F1 0 -> 1
    ]
