"""Checks a training run proves from its own output: stops at the tags, token-in/token-out, log-prob agreement,
per-attempt credit, resume. ``scripts/gpu_check.sh`` runs two steps with the user's engine, then this.
"""

from __future__ import annotations

import argparse
import itertools
import json
import math
import shlex
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from mr_search.agent.parsing import first_close
from mr_search.agent.trace import read_traces
from mr_search.ops.diagnosis import diagnose
from mr_search.ops.resume_check import ResumeRecord, read_record
from mr_search.ops.token_decoder import load_decoder
from mr_search.runlog.training_log import read_launches, read_metrics

# The e2e test's bounds on CPU (tests/e2e/test_train_script.py); an engine in bf16 must meet them too.
MAX_K3_KL: Final = 0.01
MAX_PROBS_DIFF: Final = 0.01
K3_KL: Final = "rollout_corr/k3_kl"
PROBS_DIFF: Final = "training/rollout_probs_diff_mean"


@dataclass(frozen=True)
class Check:
    name: str
    passed: bool
    seen: str


def _model_turn_runs(mask: Sequence[int], ids: Sequence[int]) -> list[int]:
    return [int(t) for t, m in zip(ids, mask, strict=True) if m]


def check_stops(records: Sequence[Mapping[str, Any]], decode: Callable[[Sequence[int]], str], eos: set[int]) -> Check:
    """Every turn that closed a tag ends at that tag (nothing after it kept) and the engine stopped there."""
    turns = [turn for record in records for turn in record["turns"]]
    if not turns:
        return Check("stops at </search> and </answer>", False, "no traced turns (was MR_SEARCH_TRACE_DIR set?)")
    tagged = overrun = past_tag = trimmed = unexplained = 0
    for turn in turns:
        sampled, kept = turn["sampled"], turn["kept"]
        text = decode(sampled[:kept])
        if turn["closing"]:
            trimmed += 1  # the engine dropped the tag itself; the loop closed it as environment text
        if first_close(text) is None:
            ended = kept and (sampled[kept - 1] in eos or len(sampled) >= turn["max_new"])
            unexplained += not ended and not turn["closing"]
            continue
        tagged += 1
        overrun += len(sampled) > kept
        past_tag += kept > 1 and first_close(decode(sampled[: kept - 1])) is not None
    passed = tagged > 0 and overrun == 0 and past_tag == 0 and trimmed == 0 and unexplained == 0
    seen = (
        f"{len(turns)} turns, {tagged} closed a tag; engine ran past the tag in {overrun}, a kept token after the tag "
        f"in {past_tag}, tag trimmed by the engine in {trimmed}, ended without tag/eos/budget in {unexplained}"
    )
    return Check("stops at </search> and </answer>", passed, seen)


def check_token_in_token_out(records: Sequence[Mapping[str, Any]]) -> Check:
    """The model tokens of every episode are exactly the engine's sampled ids, in order (no re-tokenization)."""
    bad = 0
    tokens = 0
    for record in records:
        kept = [t for turn in record["turns"] for t in turn["sampled"][: turn["kept"]]]
        trained = _model_turn_runs(record["mask"], record["response_ids"])
        tokens += len(trained)
        bad += trained != kept[: len(trained)]
    passed = bool(records) and bad == 0 and tokens > 0
    return Check(
        "token-in/token-out", passed, f"{len(records)} episodes, {tokens} model tokens; episodes that differ: {bad}"
    )


