"""The comparison's retry counts: fixes and breaks per model, seed and data source, read from the trajectories."""

from __future__ import annotations

import json
from pathlib import Path

from mr_search.eval.records import make_attempt, make_record
from mr_search_embedded.compare.arms import K1 as BASELINE
from mr_search_embedded.compare.arms import K1_ALL_TURNS, MR, WARM
from mr_search_embedded.compare.retries import count_retries, retry_table


def _episode(method: str, uid: str, source: str, ems: list[float], queries: list[str]) -> dict:
    attempts = []
    for index, (em, query) in enumerate(zip(ems, queries, strict=True)):
        turns = [
            {"role": "assistant", "content": f"<search> {query} </search>"},
            {"role": "tool", "content": "<information>Doc 1(Title: x) y</information>"},
        ]
        attempts.append(make_attempt(index, turns, ["gold"], scored={"answer": "a", "reward": em, "em": em, "f1": em}))
    return make_record(
        method=method, uid=uid, data_source=source, question="q", golden_answers=["gold"], attempts=attempts
    )


def _write(path: Path, records: list[dict]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r) + "\n" for r in records))


def test_retries_are_counted_per_model_seed_and_source(tmp_path: Path) -> None:
    ns = "embedded_namesake"
    seed_1 = tmp_path / "seed_1" / "eval_3x3" / "trajectories.jsonl"
    _write(
        seed_1,
        [
            _episode(MR, "1", ns, [0, 1, 1], ["Aldo Venn", "Drelo Kam", "Drelo Kam"]),  # fixed at 2 by a new search
            _episode(MR, "2", ns, [0, 0, 1], ["Aldo Venn", "Aldo Venn", "Drelo Kam"]),  # fixed only at 3
            _episode(MR, "3", "embedded_1hop", [1, 1, 0], ["Kumholt", "Kumholt", "Kumholt"]),  # broken at 3
            _episode(BASELINE, "1", ns, [0, 0, 0], ["Aldo Venn", "Aldo Venn", "Aldo Venn"]),
        ],
    )
    one_attempt = tmp_path / "seed_1" / "eval_1x9" / "trajectories.jsonl"
    _write(one_attempt, [_episode(K1_ALL_TURNS, "1", ns, [1], ["Aldo Venn"])])
    warm = tmp_path / "warm_eval_3x3" / "trajectories.jsonl"
    _write(warm, [_episode(WARM, "1", ns, [1, 1, 1], ["a", "a", "a"])])
    evaluations = [
        (None, warm, [WARM]),
        (1, seed_1, [MR, BASELINE]),
        (1, one_attempt, [K1_ALL_TURNS]),
        (2, tmp_path / "seed_2" / "eval_3x3" / "trajectories.jsonl", [MR, BASELINE]),
    ]
    rows = count_retries(evaluations, [2, 3])
    mr = {r["attempts"]: r["outcomes"] for r in rows if r["model"] == MR and r["seed"] == 1}
    assert mr[2][ns] == {
        "wrong_first": 2,
        "searched_differently": 50.0,
        "searched_differently_n": 1,
        "fixed": 50.0,
        "fixed_n": 1,
        "right_first": 0,
        "broken": None,
        "broken_n": 0,
    }
    assert mr[3][ns]["fixed_n"] == 2 and mr[3][ns]["searched_differently_n"] == 2
    assert mr[2]["all"]["broken_n"] == 0 and mr[3]["all"]["broken_n"] == 1
    base = {r["attempts"]: r["outcomes"] for r in rows if r["model"] == BASELINE and r["seed"] == 1}
    assert base[3]["all"]["fixed_n"] == 0 and base[3]["all"]["searched_differently_n"] == 0
    assert {(r["model"], r["seed"]) for r in rows} == {(MR, 1), (BASELINE, 1), (WARM, None)}, (
        "seed 2 has no file; one attempt has no retry to count"
    )
    table = retry_table(rows, {MR: "MR-Search K=3"}, [ns])
    assert "| MR-Search K=3 | 1 | embedded_namesake | 2 | 2 | 1 | 2 | 0 | 0 | 0 |" in table
    assert "| warm_start | - | all | 0 | 0 | 0 | 0 | 1 | 0 | 0 |" in table
