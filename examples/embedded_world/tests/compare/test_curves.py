"""Dev curves: the dev slice, and EM@k per dev point against updates and model-written tokens, over launches."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

from mr_search.runlog.training_log import read_metrics, read_steps
from mr_search_embedded.compare.curves import curves, dev_slice, logged_steps, run_curve, write_curves


def _val(step: int, em: dict[str, list[float]]) -> dict:
    data = {}
    for source, values in em.items():
        for k, value in enumerate(values, 1):
            data[f"val-aux/{source}/em_at_{k}/mean@1"] = value
    return {"step": step, "data": data}


def _train(step: int, tokens: float) -> dict:
    data = {"response_length/mean": 10.0, "timing_s/step": 1.0, "mr_search/model_tokens": tokens}
    data.update({f"mr_search/attempt_{k}/reward_mean": 0.5 for k in (1, 2, 3)})
    return {"step": step, "data": data}


def test_the_dev_slice_takes_the_first_questions_of_each_source(tmp_path: Path) -> None:
    frame = pd.DataFrame({"data_source": ["a", "b", "a", "b", "a"], "q": [1, 2, 3, 4, 5]})
    frame.to_parquet(tmp_path / "dev.parquet")
    assert dev_slice(tmp_path / "dev.parquet", 2, tmp_path / "slice.parquet") == 4
    assert pd.read_parquet(tmp_path / "slice.parquet")["q"].tolist() == [1, 2, 3, 4]
    with pytest.raises(ValueError, match="per_source=0"):
        dev_slice(tmp_path / "dev.parquet", 0, tmp_path / "x.parquet")


def test_a_curve_over_a_resumed_run(tmp_path: Path, write_metrics) -> None:
    run = tmp_path / "seed_1" / "mr_search"
    # launch 1: validation before the first step, steps 1-2 with a dev point at 2; launch 2 resumes at 2: its
    # validation before its first step lands on step 2 again (same weights), then step 3.
    write_metrics(run, [_val(0, {"s1": [0.5, 0.5, 0.5], "s2": [0.0, 0.0, 0.5]}), _train(1, 100.0)], "20260101-1")
    write_metrics(run, [_train(2, 50.0), _val(2, {"s1": [1.0, 1.0, 1.0], "s2": [0.0, 0.5, 0.5]})], "20260101-1")
    write_metrics(run, [_val(2, {"s1": [1.0, 1.0, 1.0], "s2": [0.0, 0.5, 0.5]}), _train(3, 25.0)], "20260102-2")
    curve = run_curve(run)
    assert curve["steps"] == [0, 2]
    assert curve["model_tokens"] == [0.0, 150.0]
    assert curve["em"][1] == [25.0, 50.0] and curve["em"][3] == [50.0, 75.0], "mean over sources, in %"
    assert logged_steps(run) == 3
    assert "timing_s/step" in read_metrics(run)[2], "the validation line of step 2 merges with its training line"
    assert [s.step for s in read_steps(run, rows=4)] == [1, 2, 3], "the validation-only step 0 is no training step"
    found = curves(tmp_path)
    assert list(found) == ["mr_search"] and list(found["mr_search"]) == ["1"]
    path = write_curves(tmp_path, tmp_path / "report")
    assert path is not None and json.loads(path.read_text())["mr_search"]["1"]["steps"] == [0, 2]
    assert (tmp_path / "report" / "dev_curves.png").stat().st_size > 0


def test_no_dev_point_no_curves(tmp_path: Path, write_metrics) -> None:
    write_metrics(tmp_path / "seed_1" / "k1", [_train(1, 10.0)])
    assert write_curves(tmp_path, tmp_path / "report") is None
    assert logged_steps(tmp_path / "nowhere") == 0
