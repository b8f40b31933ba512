from __future__ import annotations

from pathlib import Path

import pytest

from mr_search.runlog.training_log import closest_step, cumulative_tokens, read_steps, steps_to_reach


def test_reads_attempt_em_and_tokens_over_launches(tmp_path: Path, write_metrics, mr_step, k1_step) -> None:
    run = tmp_path / "run"
    write_metrics(run, [mr_step(1, [0.0, 0.25, 0.5], 200.0)], launch="a")
    write_metrics(run, [mr_step(2, [0.25, 0.5, 0.75], 150.0)], launch="b")  # a resumed launch
    steps = read_steps(run, rows=16)
    assert [s.step for s in steps] == [1, 2]
    assert steps[1].em == (0.25, 0.5, 0.75)
    assert steps[0].response_tokens == 200.0 * 16
    assert steps[0].model_tokens == 300.0
    assert cumulative_tokens(steps) == [3200.0, 5600.0]


def test_k1_run_uses_the_reward_as_em(tmp_path: Path, write_metrics, mr_step, k1_step) -> None:
    write_metrics(tmp_path / "run", [k1_step(1, 0.375, 50.0)])
    (step,) = read_steps(tmp_path / "run", rows=4)
    assert step.em == (0.375,)
    assert step.model_tokens is None
    assert step.response_tokens == 200.0


def test_budget_steps_extrapolate_and_closest(tmp_path: Path, write_metrics, mr_step, k1_step) -> None:
    write_metrics(tmp_path / "run", [k1_step(s, 0.0, 100.0) for s in (1, 2, 3)])
    steps = read_steps(tmp_path / "run", rows=10)  # 1,000 tokens a step
    assert steps_to_reach(steps, 2000.0) == 2
    assert steps_to_reach(steps, 5500.0) == 6  # 3 done + ceil(2,500 / 1,000)
    assert closest_step(steps, 2400.0).step == 2
    assert closest_step(steps, 99999.0).step == 3


def test_errors_say_what_is_wrong(tmp_path: Path, write_metrics, mr_step, k1_step) -> None:
    with pytest.raises(FileNotFoundError, match="no metrics"):
        read_steps(tmp_path, rows=4)
    write_metrics(tmp_path / "run", [{"step": 1, "data": {"critic/rewards/mean": 0.0}}])
    with pytest.raises(ValueError, match="response_length/mean"):
        read_steps(tmp_path / "run", rows=4)
    with pytest.raises(ValueError, match="rows"):
        read_steps(tmp_path / "run", rows=0)
    (tmp_path / "bad" / "metrics").mkdir(parents=True)
    (tmp_path / "bad" / "metrics" / "x.jsonl").write_text("not json\n")
    with pytest.raises(ValueError, match=r"x.jsonl:1"):
        read_steps(tmp_path / "bad", rows=4)


def test_model_written_tokens_are_a_measure_of_their_own(tmp_path: Path, write_metrics, mr_step, k1_step) -> None:
    # The step total wins over the per-attempt counts (logs from before it have only those).
    line = mr_step(1, [0.0, 0.5], 400.0)
    line["data"]["mr_search/model_tokens"] = 150.0
    write_metrics(tmp_path / "run", [line, mr_step(2, [0.0, 0.5], 400.0)])
    steps = read_steps(tmp_path / "run", rows=4)
    assert [s.model_tokens for s in steps] == [150.0, 200.0]
    assert cumulative_tokens(steps, "model") == [150.0, 350.0]
    assert cumulative_tokens(steps) == [1600.0, 3200.0]  # sampled: passages and reflection turns included
    assert closest_step(steps, 330.0, "model").step == 2
    assert steps_to_reach(steps, 700.0, "model") == 4  # 2 run (350) + ceil(350 / 175)
    write_metrics(tmp_path / "verl", [k1_step(1, 0.5, 50.0)])
    with pytest.raises(ValueError, match="adv_estimator=mr_search"):
        cumulative_tokens(read_steps(tmp_path / "verl", rows=4), "model")
    with pytest.raises(ValueError, match="use one of"):
        cumulative_tokens(steps, "sampled")