def check_logprobs(steps: Mapping[int, Mapping[str, Any]]) -> Check:
    """Rollout and trainer log-probs agree at every step, and the weights changed before the last one."""
    if len(steps) < 2:
        return Check("rollout = trainer log-probs", False, f"{len(steps)} step(s) logged; needs 2 (an update between)")
    kl = {s: float(d.get(K3_KL, math.nan)) for s, d in steps.items()}
    diff = {s: float(d.get(PROBS_DIFF, math.nan)) for s, d in steps.items()}
    grads = [float(d.get("actor/grad_norm", 0.0)) for s, d in sorted(steps.items())[:-1]]
    updated = any(g > 0 for g in grads)
    ok = all(k < MAX_K3_KL for k in kl.values()) and all(d < MAX_PROBS_DIFF for d in diff.values()) and updated
    seen = (
        f"{K3_KL} max {max(kl.values()):.2e} (< {MAX_K3_KL}), {PROBS_DIFF} max {max(diff.values()):.2e} "
        f"(< {MAX_PROBS_DIFF}); non-zero update before the last step: {updated}"
    )
    return Check("rollout = trainer log-probs (weights reach the engine)", ok, seen)


def check_attempts(steps: Mapping[int, Mapping[str, Any]], attempts: int) -> Check:
    """Per-attempt metrics every step; some attempt-level advantage is non-zero."""
    keys = {k: f"mr_search/attempt_{k}/reward_mean" for k in range(1, attempts + 1)}
    missing = [(s, k) for s, d in steps.items() for k, key in keys.items() if key not in d]
    nonzero = {
        k: max((float(d.get(f"mr_search/attempt_{k}/adv_nonzero_frac", 0.0)) for d in steps.values()), default=0.0)
        for k in range(1, attempts + 1)
    }
    passed = bool(steps) and not missing and any(v > 0 for v in nonzero.values())
    fracs = ", ".join(f"@{k} {v:.2f}" for k, v in nonzero.items())
    seen = f"missing (step, k): {missing[:4]}; non-zero adv: {fracs}"
    return Check("per-attempt metrics and advantages", passed, seen)


def _launch_steps(run_dir: Path) -> list[list[int]]:
    """The steps each launch (or the part after a resume inside one) logged, in order: one list a metrics file."""
    try:
        launches = read_launches(run_dir)
    except FileNotFoundError:  # no metrics at all: no launch to compare
        return []
    return [sorted(steps) for steps in launches if steps]


def check_resume(run_dir: Path) -> Check | None:
    """A later launch (or the part after an in-launch resume) starts right after the saved step; None without one."""
    launches = _launch_steps(run_dir)
    if len(launches) < 2:
        return None
    ok = all(later[0] == earlier[-1] + 1 for earlier, later in itertools.pairwise(launches))
    return Check("resume continues at the saved step", ok, " then ".join(f"steps {s[0]}-{s[-1]}" for s in launches))


def _questions(run_dir: Path, step: int) -> set[str]:
    """The prompts of one step as verl dumped them (``trainer.rollout_data_dir``: ``rollouts/<step>.jsonl``)."""
    path = run_dir / "rollouts" / f"{step}.jsonl"
    if not path.exists():
        return set()
    return {json.loads(line)["input"] for line in path.read_text().splitlines() if line.strip()}


def _record_problems(record: ResumeRecord) -> list[str]:
    """What a resume inside one launch got wrong, from its ``resume_check.json``; empty when nothing."""
    n, wrong = record.saved_step, []
    if (record.steps_after_rewind, record.steps_after_resume) != (n - 1, n):
        wrong.append(f"step counter {record.steps_after_rewind} -> {record.steps_after_resume}, not {n - 1} -> {n}")
    if record.checkpoint_state["N-1"]["model"] == record.checkpoint_state["N"]["model"]:
        wrong.append(f"checkpoints {n - 1} and {n} hold the same weights (no update between: nothing to tell apart)")
    if record.rewound_state != record.checkpoint_state["N-1"]:
        wrong.append(f"the actor after the rewind is not checkpoint {n - 1}")
    if record.resumed_state != record.checkpoint_state["N"]:
        wrong.append(f"the actor after the resume is not checkpoint {n}")
    if record.loader_after_rewind == record.loader_at_end:
        wrong.append("the dataloader did not move back at the rewind")
    if record.loader_after_resume != record.loader_at_end:
        wrong.append(f"the dataloader after the resume is not where step {n} left it")
    if record.continued_steps < 1:
        wrong.append("no step after the resume")
    return wrong


