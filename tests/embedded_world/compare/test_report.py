from __future__ import annotations

import json
from pathlib import Path

import pytest

from mr_search_embedded.compare.__main__ import main, write_report
from mr_search_embedded.compare.report import build_comparison, headline

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def test_comparison_aggregates_finished_seeds(work_folder: Path) -> None:
    comparison = build_comparison(work_folder, {"mr_search": 16, "baseline": 16})
    assert comparison["seeds"] == [1, 2]
    assert comparison["unfinished_seeds"] == [3]
    # MR-Search: seed 1 -> 50, 75, 75; seed 2 -> 25, 50, 75 (macro average of two sources of 2 questions)
    mr = comparison["heldout"]["mr_search"]["average"]
    assert [e["mean"] for e in mr["em"]] == [37.5, 62.5, 75.0]
    assert [e["mean"] for e in mr["gain"]] == [0.0, 25.0, 37.5]
    assert mr["em"][0]["std"] == pytest.approx(17.677, abs=1e-3)
    assert headline(comparison, 3) == {"mr_search": 75.0, "baseline": 37.5, "warm_start": 25.0}
    budget = comparison["per_seed"][0]["budget"]
    assert (budget["baseline_step"], budget["ratio"]) == (6, 1.0)


def test_report_folder_and_history_kept(work_folder: Path, tmp_path: Path) -> None:
    out = tmp_path / "report"
    report = write_report(work_folder, out, 16, 16, note="first")
    text = report.read_text()
    assert "| MR-Search K=3 | 37.5 ± 17.7 | 62.5 ± 17.7 | 75.0 ± 0.0 |" in text
    assert "| warm start (before training) | 25.0 | 25.0 | 25.0 |" in text
    assert "seeds NOT finished (left out): 3" in text
    assert "| 1 | 2 | 9,600 | 6 | 6 | 9,600 | 1.00 |" in text
    for png in ("em_vs_attempt.png", "em_vs_step.png"):
        assert (out / png).read_bytes()[:8] == PNG_MAGIC
    data = json.loads((out / "comparison.json").read_text())
    assert data["meta"]["machine"] == "test box"
    (out / "investigation.md").write_text("The world is too hard for the tiny policy.\n")
    write_report(work_folder, out, 16, 16, note="second")
    text = report.read_text()
    assert "## Investigation" in text and "too hard for the tiny policy" in text
    history = [line for line in text.splitlines() if line.endswith("| first |") or line.endswith("| second |")]
    assert len(history) == 2  # the earlier result is kept
    assert len((out / "history.jsonl").read_text().splitlines()) == 2
    # the same work folder rendered again replaces its own last line, the earlier one stays
    meta = json.loads((work_folder / "meta.json").read_text())
    (work_folder / "meta.json").write_text(json.dumps({**meta, "work": str(work_folder)}))
    write_report(work_folder, out, 16, 16, note="third")
    write_report(work_folder, out, 16, 16, note="third, re-rendered")
    notes = [json.loads(line)["note"] for line in (out / "history.jsonl").read_text().splitlines()]
    assert notes == ["first", "second", "third, re-rendered"]


def test_cli_budget_and_errors(work_folder: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    seed = work_folder / "seed_1"
    args = ["budget", "--mr", str(seed / "mr_search"), "--baseline", str(seed / "baseline")]
    assert main([*args, "--mr-rows", "16", "--baseline-rows", "16", "--out", str(tmp_path / "b.json")]) == 0
    assert capsys.readouterr().out.split() == ["6", "6"]
    # 3 of the 6 baseline steps: half the budget; more steps are needed unless the tolerance covers the gap
    short = tmp_path / "short"
    (short / "metrics").mkdir(parents=True)
    lines = (seed / "baseline" / "metrics").glob("*.jsonl").__next__().read_text().splitlines()[:3]
    (short / "metrics" / "a.jsonl").write_text("\n".join(lines) + "\n")
    args = ["budget", "--mr", str(seed / "mr_search"), "--baseline", str(short), "--mr-rows", "16"]
    args += ["--baseline-rows", "16", "--out", str(tmp_path / "c.json")]
    assert main(args) == 0
    assert capsys.readouterr().out.split() == ["6", "3"]
    assert main([*args, "--tolerance", "0.6"]) == 0
    assert capsys.readouterr().out.split() == ["3", "3"]
    args = ["budget", "--mr", str(seed / "mr_search"), "--baseline", str(seed / "baseline")]
    assert (
        main(
            [
                "report",
                "--work",
                str(tmp_path / "none"),
                "--out",
                str(tmp_path / "r"),
                "--mr-rows",
                "1",
                "--baseline-rows",
                "1",
            ]
        )
        == 2
    )
    assert "no finished seed" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main([*args, "--mr-rows", "0", "--baseline-rows", "16", "--out", str(tmp_path / "b.json")])
