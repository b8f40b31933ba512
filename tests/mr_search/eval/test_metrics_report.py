"""EM/F1 per method, attempt and data source; results.md / results.json / em_by_attempt.png."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from mr_search.eval.metrics import order_sources, summarize
from mr_search.eval.records import improved_after_reflection, read_jsonl, reflection, searches, write_jsonl
from mr_search.eval.report import markdown_table, write_report
from mr_search.prompts import REFLECTION_PROMPT


def test_attempts_are_scored_from_their_last_answer(records: list[dict[str, Any]]) -> None:
    q2 = records[1]
    assert [a["answer"] for a in q2["attempts"]] == ["Kumholt", "brimholt!"]
    assert [a["em"] for a in q2["attempts"]] == [0.0, 1.0]  # normalised: case and punctuation
    assert records[2]["attempts"][1]["answer"] is None and records[2]["attempts"][1]["em"] == 0.0
    assert records[3]["attempts"][0]["f1"] == 0.0 and records[3]["attempts"][1]["f1"] == 1.0


def test_searches_and_reflections_are_read_from_turns(records: list[dict[str, Any]]) -> None:
    second = records[1]["attempts"][1]
    assert [s["query"] for s in searches(second)] == ["Aldo Venn born 1"]
    assert "Aldo Venn was born in Brimholt (try 1)" in searches(second)[0]["information"]
    expected = "My answer Kumholt may be wrong; search the birthplace again. <think>need facts</think>"
    assert reflection(second) == expected
    assert reflection(records[1]["attempts"][0]) == ""
    assert [improved_after_reflection(r) for r in records] == [False, True, False, True]


def test_summary_per_source_per_attempt(records: list[dict[str, Any]]) -> None:
    summary = summarize(records)
    assert summary["data_sources"] == ["embedded_1hop", "embedded_2hop"]
    first, second = summary["methods"]["mr_search"]["attempts"]
    assert first["em"] == {"embedded_1hop": 50.0, "embedded_2hop": 0.0, "average": 25.0}
    assert second["em"] == {"embedded_1hop": 100.0, "embedded_2hop": 50.0, "average": 75.0}
    assert second["n"] == {"embedded_1hop": 2, "embedded_2hop": 2}
    assert summary["methods"]["mr_search"]["reflection_gain_em"] == 50.0
    assert summary["methods"]["mr_search"]["improved_after_reflection"] == 2


def test_a_shorter_episode_keeps_its_last_answer_and_k_eval_extends(records: list[dict[str, Any]]) -> None:
    records[0]["attempts"] = records[0]["attempts"][:1]  # e.g. stopped early after a correct answer
    summary = summarize(records, attempts=3)
    rows = summary["methods"]["mr_search"]["attempts"]
    assert [r["attempt"] for r in rows] == [1, 2, 3]
    assert rows[2]["em"]["embedded_1hop"] == 100.0


def test_methods_get_their_own_rows(records: list[dict[str, Any]]) -> None:
    from_conftest = records[0]
    baseline = {**from_conftest, "method": "search_r1", "attempts": from_conftest["attempts"][:1]}
    table = markdown_table(summarize([*records, baseline]), "em")
    lines = table.splitlines()
    assert lines[0] == "| method | attempt | embedded_1hop | embedded_2hop | Avg |"
    assert "| mr_search | 2 | 100.0 | 50.0 | 75.0 |" in lines
    assert "| search_r1 | 1 | 100.0 | - | 100.0 |" in lines


def test_report_files(records: list[dict[str, Any]], tmp_path: Path) -> None:
    paths = write_report(summarize(records), tmp_path, meta={"model": "tiny", "K_eval": 2})
    md = paths["results.md"].read_text()
    assert "## Exact match (%)" in md and "## F1 (%)" in md and "- K_eval: 2" in md
    assert "EM gain attempt 2 - attempt 1: +50.0 points" in md
    data = json.loads(paths["results.json"].read_text())
    assert data["meta"]["model"] == "tiny"
    assert data["methods"]["mr_search"]["attempts"][1]["em"]["average"] == 75.0
    png = paths["em_by_attempt.png"].read_bytes()
    assert png[:8] == b"\x89PNG\r\n\x1a\n" and len(png) > 5000


def test_jsonl_round_trip_and_verl_dump(records: list[dict[str, Any]], tmp_path: Path) -> None:
    path = write_jsonl(records, tmp_path / "t.jsonl")
    assert list(read_jsonl(path)) == records
    dump = {
        "input": "user\nAnswer the given question...\nQuestion: Where was Aldo Venn born?\n\nassistant\n",
        "output": "<search>Aldo Venn</search>\n\n<information>Doc 1(Title: Aldo Venn) born in Brimholt"
        f"</information>\n\n<answer>Kumholt</answer>\nuser\n{REFLECTION_PROMPT}\nassistant\n"
        "Wrong city. <answer>Brimholt</answer>",
        "gts": {"target": ["Brimholt"]},
        "score": 1.0,
        "step": 3,
        "data_source": "nq",
    }
    (tmp_path / "3.jsonl").write_text(json.dumps(dump) + "\n")
    (record,) = read_jsonl(tmp_path / "3.jsonl")
    assert record["question"] == "Where was Aldo Venn born?" and record["data_source"] == "nq"
    assert [a["em"] for a in record["attempts"]] == [0.0, 1.0]
    assert searches(record["attempts"][0])[0]["information"] == "Doc 1(Title: Aldo Venn) born in Brimholt"
    assert record["attempts"][0]["turns"][-1]["content"].endswith("<answer>Kumholt</answer>")
    assert record["attempts"][1]["turns"][0] == {"role": "user", "content": REFLECTION_PROMPT}
    assert reflection(record["attempts"][1]) == "Wrong city."
    # The loop's own per-attempt scores win when the dump carries them (reward_extra_info columns).
    (tmp_path / "4.jsonl").write_text(json.dumps({**dump, "em_at_1": 1.0, "em_at_2": 0.0, "f1_at_1": 1.0}) + "\n")
    (scored,) = read_jsonl(tmp_path / "4.jsonl")
    assert [a["em"] for a in scored["attempts"]] == [1.0, 0.0] and scored["attempts"][0]["f1"] == 1.0
    (tmp_path / "bad.jsonl").write_text('{"foo": 1}\n')
    with pytest.raises(ValueError, match=r"bad\.jsonl:1: neither a trajectory record"):
        list(read_jsonl(tmp_path / "bad.jsonl"))


def test_columns_follow_the_papers_order() -> None:
    sources = ["musique", "zeta", "nq", "bamboogle", "2wikimultihopqa", "alpha", "nq", "triviaqa"]
    assert order_sources(sources) == ["nq", "triviaqa", "2wikimultihopqa", "musique", "bamboogle", "zeta", "alpha"]
