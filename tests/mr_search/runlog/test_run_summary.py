"""summary.md of a run folder: one row per step over every launch, EM per attempt and the reflection gain."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from mr_search.runlog.run_summary import main, write_summary
from mr_search.trainer.validation import validation_speed


def _launch(run: Path, name: str, steps: dict[int, dict[str, float]]) -> None:
    (run / "metrics").mkdir(parents=True, exist_ok=True)
    lines = [json.dumps({"step": step, "data": data}) for step, data in steps.items()]
    (run / "metrics" / f"{name}.jsonl").write_text("\n".join(lines) + "\n")


def _step(em: list[float], grad: float) -> dict[str, float]:
    data = {f"mr_search/attempt_{k}/reward_mean": x for k, x in enumerate(em, 1)}
    return {**data, "critic/rewards/mean": sum(em) / len(em), "actor/grad_norm": grad, "timing_s/step": 12.5}


def test_mr_search_run_gets_em_per_attempt_and_gain_with_resumed_launches_merged(tmp_path: Path) -> None:
    run = tmp_path / "embedded-k3-x"
    _launch(run, "a", {1: _step([0.1, 0.2, 0.4], 0.5), 2: _step([0.0, 0.0, 0.0], 0.0)})
    _launch(run, "b", {2: _step([0.2, 0.2, 0.3], 0.25)})  # the resumed launch re-ran step 2: it wins
    table = write_summary(run).splitlines()
    assert table[0] == "| step | EM@1 | EM@2 | EM@3 | gain | reward | grad_norm | s |"
    assert table[2] == "| 1 | 0.100 | 0.200 | 0.400 | +0.300 | 0.233 | 0.5 | 12.5 |"
    assert table[3] == "| 2 | 0.200 | 0.200 | 0.300 | +0.100 | 0.233 | 0.25 | 12.5 |"
    summary = (run / "summary.md").read_text()
    assert summary.startswith("# embedded-k3-x") and "reflection gain" in summary


def test_k1_run_reads_verl_reward_as_the_one_attempt(tmp_path: Path, capsys) -> None:
    run = tmp_path / "k1"
    _launch(run, "a", {1: {"critic/rewards/mean": 0.3, "actor/grad_norm": 1.0, "timing_s/step": 3.0}})
    assert main([str(run)]) == 0
    assert "| 1 | 0.300 | 0.300 | 1 | 3.0 |" in capsys.readouterr().out


def test_a_folder_without_metrics_is_a_clear_error(tmp_path: Path, capsys) -> None:
    assert main([str(tmp_path)]) == 1
    assert "no metrics; is this a train_grpo_step.sh run folder?" in capsys.readouterr().err


def test_a_validation_only_line_gets_no_row(tmp_path: Path) -> None:
    # scripts/eval_engine.sh logs one line of val-aux metrics at step 0 and trains nothing.
    run = tmp_path / "eval-k4-x"
    _launch(run, "a", {0: {"val-aux/embedded_1hop/em_at_1/mean@1": 0.5}, 1: _step([0.1, 0.2, 0.4], 0.5)})
    table = write_summary(run).splitlines()
    assert [line.split(" | ")[0] for line in table[2:]] == ["| 1"]


def test_a_timed_validation_pass_gets_a_speed_line(tmp_path: Path) -> None:
    run = tmp_path / "eval-k4-y"
    speed = validation_speed(meta_episodes=120, seconds=48.0)
    _launch(run, "a", {0: {"val-aux/embedded_1hop/em_at_1/mean@1": 0.5, **speed}})
    lines = write_summary(run).splitlines()
    assert lines[-1] == "validation before step 1: 120 meta-episodes in 48.0 s = 2.50 meta-episodes/s"
    assert lines[-1] in (run / "summary.md").read_text()


def test_validation_speed_refuses_a_pass_that_took_no_time() -> None:
    assert validation_speed(3, 2.0)["val-speed/meta_episodes_per_s"] == 1.5
    with pytest.raises(ValueError, match="not a measurement"):
        validation_speed(3, 0.0)
