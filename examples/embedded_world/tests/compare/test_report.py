"""The comparison's report from a synthetic work folder: the plan first, then the final-answer test with its numbers,
every arm's budget, the secondary line, the next hypothesis, the history; the per-question records that recompute the
test, and the plan gate."""

from __future__ import annotations

import argparse
import json
import lzma
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest

from mr_search.data.rows import make_row, write_parquet
from mr_search.eval.metrics import summarize
from mr_search.eval.records import make_attempt, make_record, write_jsonl
from mr_search.eval.report import write_report as write_eval
from mr_search_embedded.compare import gate, records
from mr_search_embedded.compare.__main__ import main, write_report
from mr_search_embedded.compare.budget import match_runs, write_match
from mr_search_embedded.compare.hypothesis import NEXT_HYPOTHESIS
from mr_search_embedded.compare.layout import SeedDirs, warm_evaluation
from mr_search_embedded.compare.plan_cli import add_plan_arguments, plan_from_arguments
from mr_search_embedded.compare.report import build_comparison
from mr_search_embedded.reads import record_read

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
ROWS = 16
QUESTIONS = 8  # u0..u7: even ones one-hop, odd ones two-hop
# Per seed and arm: EM (0/1) of each question at each evaluated attempt.
PLANS = {
    1: {
        "mr_search": [[0, 1, 1]] * 6 + [[0, 0, 0]] * 2,  # 75.0 at attempt 3
        "k1": [[1, 0, 0]] * 4 + [[0, 0, 0]] * 4,  # best at attempt 1: 50.0
        "mr_search_no_credit": [[1, 1, 1]] * 5 + [[0, 0, 0]] * 3,
        "k1_all_turns": [[1]] * 3 + [[0]] * 5,
    },
    2: {
        "mr_search": [[1, 1, 1]] * 5 + [[0, 0, 0]] * 3,  # 62.5
        "k1": [[1, 1, 0]] * 3 + [[0, 0, 0]] * 5,
        "mr_search_no_credit": [[0, 0, 1]] * 4 + [[0, 0, 0]] * 4,
        "k1_all_turns": [[1]] * 4 + [[0]] * 4,
    },
}
SHAPES = {"mr_search": "3x3", "k1": "3x3", "mr_search_no_credit": "3x3", "k1_all_turns": "1x9"}


def _records(method: str, plan: list[list[int]]) -> list[dict]:
    out = []
    for q, ems in enumerate(plan):
        attempts = [
            make_attempt(i, [], ["g"], scored={"answer": "a", "reward": e, "em": e, "f1": e}) for i, e in enumerate(ems)
        ]
        source = "embedded_1hop" if q % 2 == 0 else "embedded_2hop"
        out.append(
            make_record(
                method=method, uid=f"u{q}", data_source=source, question="q", golden_answers=["g"], attempts=attempts
            )
        )
    return out


def _evaluation(folder: Path, plans: dict[str, list[list[int]]], turns: int) -> None:
    records = [r for method, plan in plans.items() for r in _records(method, plan)]
    write_jsonl(records, folder / "trajectories.jsonl")
    k = len(next(iter(plans.values()))[0])
    meta = {
        "models": ", ".join(f"{m}=/ckpt/{m}" for m in plans),
        "questions": QUESTIONS,
        "K_eval": k,
        "max turns per attempt": turns,
        "max questions per source": 4,
        "wall time (s)": 12.0,
    }
    write_eval(summarize(records, attempts=k), folder, meta)


def _parquet(path: Path) -> Path:
    rows = [
        make_row(
            question=f"q{i}",
            golden_answers=["g"],
            data_source="embedded_1hop" if i % 2 == 0 else "embedded_2hop",
            index=i,
            split="test",
            extra={"id": f"u{i}", "hops": 1 + i % 2, "relation": "r"},
        )
        for i in range(QUESTIONS)
    ]
    write_parquet(rows, path)
    return path


