"""The lab's GPU step settings compose onto verl's config, and the step benchmark's report reads its run folders."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from hydra import compose, initialize_config_dir

from mr_search_embedded import gpu_step

CONFIG_DIR = Path(__file__).resolve().parents[3] / "configs"


def _compose(overrides: tuple[str, ...]):
    with initialize_config_dir(config_dir=str(CONFIG_DIR), version_base=None):
        return compose(config_name="mr_search_embedded", overrides=list(overrides))


def test_the_fast_profile_sets_what_it_says_in_verls_own_keys() -> None:
    config = _compose(gpu_step.overrides("fast"))
    model, actor = config.actor_rollout_ref.model, config.actor_rollout_ref.actor
    assert model.use_fused_kernels is True and model.fused_kernel_options.impl_backend == "torch"
    assert config.algorithm.rollout_correction.bypass_mode is True
    assert actor.use_dynamic_bsz is True and actor.ppo_max_token_len_per_gpu == gpu_step.MAX_TOKENS
    # the old-log-prob and reference passes take the actor's dynamic micro-batches through verl's interpolation
    assert config.actor_rollout_ref.rollout.log_prob_use_dynamic_bsz is True
    assert config.actor_rollout_ref.rollout.log_prob_max_token_len_per_gpu == gpu_step.MAX_TOKENS
    baseline = _compose(gpu_step.overrides("baseline"))
    assert baseline.actor_rollout_ref.model.use_fused_kernels is False
    assert baseline.algorithm.rollout_correction.bypass_mode is False


def test_an_unknown_profile_names_the_known_ones() -> None:
    with pytest.raises(ValueError, match="'slow' is not one of baseline, fast"):
        gpu_step.overrides("slow")


def _run(folder: Path, steps: list[dict[str, float]]) -> None:
    (folder / "metrics").mkdir(parents=True)
    lines = [json.dumps({"step": i, "data": data}) for i, data in enumerate(steps, 1)]
    (folder / "metrics" / "20261206-000000-1.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")


def _step(step: float, gen: float, old: float, update: float) -> dict[str, float]:
    return {"timing_s/step": step, "timing_s/gen": gen, "timing_s/old_log_prob": old, "timing_s/update_actor": update}


def test_the_report_leaves_out_the_warm_up_step_and_gives_the_ratio_and_the_sharing_figure(tmp_path: Path) -> None:
    _run(tmp_path / "baseline", [_step(200, 50, 50, 90), _step(70, 8, 14, 48), _step(72, 9, 14, 49)])
    _run(tmp_path / "fast", [_step(90, 50, 0, 30), _step(10, 7, 0, 2), _step(12, 9, 0, 2)])
    for i, step in enumerate((14.0, 16.0), 1):
        _run(tmp_path / "share2" / str(i), [_step(99, 1, 0, 1), _step(step, 1, 0, 1)])
    for i in (1, 2, 3, 4):
        _run(tmp_path / "share4" / str(i), [_step(99, 1, 0, 1), _step(20.0, 1, 0, 1)])

    text = gpu_step.summarize(tmp_path)

    result = json.loads((tmp_path / "step_bench.json").read_text(encoding="utf-8"))
    assert result["alone"]["baseline"]["step_s"] == pytest.approx(71.0)
    assert result["alone"]["fast"]["steps"] == [2, 3]
    assert result["alone"]["fast"]["other_s"] == pytest.approx(11.0 - 8.0 - 2.0)
    assert result["baseline_over_fast"] == pytest.approx(71.0 / 11.0)
    assert result["sharing"]["shared"]["2"]["slowdown"] == pytest.approx(15.0 / 11.0)
    assert result["sharing"]["shared"]["4"]["slowdown"] == pytest.approx(20.0 / 11.0)
    assert result["sharing"]["runs_within_limit"] == 2  # 4 runs slow a step by 1.82x, over the 1.5x limit
    assert "**6.45x**" in text and "| 4 | 20.0 | 1.82x |" in text


def test_the_command_line_says_what_is_missing(tmp_path: Path) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "mr_search_embedded.gpu_step", "summarize", str(tmp_path)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 1 and "the fast profile's run is missing" in result.stderr
    shown = subprocess.run(
        [sys.executable, "-m", "mr_search_embedded.gpu_step", "overrides", "fast"],
        capture_output=True,
        text=True,
        check=True,
    )
    assert shown.stdout.splitlines() == list(gpu_step.overrides("fast"))
