"""The checks of a GPU run, on run folders made here: each passes on a good run and names what a bad one did."""

from __future__ import annotations

import json
from pathlib import Path

from mr_search.ops.run_checks import (
    check_attempts,
    check_logprobs,
    check_resume,
    check_stops,
    check_token_in_token_out,
    main,
    model_path,
)

# A character-level "tokenizer": token i is chr(i); "<" + ... keeps the tags readable.
EOS = 0


def decode(ids) -> str:
    return "".join("<eos>" if t == EOS else chr(t) for t in ids)


def encode(text: str) -> list[int]:
    return [ord(c) for c in text]


def turn(text: str, extra: str = "", max_new: int = 100, closing: str = "") -> dict:
    sampled = encode(text + extra)
    return {
        "sampled": sampled,
        "kept": len(encode(text)),
        "closing": encode(closing),
        "stop_reason": "stop",
        "max_new": max_new,
    }


def record(*turns: dict, env: str = "ENV") -> dict:
    ids, mask = [], []
    for t in turns:
        kept = t["sampled"][: t["kept"]]
        ids += kept + encode(env)
        mask += [1] * len(kept) + [0] * len(env)
    return {"request_id": "r", "turns": list(turns), "response_ids": ids, "mask": mask, "attempt_ids": [0] * len(ids)}


def test_stops_pass_when_every_turn_ends_at_its_tag_or_eos_or_budget() -> None:
    good = record(turn("<search>q</search>"), turn("<answer>x</answer>"), turn("no tag" + chr(EOS)))
    assert check_stops([good], decode, {EOS}).passed
    budget = record(turn("abcd", max_new=4))
    assert check_stops([good, budget], decode, {EOS}).passed


def test_stops_fail_on_overrun_trimmed_tag_or_a_turn_that_just_ends() -> None:
    overrun = record(turn("<answer>x</answer>", extra="more"))
    assert "ran past the tag in 1" in check_stops([overrun], decode, {EOS}).seen
    trimmed = record(turn("<answer>x", closing="</answer>"))
    result = check_stops([trimmed], decode, {EOS})
    assert not result.passed and "trimmed by the engine in 1" in result.seen
    silent = record(turn("half a thought"))
    assert "ended without tag/eos/budget in 1" in check_stops([silent], decode, {EOS}).seen
    kept_after = {**turn("<answer>x</answer>z"), "kept": len("<answer>x</answer>z")}
    assert "a kept token after the tag in 1" in check_stops([record(kept_after)], decode, {EOS}).seen
    assert not check_stops([], decode, {EOS}).passed


def test_token_in_token_out_compares_trained_tokens_with_sampled_ones() -> None:
    good = record(turn("<search>q</search>"), turn("<answer>x</answer>"))
    assert check_token_in_token_out([good]).passed
    retokenized = json.loads(json.dumps(good))
    retokenized["response_ids"][1] += 1  # a model token that is not what the engine sampled
    result = check_token_in_token_out([good, retokenized])
    assert not result.passed and "differ: 1" in result.seen


def _steps(kl: float, grad: float = 1.0) -> dict[int, dict]:
    base = {"training/rollout_probs_diff_mean": 1e-3, "actor/grad_norm": grad}
    return {1: {**base, "rollout_corr/k3_kl": 1e-4}, 2: {**base, "rollout_corr/k3_kl": kl}}


def test_logprob_agreement_needs_small_kl_and_an_update() -> None:
    assert check_logprobs(_steps(2e-4)).passed
    assert not check_logprobs(_steps(0.05)).passed  # weights that never reached the engine drift like this (CPU: 0.04)
    assert not check_logprobs(_steps(2e-4, grad=0.0)).passed  # no update: agreement proves nothing
    assert not check_logprobs({1: _steps(1e-4)[1]}).passed


def test_attempt_metrics_and_advantages() -> None:
    step = {f"mr_search/attempt_{k}/reward_mean": 0.5 for k in (1, 2, 3)}
    assert not check_attempts({1: step}, 3).passed  # every advantage zero
    assert check_attempts({1: {**step, "mr_search/attempt_2/adv_nonzero_frac": 0.25}}, 3).passed
    assert "(1, 3)" in check_attempts({1: {"mr_search/attempt_1/reward_mean": 1}}, 3).seen


def _launch(run: Path, name: str, steps: list[int]) -> None:
    (run / "metrics").mkdir(parents=True, exist_ok=True)
    lines = [json.dumps({"step": s, "data": {}}) for s in steps]
    (run / "metrics" / f"{name}.jsonl").write_text("\n".join(lines) + "\n")


def test_resume_continues_at_the_saved_step(tmp_path: Path) -> None:
    _launch(tmp_path, "a", [1, 2])
    assert check_resume(tmp_path) is None
    _launch(tmp_path, "b", [3])
    assert check_resume(tmp_path).passed
    _launch(tmp_path, "c", [1])
    assert not check_resume(tmp_path).passed  # started over instead of resuming


def test_main_reports_a_crashed_run_with_its_cause(tmp_path: Path, capsys) -> None:
    (tmp_path / "train.log").write_text("RuntimeError: CUDA out of memory\n")
    assert main([str(tmp_path)]) == 1
    assert "cause: out of GPU memory" in capsys.readouterr().out


def test_model_path_comes_from_the_command(tmp_path: Path) -> None:
    (tmp_path / "command.txt").write_text("python -m verl.trainer.main_ppo actor_rollout_ref.model.path=/m/x y=1 ")
    assert model_path(tmp_path) == "/m/x"