@pytest.fixture
def work(tmp_path: Path, write_metrics: Callable, mr_step: Callable) -> Path:
    """Four arms, seeds 1-2 finished and 3 planned but unfinished; MR-Search writes 300 model tokens a step for 2
    steps, the K = 1 arms 100 a step for 6, the no-credit arm 300 for 2; every launch took 100 s beyond its steps."""
    test = _parquet(tmp_path / "data" / "test.parquet")
    dev = tmp_path / "data" / "dev.parquet"
    dev.write_bytes(b"another split")
    work = tmp_path / "work"
    parser = argparse.ArgumentParser()
    add_plan_arguments(parser)
    args = parser.parse_args(
        (
            "--arms mr_search,k1,k1_all_turns,mr_search_no_credit --attempts 3 --turns 3 --seeds 1 2 3 --steps 2 "
            "--baseline-steps 6 --batch 4 --group 4 --lr 1e-4 --tolerance 0.05 --max-questions 4 "
            "--response-length 1024 --max-new-tokens 48 --max-information-tokens 256 --world default --policy tiny "
            f"--test {test} --dev {dev} --out {work}"
        ).split()
    )
    plan_from_arguments(args)
    (work / "meta.json").write_text(json.dumps({"command": "make compare", "machine": "test box", "work": str(work)}))
    for seed, plans in PLANS.items():
        d = SeedDirs(seed, work / f"seed_{seed}")
        for arm in plans:
            k1 = arm.startswith("k1")
            steps = [
                mr_step(s, [0.5] if k1 else [0.25, 0.5, 0.5], 100.0 if k1 else 300.0, 10.0)
                for s in range(1, 7 if k1 else 3)
            ]
            write_metrics(d.run(arm), steps)
            d.times(arm).write_text(f"1000 {1000 + 100 + 10 * len(steps)} {len(steps)}\n")
            write_match(match_runs(d.run("mr_search"), ROWS, d.run(arm), ROWS), d.budget(arm))
        _evaluation(d.evaluation("3x3"), {a: p for a, p in plans.items() if SHAPES[a] == "3x3"}, 3)
        _evaluation(d.evaluation("1x9"), {"k1_all_turns": plans["k1_all_turns"]}, 9)
    _evaluation(warm_evaluation(work, "3x3"), {"warm_start": [[1, 0, 0]] * 2 + [[0, 0, 0]] * 6}, 3)
    (work / "seed_3" / "mr_search").mkdir(parents=True)  # started, not finished
    return work


def test_the_comparison_json_holds_the_test(work: Path) -> None:
    comparison = build_comparison(work, ROWS)
    assert comparison["seeds"] == [1, 2] and comparison["unfinished_seeds"] == [3]
    t = comparison["final_answer_test"]
    assert set(t) >= {
        "k",
        "mr_search",
        "baseline_best",
        "baseline_best_k",
        "margin",
        "ci95",
        "questions",
        "split",
        "probed",
        "met",
    }
    # Seeds averaged per question: MR-Search at attempt 3: (75.0 + 62.5) / 2; K = 1 by attempt: (50 + 37.5) / 2 at
    # attempt 1, (0 + 37.5) / 2 at 2, 0 at 3 -> its best is attempt 1.
    assert t["k"] == 3 and t["mr_search"] == pytest.approx(68.75)
    assert (t["baseline_best"], t["baseline_best_k"]) == (pytest.approx(43.75), 1)
    assert t["margin"] == pytest.approx(25.0) and t["ci95"][0] <= 25.0 <= t["ci95"][1]
    assert t["met"] == (t["ci95"][0] > 0)
    assert (t["questions"], t["split"], t["probed"]) == (QUESTIONS, "test", False)
    assert t["trajectories"] == {"mr_search": 16, "k1": 16, "k1_all_turns": 16, "mr_search_no_credit": 16}
    assert t["other_arms"]["k1_all_turns"]["figure"] == pytest.approx(43.75)
    assert t["other_arms"]["mr_search_no_credit"]["figure"] == pytest.approx((62.5 + 50.0) / 2)
    assert list(t["by_hops"]) == ["1", "2"] and t["by_hops"]["1"]["questions"] == 4
    budget = comparison["budget"]
    assert budget["mr_search"]["model_tokens"] == [600.0, 600.0] and budget["k1"]["steps"] == [6, 6]
    assert budget["k1"]["response_tokens"] == [6 * 100.0 * ROWS] * 2 and budget["k1"]["within_tolerance"]
    assert comparison["reflection_gain"]["attempt"] == 3
    assert comparison["timings"]["launch_seconds"] == pytest.approx(100.0)
    assert comparison["timings"]["step_seconds"] == {a: 10.0 for a in SHAPES}
    assert comparison["next_hypothesis"] is None
    assert comparison["plan"]["arms"][0]["name"] == "mr_search"


