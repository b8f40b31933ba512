"""The plan: every part of the test is written down before training, kept by a continued run, and its wall time
comes from measured step times."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import pytest

from mr_search_embedded.compare.arms import ARM_NAMES, build_arms
from mr_search_embedded.compare.plan import read_plan, write_plan
from mr_search_embedded.compare.plan_cli import add_plan_arguments, build_plan, plan_from_arguments
from mr_search_embedded.compare.walltime import ASSUMED, Timings, plan_wall_time, timings_from_comparison

ROOT = Path(__file__).resolve().parents[4]


def _args(tmp_path: Path, *extra: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    add_plan_arguments(parser)
    timings = tmp_path / "earlier.json"
    if not timings.exists():
        # The earlier two-arm harness's comparison.json: step times of its "mr_search" and "baseline" runs only.
        seeds = [{"training": {"mr_search": [{"seconds": 8.0}] * 4, "baseline": [{"seconds": 3.0}] * 4}}]
        timings.write_text(json.dumps({"per_seed": seeds, "sources": ["embedded_1hop", "embedded_2hop", "average"]}))
    base = (
        "--arms mr_search,k1,k1_all_turns,mr_search_no_credit --attempts 3 --turns 3 --seeds 1 2 3 4 5 --steps 16 "
        "--baseline-steps 48 --batch 4 --group 4 --lr 1e-4 --tolerance 0.05 --max-questions 40 --response-length 1024 "
        f"--max-new-tokens 48 --max-information-tokens 256 --world default --policy tiny --timings {timings}"
    ).split()
    return parser.parse_args([*base, *extra])


def test_the_plan_states_every_part_of_the_test(tmp_path: Path) -> None:
    text = plan_from_arguments(_args(tmp_path))
    for part in (
        "**Metric**",
        "**Comparison**",
        "**Pass rule**",
        "**Arms**",
        "**Budget**",
        "**Seeds**",
        "**Splits**",
        "**Planned wall time**",
    ):
        assert part in text, part
    assert "EM at its last attempt (k = 3) minus the K = 1 baseline's best EM@k over k <= 3" in text
    assert "low end above 0 and the margin is not below 0" in text and "10,000 resamples" in text
    for arm in ARM_NAMES:
        assert f"  - `{arm}`:" in text
    assert "evaluated 1x9 (figure: EM@1)" in text, "k1_all_turns: one attempt of K x turns"
    assert "A_{i,s} = r~_{i,s}" in text, "the plan says how gamma = 0 isolates the credit"
    assert "model-written tokens" in text and "within 5%" in text
    assert "**Seeds**: 5 (1, 2, 3, 4, 5)" in text
    assert "`test`: read once" in text and "training reads `train` only" in text


def test_a_written_plan_is_kept_and_a_different_one_refused(tmp_path: Path) -> None:
    work, report = tmp_path / "work", tmp_path / "report"
    text = plan_from_arguments(_args(tmp_path, "--out", str(work), "--report-dir", str(report)))
    plan, md = read_plan(work)
    assert md == text == (report / "plan.md").read_text()
    assert plan["split"] == "test" and plan["seeds"] == [1, 2, 3, 4, 5]
    assert [a["name"] for a in plan["arms"]] == list(ARM_NAMES)
    assert [a["first_launch_steps"] for a in plan["arms"]] == [16, 48, 48, 16]
    assert plan_from_arguments(_args(tmp_path, "--out", str(work))) == text, "a continued run keeps its first plan"
    with pytest.raises(ValueError, match=r"differs from the knobs given in .*seeds.*same knobs or a new WORK_DIR"):
        plan_from_arguments(_args(tmp_path, "--out", str(work), "--seeds", "1", "2", "3"))


def test_splits_and_probed_are_resolved_when_the_run_starts(tmp_path: Path) -> None:
    from mr_search.data.rows import make_row, write_parquet

    rows = [
        make_row(question=f"q{i}", golden_answers=["g"], data_source=f"s{i % 2}", index=i, split="test")
        for i in range(10)
    ]
    test = tmp_path / "test.parquet"
    write_parquet(rows, test)
    dry = build_plan(_args(tmp_path))
    assert dry.questions is None and dry.probed is None
    plan = build_plan(_args(tmp_path, "--test", str(test), "--dev", str(test), "--max-questions", "3"))
    assert plan.questions == 6, "the first 3 of each of 2 data sources"
    assert plan.probed is not None and plan.probed["probed"], "dev standing in for test: probed"
    assert "Test **probed**: the dev split is the same questions" in write_plan(plan, tmp_path / "w")[1].read_text()


def test_the_comparisons_own_test_read_is_not_an_earlier_one(tmp_path: Path) -> None:
    """After the warm start's evaluation recorded this work folder's read, the plan still counts only earlier ones."""
    from mr_search.data.rows import make_row, write_parquet
    from mr_search_embedded.reads import main as reads

    rows = [make_row(question=f"q{i}", golden_answers=["g"], data_source="s", index=i, split="test") for i in range(4)]
    test, dev = tmp_path / "test.parquet", tmp_path / "dev.parquet"
    write_parquet(rows, test)
    write_parquet([make_row(question="d", golden_answers=["g"], data_source="s", index=0, split="dev")], dev)
    work = tmp_path / "work"
    for folder in (tmp_path / "other", work):  # another comparison's read, then this one's own
        record = ["record", "--parquet", str(test), "--split", "test", "--reader", "comparison", "--work", str(folder)]
        assert reads(record) == 0
    splits = ("--test", str(test), "--dev", str(dev))
    own = build_plan(_args(tmp_path, *splits, "--out", str(work))).probed
    assert own is not None and own["reads"] == 1, own
    elsewhere = build_plan(_args(tmp_path, *splits, "--out", str(tmp_path / "new"))).probed
    assert elsewhere is not None and elsewhere["reads"] == 2, "in another work folder both are earlier"


def test_wall_time_from_measured_step_times(tmp_path: Path) -> None:
    _args(tmp_path)  # writes earlier.json
    timings = timings_from_comparison(tmp_path / "earlier.json", ARM_NAMES)
    assert timings.step_seconds == {"mr_search": 8.0, "k1": 3.0, "k1_all_turns": 3.0, "mr_search_no_credit": 8.0}
    assert timings.launch_seconds == ASSUMED["launch_seconds"] and timings.eval_seconds == ASSUMED["eval_seconds"]
    assert any("k1_all_turns's step time taken as k1's" in n for n in timings.notes)
    arms = build_arms(ARM_NAMES, 3, 3)
    steps = {"mr_search": 16, "k1": 48, "k1_all_turns": 48, "mr_search_no_credit": 16}
    measured = Timings(timings.step_seconds, 100.0, 0.5, "t")
    wall = plan_wall_time(arms, 2, steps, 10, measured, aim_seconds=3600)
    training = 16 * 8 + 48 * 3 + 48 * 3 + 16 * 8 + 4 * 100  # per seed: 944 s
    evaluation = 10 * 3 * 0.5 * 4  # four arms, each 3 attempt-equivalents (k1_all_turns: one attempt of 9 turns)
    assert wall.training_per_seed == pytest.approx(training)
    assert wall.evaluation_per_seed == pytest.approx(evaluation)
    assert wall.total == pytest.approx(2 * training + evaluation + 15.0), "overlapped: the last seed's evaluation adds"
    assert wall.fits and wall.seeds_that_fit == 3
    serial = plan_wall_time(arms, 2, steps, 10, measured, aim_seconds=3600, overlap=False)
    assert serial.total == pytest.approx(2 * training + 2 * evaluation + 15.0)
    tight = plan_wall_time(arms, 5, steps, 10, measured, aim_seconds=3600)
    assert not tight.fits and tight.seeds_that_fit == 3
    # STEPS=s costs s * (8 + 3 * 3 * 2 + 8) = 34 s a seed besides 400 s of launches: s <= (3600 - 75 - 2000) / 170.
    assert tight.steps_that_fit == 8


def test_an_above_aim_plan_says_what_it_would_take(tmp_path: Path) -> None:
    text = plan_from_arguments(_args(tmp_path, "--aim-minutes", "30"))
    assert "**Above the 30 min aim.** It would take ~" in text
    assert "SEEDS=1 fits the aim at these steps" in text or "no seed count" in text
    assert "assumed" in text, "what was not measured is said"
    missing = plan_from_arguments(_args(tmp_path, "--timings", str(tmp_path / "none.json")))
    assert "**Planned wall time**: not planned:" in missing and "none.json" in missing


def test_timings_this_harness_recorded_are_read_back(tmp_path: Path) -> None:
    path = tmp_path / "comparison.json"
    recorded = {
        "step_seconds": {"mr_search": 9.0, "k1": 2.5},
        "launch_seconds": 80.0,
        "eval_seconds_per_question_attempt": 0.2,
    }
    path.write_text(json.dumps({"timings": recorded}))
    timings = timings_from_comparison(path, ["mr_search", "k1", "mr_search_no_credit"])
    assert timings.step_seconds == {"mr_search": 9.0, "k1": 2.5, "mr_search_no_credit": 9.0}
    assert (timings.launch_seconds, timings.eval_seconds) == (80.0, 0.2)
    assert timings.notes == ("mr_search_no_credit's step time taken as mr_search's",)


def test_the_repository_reports_give_the_default_plan_its_step_times() -> None:
    timings = timings_from_comparison(ROOT / "reports" / "compare_embedded" / "comparison.json", ARM_NAMES)
    assert 5 < timings.step_seconds["mr_search"] < 12 and 2 < timings.step_seconds["k1"] < 6


def test_per_source_question_counts_are_stated_and_estimated(tmp_path: Path) -> None:
    args = _args(tmp_path, "--max-questions", "100,embedded_3hop=217")
    plan = build_plan(args)
    assert plan.as_dict()["evaluation"]["max_questions_per_source"] == "100,embedded_3hop=217"
    text = plan_from_arguments(_args(tmp_path, "--max-questions", "100,embedded_3hop=217"))
    assert "the first questions of each data source (217 of embedded_3hop, 100 of every other source)" in text
    with pytest.raises(ValueError, match=r"e\.g\. 100,embedded_3hop=217"):
        build_plan(_args(tmp_path, "--max-questions", "0"))


def test_an_equal_updates_plan_says_so_and_states_its_curves_and_engine(tmp_path: Path) -> None:
    extra = "--budget updates --parallel 4 --dev-questions 32 --dev-freq 10 --engine sglang --positive-control 1"
    text = plan_from_arguments(_args(tmp_path, *extra.split(), "--mini-batch", "2"))
    assert "equal updates (primary): every arm trains 16 steps" in text
    assert "compute-fair reading, secondary" in text and "within 5%" not in text
    assert "`k1`: K = 1 with the same 3 turns per attempt (Search-R1); 16 steps" in text, "no BASELINE_STEPS"
    assert "2 optimizer update(s) a step" in text
    assert "the first 32 dev questions of each source" in text and "every 10 steps" in text
    assert "verl's validation file is the dev curves' slice of `dev`" in text
    assert "sglang; 4 training run(s) at once" in text and "(the positive control)" in text
    saved = json.loads((tmp_path / "plan.json").read_text()) if (tmp_path / "plan.json").exists() else None
    assert saved is None, "no --out: nothing written"


def test_runs_side_by_side_need_the_equal_updates_budget(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="--parallel=2 needs --budget updates"):
        build_plan(_args(tmp_path, "--parallel", "2"))
    with pytest.raises(ValueError, match="DEV_FREQ >= 1"):
        build_plan(_args(tmp_path, "--dev-questions", "8", "--dev-freq", "0"))


def test_a_warm_start_recipe_is_named_in_the_plan_and_the_default_adds_nothing(tmp_path: Path) -> None:
    text = plan_from_arguments(_args(tmp_path, "--warmstart-recipe", "control"))
    assert "one warm start, the `control` recipe: `python -m mr_search_embedded.warmstart --recipe control`" in text
    assert build_plan(_args(tmp_path, "--warmstart-recipe", "control")).as_dict()["warmstart_recipe"] == "control"
    assert "warmstart_recipe" not in build_plan(_args(tmp_path)).as_dict(), "plans written before it still match"


def test_a_new_work_folder_leaves_the_committed_plan_byte_for_byte(tmp_path: Path) -> None:
    """A GPU node writes the plan again in a fresh work folder: the report's copy (committed) keeps its bytes and
    its writing time, so the gate's blob id matches; a plan that says something else is written anew."""
    report = tmp_path / "report"
    plan_from_arguments(_args(tmp_path, "--out", str(tmp_path / "first"), "--report-dir", str(report)))
    committed = (report / "plan.md").read_text().replace("Plan written 20", "Plan written 19", 1)  # another time
    (report / "plan.md").write_text(committed)
    again = plan_from_arguments(_args(tmp_path, "--out", str(tmp_path / "node"), "--report-dir", str(report)))
    assert again == committed == (report / "plan.md").read_text()
    assert read_plan(tmp_path / "node")[0]["written"].startswith("19")
    other = plan_from_arguments(
        _args(tmp_path, "--out", str(tmp_path / "other"), "--report-dir", str(report), "--seeds", "1", "2")
    )
    assert other != committed and "Plan written 20" in other and "**Seeds**: 2 (1, 2)" in other
