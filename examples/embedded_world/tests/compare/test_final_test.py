"""The final-answer test from synthetic evaluation outputs: per-question EM, the figures, the margin, the rule."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from mr_search.data.rows import make_row, write_parquet
from mr_search.eval.metrics import summarize
from mr_search.eval.records import make_attempt, make_record
from mr_search_embedded.compare.arms import ARM_NAMES, build_arms
from mr_search_embedded.compare.final_test import (
    ArmScores,
    attempt_em,
    final_answer_test,
    load_scores,
    question_em,
    question_kinds,
)
from mr_search_embedded.compare.layout import SeedDirs

ARMS = {a.name: a for a in build_arms(ARM_NAMES, attempts=3, turns=3)}
SPLIT = {"split": "test", "parquet": "/t/test.parquet", "probed": False, "reason": "no earlier read"}


def _record(method: str, uid: str, ems: list[float], source: str = "embedded_1hop") -> dict:
    attempts = [
        make_attempt(i, [], ["g"], scored={"answer": "a", "reward": e, "em": e, "f1": e}) for i, e in enumerate(ems)
    ]
    return make_record(
        method=method, uid=uid, data_source=source, question="q", golden_answers=["g"], attempts=attempts
    )


def _write(path: Path, records: list[dict]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    return path


def _scores(name: str, em: list) -> ArmScores:
    """``em``: [seed][question][attempt] in 0/1."""
    array = np.array(em, dtype=np.float64) * 100.0
    return ArmScores(
        ARMS[name], tuple(range(1, array.shape[0] + 1)), tuple(f"q{i}" for i in range(array.shape[1])), array
    )


def test_per_question_em_keeps_the_last_answer_as_the_evaluation_does(tmp_path: Path) -> None:
    records = [
        _record("m", "a", [0, 1]),
        _record("m", "b", [1]),
        _record("m", "c", []),
        _record("other", "a", [1, 1, 1]),
    ]
    path = _write(tmp_path / "trajectories.jsonl", records)
    ems = question_em(path, "m", 3)
    assert ems == {"a": [0.0, 1.0, 1.0], "b": [1.0, 1.0, 1.0], "c": [0.0, 0.0, 0.0]}
    table = summarize(records[:3], attempts=3)["methods"]["m"]["attempts"]
    for k in range(3):  # the same EM per attempt as results.json (one data source here)
        assert table[k]["em"]["embedded_1hop"] == pytest.approx(100 * sum(e[k] for e in ems.values()) / 3)
    assert attempt_em({"attempts": []}, 2) == 0.0
    with pytest.raises(ValueError, match="no trajectory of 'missing'"):
        question_em(path, "missing", 3)
    _write(tmp_path / "twice.jsonl", [_record("m", "a", [1]), _record("m", "a", [0])])
    with pytest.raises(ValueError, match="evaluated twice"):
        question_em(tmp_path / "twice.jsonl", "m", 1)


def test_the_test_by_hand() -> None:
    # 4 questions, 2 seeds. MR-Search at attempt 3: q0 right twice, q1 once, q2 twice, q3 never -> 62.5.
    mr = [
        [[0, 0, 1], [1, 1, 1], [0, 1, 1], [0, 0, 0]],
        [[1, 1, 1], [0, 0, 0], [1, 1, 1], [0, 0, 0]],
    ]
    # K = 1 with 3 attempts in context: attempt 1 is its best (50.0), later retries break answers.
    k1 = [
        [[1, 0, 0], [1, 1, 0], [0, 0, 0], [0, 0, 0]],
        [[1, 1, 0], [0, 0, 0], [1, 0, 0], [0, 0, 0]],
    ]
    test = final_answer_test({"mr_search": _scores("mr_search", mr), "k1": _scores("k1", k1)}, {}, SPLIT, 2_000)
    assert test["k"] == 3
    assert test["mr_search"] == pytest.approx(62.5)
    assert (test["baseline_best"], test["baseline_best_k"]) == (pytest.approx(50.0), 1)
    assert test["margin"] == pytest.approx(12.5)
    low, high = test["ci95"]
    assert low <= 12.5 <= high
    assert test["questions"] == 4 and test["seeds"] == [1, 2]
    assert test["trajectories"] == {"mr_search": 8, "k1": 8}
    assert test["met"] == (low > 0), "a margin >= 0: met exactly when the interval's low end is above 0"
    assert (test["split"], test["probed"]) == ("test", False)
    assert test["bootstrap"]["resamples"] == 2_000 and test["bootstrap"]["best_k_rechosen_per_resample"]
    assert test["by_hops"] == {
        "unknown": {
            "questions": 4,
            "mr_search": pytest.approx(62.5),
            "baseline_best": pytest.approx(50.0),
            "baseline_best_k": 1,
            "margin": pytest.approx(12.5),
            "ci95": test["ci95"],
            "arms": {"mr_search": pytest.approx(62.5), "k1": pytest.approx(50.0)},
        }
    }


def test_met_needs_the_interval_above_zero() -> None:
    questions = 60
    right = [[[1, 1, 1]] * questions]
    half = [[[1, 0, 0]] * (questions // 2) + [[0, 0, 0]] * (questions // 2)]  # K = 1: right at attempt 1 only
    mr_half = [[[1, 1, 1]] * (questions // 2) + [[0, 0, 0]] * (questions // 2)]  # the same questions, kept
    clear = final_answer_test({"mr_search": _scores("mr_search", right), "k1": _scores("k1", half)}, {}, SPLIT)
    assert clear["met"] and clear["ci95"][0] > 0 and clear["margin"] == pytest.approx(50.0)
    level = final_answer_test({"mr_search": _scores("mr_search", mr_half), "k1": _scores("k1", half)}, {}, SPLIT)
    assert not level["met"] and level["margin"] == 0.0 and level["ci95"] == [0.0, 0.0]
    worse = final_answer_test({"mr_search": _scores("mr_search", mr_half), "k1": _scores("k1", right)}, {}, SPLIT)
    assert not worse["met"] and worse["margin"] == pytest.approx(-50.0)


def test_other_arms_and_question_kinds() -> None:
    mr = [[[0, 1, 1], [1, 1, 1], [0, 0, 1], [0, 0, 0]]]
    k1 = [[[1, 0, 0], [0, 0, 0], [0, 0, 0], [0, 0, 0]]]
    all_turns = [[[1], [1], [1], [0]]]  # one attempt of 9 turns: its EM@1
    no_credit = [[[0, 0, 0], [1, 1, 1], [0, 0, 0], [0, 0, 1]]]  # its last attempt: 50.0
    scores = {
        "mr_search": _scores("mr_search", mr),
        "k1": _scores("k1", k1),
        "k1_all_turns": _scores("k1_all_turns", all_turns),
        "mr_search_no_credit": _scores("mr_search_no_credit", no_credit),
    }
    kinds = {"q0": "1", "q1": "1", "q2": "2", "q3": "3"}
    test = final_answer_test(scores, kinds, SPLIT, 500)
    others = test["other_arms"]
    assert set(others) == {"k1", "k1_all_turns", "mr_search_no_credit"}
    assert (others["k1_all_turns"]["figure"], others["k1_all_turns"]["k"]) == (pytest.approx(75.0), 1)
    assert others["k1_all_turns"]["margin"] == pytest.approx(0.0)
    assert (others["mr_search_no_credit"]["figure"], others["mr_search_no_credit"]["k"]) == (pytest.approx(50.0), 3)
    assert others["mr_search_no_credit"]["rule"] == "last" and others["k1"]["rule"] == "best"
    assert others["k1"]["margin"] == test["margin"], "the test's baseline is listed beside the others"
    assert list(test["by_hops"]) == ["1", "2", "3"]
    one_hop = test["by_hops"]["1"]
    assert one_hop["questions"] == 2 and one_hop["mr_search"] == pytest.approx(100.0)
    assert one_hop["baseline_best"] == pytest.approx(50.0) and one_hop["arms"]["k1_all_turns"] == pytest.approx(100.0)
    assert test["by_hops"]["3"]["arms"]["mr_search_no_credit"] == pytest.approx(100.0)


def test_arms_must_share_seeds_and_questions() -> None:
    mr = _scores("mr_search", [[[1, 1, 1]] * 3])
    fewer = _scores("k1", [[[1, 1, 1]] * 2])
    with pytest.raises(ValueError, match="other seeds or questions"):
        final_answer_test({"mr_search": mr, "k1": fewer}, {}, SPLIT)
    with pytest.raises(ValueError, match="compares mr_search with k1"):
        final_answer_test({"mr_search": mr}, {}, SPLIT)


def test_scores_and_kinds_from_files(tmp_path: Path) -> None:
    rows = [
        make_row(
            question=f"q{i}",
            golden_answers=["g"],
            data_source="embedded_1hop",
            index=i,
            split="test",
            extra={"id": f"u{i}", "hops": 1 + i % 2, "relation": "born_in"},
        )
        for i in range(3)
    ]
    parquet = tmp_path / "test.parquet"
    write_parquet(rows, parquet)
    assert question_kinds(parquet) == {"u0": "1", "u1": "2", "u2": "1"}
    dirs = []
    for seed, ems in ((1, [1, 0, 1]), (2, [0, 0, 1])):
        d = SeedDirs(seed, tmp_path / f"seed_{seed}")
        _write(
            d.evaluation("3x3") / "trajectories.jsonl", [_record("k1", f"u{i}", [e, 0, 0]) for i, e in enumerate(ems)]
        )
        dirs.append(d)
    scores = load_scores(dirs, ARMS["k1"], ["u2", "u0", "u1"])
    assert scores.uids == ("u2", "u0", "u1") and scores.seeds == (1, 2)
    assert scores.em[:, :, 0].tolist() == [[100.0, 100.0, 0.0], [100.0, 0.0, 0.0]]
    _write(dirs[1].evaluation("3x3") / "trajectories.jsonl", [_record("k1", "u0", [1])])
    with pytest.raises(ValueError, match="seed 2: k1 was evaluated on other questions"):
        load_scores(dirs, ARMS["k1"])