def test_a_probe_of_the_test_split_makes_it_probed(work: Path) -> None:
    record_read(work.parent / "data" / "test.parquet", "test", "probe", {"model": "m"})
    t = build_comparison(work, ROWS)["final_answer_test"]
    assert t["probed"] and "1 earlier read(s) of these questions by probe" in t["probed_why"]


def test_the_report_opens_with_the_plan_and_states_the_result(work: Path, tmp_path: Path) -> None:
    out = tmp_path / "report"
    text = write_report(work, out, ROWS, note="first").read_text()
    assert text.startswith((work / "plan.md").read_text().rstrip())
    t = json.loads((out / "comparison.json").read_text())["final_answer_test"]
    head = "## Result: the final-answer test is " + ("met" if t["met"] else "not met")
    assert head in text
    assert "MR-Search's EM at attempt 3: 68.8; K = 1's best EM@k: 43.8 (k = 1); margin +25.0 points" in text
    assert "8 test questions x 2 seed(s): 16 greedy meta-episodes per arm, 64 counted over 4 arms" in text
    assert "probed before the run: no; no earlier read in" in text
    assert "Every arm's evaluated checkpoint is within 5% of MR-Search's model-written tokens." in text
    assert "| K=1, 3 turns (the test) | best EM@k: k = 1 | 43.8 | +25.0 |" in text
    assert "| K=1, 9 turns | best EM@k: k = 1 | 43.8 | +25.0 |" in text
    assert "| MR-Search K=3 | EM@3 | 68.8 | - | - | 2 | 600 (x1.00) | 9,600 |" in text
    assert "| 1 | 4 | " in text and "| 2 | 4 | " in text, "one row per question kind"
    assert "The earlier harness's test: EM@3 - EM@1" in text
    assert "| 1 | K=1, 3 turns | 6 | 6 | 600 | 1.00 | 9,600 |" in text
    assert "seeds NOT finished (left out): 3" in text
    for png in ("em_vs_attempt.png", "em_vs_step.png"):
        assert (out / png).read_bytes()[:8] == PNG_MAGIC
    assert len((out / "history.jsonl").read_text().splitlines()) == 1


def test_the_next_hypothesis_is_asked_for_and_carried(work: Path, tmp_path: Path) -> None:
    out = tmp_path / "report"
    # Make the test fail: K = 1 right everywhere at attempt 1 in both seeds.
    for seed in PLANS:
        plans = {**PLANS[seed], "k1": [[1, 0, 0]] * QUESTIONS}
        _evaluation(
            SeedDirs(seed, work / f"seed_{seed}").evaluation("3x3"),
            {a: p for a, p in plans.items() if SHAPES[a] == "3x3"},
            3,
        )
    text = write_report(work, out, ROWS).read_text()
    assert "## Result: the final-answer test is not met" in text
    assert "**Not met, and no next hypothesis is written yet.**" in text and NEXT_HYPOTHESIS in text
    (out / NEXT_HYPOTHESIS).write_text(
        json.dumps(
            {
                "hypothesis": "One attempt's turns finish every question here; a world that needs more fixes that.",
                "predicts": "On the three-hop world the margin's interval lies above 0.",
            }
        )
    )
    text = write_report(work, out, ROWS).read_text()
    assert "**Next hypothesis.** One attempt's turns finish every question here" in text
    assert "**What it predicts.** On the three-hop world" in text
    comparison = json.loads((out / "comparison.json").read_text())
    assert comparison["next_hypothesis"]["predicts"].startswith("On the three-hop world")
    (out / NEXT_HYPOTHESIS).write_text(json.dumps({"hypothesis": "x"}))
    with pytest.raises(ValueError, match="expected"):
        write_report(work, out, ROWS)


