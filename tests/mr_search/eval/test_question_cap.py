"""Per-source question counts: parsed, applied to rows in file order, recorded and refused with a fix."""

from __future__ import annotations

import pytest

from mr_search.eval.question_cap import QuestionCap, limit_of, parse_max_questions, recorded
from mr_search.eval.runner import EvalConfig, select_rows


def _rows(counts: dict[str, int]) -> list[dict]:
    return [
        {"data_source": source, "extra_info": {"id": f"{source}-{i}"}} for source, n in counts.items() for i in range(n)
    ]


def test_a_plain_number_stays_a_number_and_a_spec_becomes_a_cap() -> None:
    assert parse_max_questions("40") == 40
    cap = parse_max_questions(" 100, embedded_3hop=217 ")
    assert cap == QuestionCap(100, {"embedded_3hop": 217})
    assert cap.spec() == "100,embedded_3hop=217" and parse_max_questions(cap.spec()) == cap
    only = parse_max_questions("embedded_3hop=5")
    assert isinstance(only, QuestionCap) and only.default is None and only.limit("embedded_1hop") is None
    assert (limit_of(cap, "embedded_3hop"), limit_of(cap, "embedded_1hop"), limit_of(7, "x"), limit_of(None, "x")) == (
        217,
        100,
        7,
        None,
    )
    assert recorded(40) == 40 and recorded(None) is None and recorded(cap) == "100,embedded_3hop=217"


@pytest.mark.parametrize("bad", ["", "0", "-3", "x", "a=0", "=5", "10,20", "a=1,a=2", "a=b"])
def test_bad_specs_name_the_fix(bad: str) -> None:
    with pytest.raises(ValueError, match=r"e\.g\. 100,embedded_3hop=217"):
        parse_max_questions(bad)


def test_select_rows_takes_each_sources_own_count_in_file_order() -> None:
    rows = _rows({"embedded_1hop": 5, "embedded_2hop": 4, "embedded_3hop": 6})
    chosen = select_rows(rows, parse_max_questions("2,embedded_3hop=5"))
    ids = [r["extra_info"]["id"] for r in chosen]
    assert ids == [f"embedded_1hop-{i}" for i in range(2)] + [f"embedded_2hop-{i}" for i in range(2)] + [
        f"embedded_3hop-{i}" for i in range(5)
    ]
    # A source named with more than it holds gives all of its rows; a cap with no default leaves the others whole.
    assert len(select_rows(rows, parse_max_questions("embedded_3hop=50"))) == 15


def test_eval_config_takes_a_cap_and_refuses_nonsense() -> None:
    assert EvalConfig(max_questions=QuestionCap(1, {"a": 2})).max_questions.limit("a") == 2
    with pytest.raises(ValueError, match="max_questions"):
        EvalConfig(max_questions="40")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="whole numbers"):
        QuestionCap(0, {"a": 2})