def check_resumed_state(run_dir: Path) -> Check | None:
    """The resumed run continues from the saved state: weights, optimizer, data position (no question seen twice)."""
    launches = _launch_steps(run_dir)
    record = read_record(run_dir / "checkpoints")
    if len(launches) < 2 and record is None:
        return None
    wrong = _record_problems(record) if record else []
    seen = []
    if record:
        seen.append(
            f"in one launch: rewound to {record.rewound_to}, resumed at {record.steps_after_resume}; model and "
            f"optimizer = checkpoint {record.saved_step} ({record.resumed_state['model']}, "
            f"not {record.rewound_state['model']}); "
            f"dataloader at {record.samples_after_resume} samples (rewind: {record.samples_after_rewind})"
        )
    if len(launches) >= 2:
        resumed = launches[-1][0]
        new = _questions(run_dir, resumed)
        earlier = set().union(*(_questions(run_dir, s) for s in range(1, resumed)))
        if not new or not earlier:
            wrong.append(f"no rollouts/ of step {resumed} and the steps before it (trainer.rollout_data_dir)")
        elif new & earlier:
            wrong.append(f"step {resumed} repeats {len(new & earlier)} of the earlier steps' {len(earlier)} questions")
        else:
            seen.append(f"step {resumed}: {len(new)} questions, none of the earlier steps' {len(earlier)}")
    return Check("resume restores weights, optimizer, data position", not wrong, "; ".join(wrong or seen))


def model_path(run_dir: Path) -> str | None:
    """The policy the run trained (``actor_rollout_ref.model.path`` in ``command.txt``)."""
    command = run_dir / "command.txt"
    if not command.exists():
        return None
    for word in shlex.split(command.read_text()):
        if word.startswith("actor_rollout_ref.model.path="):
            return word.split("=", 1)[1]
    return None


def run_checks(run_dir: Path, attempts: int, model: str | None = None) -> list[Check]:
    steps = read_metrics(run_dir)
    records = read_traces(run_dir / "trace") if (run_dir / "trace").is_dir() else []
    path = model or model_path(run_dir)
    if path is None:
        raise ValueError(f"{run_dir}/command.txt names no model; pass --model")
    tokenizer = load_decoder(path)
    checks = [
        check_stops(records, tokenizer.decode, set(tokenizer.special_ids)),
        check_token_in_token_out(records),
        check_logprobs(steps),
        check_attempts(steps, attempts),
    ]
    resumes = [check_resume(run_dir), check_resumed_state(run_dir)]
    return [*checks, *(c for c in resumes if c)]


def render(checks: Sequence[Check]) -> str:
    lines = ["| check | result | seen |", "|---|---|---|"]
    lines += [f"| {c.name} | {'pass' if c.passed else 'FAIL'} | {c.seen} |" for c in checks]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("run_dir", type=Path, help="a train_grpo_step.sh run folder")
    parser.add_argument("--attempts", type=int, default=3, help="K of the run (default 3)")
    parser.add_argument("--model", help="tokenizer folder (default: the model in RUN_DIR/command.txt)")
    args = parser.parse_args(argv)
    log_path = args.run_dir / "train.log"
    log = log_path.read_text(errors="replace") if log_path.exists() else ""
    try:
        checks = run_checks(args.run_dir, args.attempts, args.model)
    except (FileNotFoundError, ValueError) as error:
        print(f"run_checks: {error}", file=sys.stderr)
        checks = []
    if checks:
        table = render(checks)
        print(table)
        (args.run_dir / "checks.md").write_text(table + "\n", encoding="utf-8")
    failed = not checks or not all(c.passed for c in checks)
    if failed and (found := diagnose(log)):
        print(f"cause: {found.cause}\nfix:   {found.fix}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