def test_cli_budget_report_and_errors(work: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    seed = work / "seed_1"
    args = ["budget", "--reference", str(seed / "mr_search"), "--run", str(seed / "k1"), "--rows", "16"]
    assert main([*args, "--out", str(tmp_path / "b.json")]) == 0
    assert capsys.readouterr().out.split() == ["6", "6", "6"]
    short = tmp_path / "short"
    (short / "metrics").mkdir(parents=True)
    lines = next((seed / "k1" / "metrics").glob("*.jsonl")).read_text().splitlines()[:3]
    (short / "metrics" / "a.jsonl").write_text("\n".join(lines) + "\n")
    args = ["budget", "--reference", str(seed / "mr_search"), "--run", str(short), "--rows", "16"]
    assert main([*args, "--out", str(tmp_path / "c.json")]) == 0
    assert capsys.readouterr().out.split() == ["6", "3", "3"], "half the budget: resume to 6"
    assert main([*args, "--out", str(tmp_path / "c.json"), "--tolerance", "0.6"]) == 0
    assert capsys.readouterr().out.split() == ["3", "3", "3"]
    assert main(["report", "--work", str(work), "--out", str(tmp_path / "r"), "--rows", "16"]) == 0
    empty = tmp_path / "empty"
    plan = work / "plan"
    empty.mkdir()
    for name in ("plan.json", "plan.md"):
        (empty / name).write_text((plan.parent / name).read_text())
    assert main(["report", "--work", str(empty), "--out", str(tmp_path / "r2"), "--rows", "16"]) == 2
    assert "no finished seed" in capsys.readouterr().err
    assert main(["report", "--work", str(tmp_path / "none"), "--out", str(tmp_path / "r3"), "--rows", "16"]) == 2
    assert "compare.sh writes them before training" in capsys.readouterr().err


def test_the_records_hold_every_question_arm_seed_and_attempt_and_recompute_the_test(
    work: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "report"
    write_report(work, out, ROWS)
    comparison = json.loads((out / "comparison.json").read_text())
    assert comparison["records"].endswith(records.RECORDS) and "_records" not in comparison
    with lzma.open(out / records.RECORDS, "rt") as handle:
        rows = [json.loads(line) for line in handle]
    # 8 questions x 2 seeds x (3 + 3 + 3 + 1) attempts over the four arms
    assert len(rows) == QUESTIONS * 2 * 10
    first = rows[0]
    assert set(first) == {"question", "split", "hops", "arm", "seed", "attempt", "ran", "answer", "em"}
    assert (first["split"], first["answer"]) == ("test", "a")
    assert {r["hops"] for r in rows} == {"1", "2"}
    again = records.recompute(out)
    stored = comparison["final_answer_test"]
    for key in ("mr_search", "baseline_best", "baseline_best_k", "margin", "ci95", "met", "by_hops", "other_arms"):
        assert again["final_answer_test"][key] == stored[key], key
    # per seed: MR-Search 75.0 and 62.5 at attempt 3; K = 1's best attempt 50.0 and 37.5
    seeds = again["seed_interval"]
    assert seeds["per_seed"] == pytest.approx([25.0, 25.0]) and seeds["ci95"] == pytest.approx([25.0, 25.0])
    assert main(["recompute", str(out)]) == 0
    text = capsys.readouterr().out
    assert "margin +25.0 points" in text and "95% interval over seeds (t, 2 seeds)" in text


def test_the_report_names_engine_control_updates_and_the_times(work: Path, tmp_path: Path) -> None:
    meta = json.loads((work / "meta.json").read_text())
    earlier = ["2026-12-07T09:14:20Z: 16 CPU cores, one GPU (H100)", "2026-12-08T10:00:00Z: 16 CPU cores, one GPU"]
    meta = {**meta, "engine": "sglang", "positive_control": True, "earlier starts": earlier}
    (work / "meta.json").write_text(json.dumps(meta))
    gate.check(tmp_path / "plan.md", work, enabled=False)
    gate.launch(work, "seed_1/mr_search")
    gate.launch(work, "seed_1/k1")
    out = tmp_path / "report"
    write_report(work, out, ROWS)
    comparison = json.loads((out / "comparison.json").read_text())
    assert comparison["engine"] == "sglang" and comparison["positive_control"] is True
    assert comparison["arms"]["mr_search"]["updates"] == [2, 2] and comparison["arms"]["k1"]["updates"] == [6, 6]
    assert comparison["plan_gate"] is False and comparison["plan_committed_at"] is None
    assert comparison["first_launch_at"] == comparison["launches"][0]["at"]
    assert [x["what"] for x in comparison["launches"]] == ["seed_1/mr_search", "seed_1/k1"]
    text = (out / "report.md").read_text()
    assert "plan gate off (PLAN_GATE=0)" in text and "compare recompute <report folder>" in text
    assert f"- earlier starts: {earlier[0]}; {earlier[1]}\n" in text, "each machine a piece ran on, one line"


def _git(repo: Path, *args: str) -> None:
    subprocess.run(
        ["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@t", *args], check=True, capture_output=True
    )


def test_the_gate_refuses_a_plan_until_it_is_committed_as_it_stands(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    plan = repo / "reports" / "plan.md"
    plan.parent.mkdir(parents=True)
    plan.write_text("# plan\n")
    with pytest.raises(gate.PlanNotCommitted, match="not in a git repository"):
        gate.committed_plan(plan)
    _git(repo, "init", "-q")
    with pytest.raises(gate.PlanNotCommitted, match="is not committed: review it, then commit it"):
        gate.committed_plan(plan)
    _git(repo, "add", "reports/plan.md")
    _git(repo, "commit", "-qm", "plan")
    found = gate.check(plan, tmp_path / "work")
    assert len(found["plan_commit"]) == 40 and found["plan_committed_at"].endswith("Z")
    assert json.loads((tmp_path / "work" / gate.GATE).read_text())["plan_committed_at"] == found["plan_committed_at"]
    plan.write_text("# plan, changed after the commit\n")
    assert main(["gate", "--plan", str(plan), "--work", str(tmp_path / "work")]) == 2
    assert main(["gate", "--plan", str(plan), "--work", str(tmp_path / "work"), "--off"]) == 0


def test_a_node_without_history_checks_the_plan_against_its_record(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    plan = repo / "plan.md"
    repo.mkdir()
    plan.write_text("# plan\n")
    _git(repo, "init", "-q")
    _git(repo, "add", "plan.md")
    _git(repo, "commit", "-qm", "plan")
    record = tmp_path / "record.json"
    assert main(["gate-record", "--plan", str(plan), "--out", str(record)]) == 0
    saved = json.loads(record.read_text())
    hashed = subprocess.run(["git", "-C", str(repo), "hash-object", "plan.md"], capture_output=True, text=True)
    assert saved["blob"] == hashed.stdout.strip() == gate.blob_id(plan), "git's own blob id, computed without git"
    node = tmp_path / "node"  # a copy of the tree: the same bytes, no .git
    node.mkdir()
    (node / "plan.md").write_bytes(plan.read_bytes())
    found = gate.check(node / "plan.md", tmp_path / "work", record_path=record)
    assert found["plan_commit"] == saved["commit"] and found["checked_by"] == str(record)
    (node / "plan.md").write_text("# plan, edited on the node\n")
    with pytest.raises(gate.PlanNotCommitted, match="is not the plan committed in"):
        gate.check(node / "plan.md", tmp_path / "work", record_path=record)
    assert main(["gate", "--plan", str(node / "plan.md"), "--work", str(tmp_path / "w"), "--record", str(record)]) == 2


def test_the_records_path_is_the_checkouts_even_without_git(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    from mr_search_embedded.compare import __main__ as cli

    root = Path(cli.__file__).resolve().parents[4]
    inside = root / "reports" / "comparison" / "x" / "records.jsonl.xz"
    no_git = subprocess.CompletedProcess([], 128, stdout="", stderr="not a git repository")
    monkeypatch.setattr(subprocess, "run", lambda *a, **k: no_git)
    assert cli._repo_path(inside) == "reports/comparison/x/records.jsonl.xz"
    assert cli._repo_path(tmp_path / "records.jsonl.xz") == str(tmp_path / "records.jsonl.xz")
