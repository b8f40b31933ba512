"""The comparison's plan: the test written down before any training (metric, comparison, pass rule, arms, seeds,
budget, splits, planned wall time). compare.sh writes it to the work folder (plan.json, plan.md) and the report
folder (plan.md) first; the report opens with it verbatim.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from mr_search.eval.question_cap import QuestionCap, recorded
from mr_search_embedded.compare.arms import K1, K1_ALL_TURNS, MR, NO_CREDIT, Arm
from mr_search_embedded.compare.bootstrap import RESAMPLES, SEED
from mr_search_embedded.compare.layout import PLAN_JSON, PLAN_MD
from mr_search_embedded.compare.walltime import Timings, WallTime

GAMMA_ZERO = (
    "gamma = 0 isolates the attempt-level credit: `mr_search/advantage/core.py` computes "
    "A_{i,s} = sum_{s' >= s} gamma^(s'-s) r~_{i,s'} from the per-attempt leave-one-out rewards r~ and skips the "
    "sum at gamma = 0, leaving A_{i,s} = r~_{i,s}; the baseline, the reward, the truncation rule and the spread of "
    "A_{i,s} over attempt s's tokens (its reflection included) are the same code at either gamma, so only the later "
    "attempts' rewards stop flowing back (the paper's ablation: 46.0 -> 43.8 average EM at 7B)."
)


TOKENS = "tokens"
UPDATES = "updates"
BUDGETS = (TOKENS, UPDATES)
BUDGET_MEASURES = {
    TOKENS: "model-written tokens (mr_search/model_tokens)",
    UPDATES: "updates at the same questions a step (the paper's protocol)",
}


@dataclass(frozen=True)
class Plan:
    """What the comparison will run and how its result is judged, fixed before the first training step."""

    world: str
    policy: str
    arms: tuple[Arm, ...]
    seeds: tuple[int, ...]
    steps: int  # MR-Search's: its model-written tokens are the budget
    baseline_steps: int  # the K = 1 arms' first launch
    batch: int
    group: int
    lr: str
    tolerance: float
    max_questions: int | QuestionCap
    questions: int | None  # the test questions evaluated; None in a dry run (the split is not built)
    response_length: int
    max_new_tokens: int
    max_information_tokens: int
    splits: Mapping[str, str]  # {"train", "dev", "test"}: parquet paths, or what they will be
    probed: Mapping[str, Any] | None  # mr_search_embedded.reads.Probed.as_dict(); None in a dry run
    timings: Timings | None  # None: no measured step times found (``wall_note`` says why)
    wall: WallTime | None
    wall_note: str = ""
    budget: str = "tokens"  # BUDGETS: what every arm is matched on
    dev_questions: int = 0  # first N dev questions per source evaluated during training (0: none)
    dev_freq: int = 0  # every N steps (and before the first)
    parallel: int = 1  # training runs at once on the one card
    engine: str = ""  # the rollout engine (cpu, hf, sglang, vllm); empty in a dry run that names none
    positive_control: bool = False  # outcome feedback: cross-attempt credit is the route to reward by construction
    mini_batch: int = 0  # questions per optimizer update; 0: the batch (one update a step)
    warmstart_recipe: str = "world"  # the warm start every arm starts from (python -m mr_search_embedded.warmstart)
    written: str = field(default_factory=lambda: datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC"))
    resamples: int = RESAMPLES
    bootstrap_seed: int = SEED

    def first_steps(self, arm: Arm) -> int:
        if self.budget == UPDATES or arm.first_steps == "reference":
            return self.steps
        return self.baseline_steps

    def as_dict(self) -> dict[str, Any]:
        recipe = {} if self.warmstart_recipe == "world" else {"warmstart_recipe": self.warmstart_recipe}
        return {
            **recipe,
            "written": self.written,
            "world": self.world,
            "policy": self.policy,
            "metric": metric_text(self),
            "comparison": comparison_text(self),
            "pass_rule": pass_rule_text(self),
            "arms": [{**a.as_dict(), "first_launch_steps": self.first_steps(a)} for a in self.arms],
            "seeds": list(self.seeds),
            "budget": {
                "kind": self.budget,
                "measure": BUDGET_MEASURES[self.budget],
                "reference": MR,
                "reference_steps": self.steps,
                "tolerance": self.tolerance,
                "batch": self.batch,
                "mini_batch": self.mini_batch or self.batch,
                "group": self.group,
                "lr": self.lr,
            },
            "evaluation": {
                "decoding": "greedy",
                "max_questions_per_source": recorded(self.max_questions),
                "questions": self.questions,
                "response_length": self.response_length,
                "max_new_tokens": self.max_new_tokens,
                "max_information_tokens": self.max_information_tokens,
            },
            "dev_curves": {"questions_per_source": self.dev_questions, "every_steps": self.dev_freq},
            "runs_at_once": self.parallel,
            "engine": self.engine,
            "positive_control": self.positive_control,
            "split": "test",
            "splits": dict(self.splits),
            "probed": None if self.probed is None else dict(self.probed),
            "bootstrap": {"resamples": self.resamples, "seed": self.bootstrap_seed},
            "timings": None if self.timings is None else self.timings.as_dict(),
            "wall_time": None if self.wall is None else self.wall.as_dict(),
        }


def _first_questions(cap: int | QuestionCap) -> str:
    if isinstance(cap, int):
        return f"the first {cap} questions of each data source"
    named = ", ".join(f"{n} of {s}" for s, n in sorted(cap.by_source.items()))
    rest = "" if cap.default is None else f", {cap.default} of every other source"
    return f"the first questions of each data source ({named}{rest})"


def metric_text(plan: Plan) -> str:
    mr = _arm(plan, MR)
    questions = f"{plan.questions} questions" if plan.questions is not None else "the count is fixed when it starts"
    all_turns = next((a for a in plan.arms if a.name == K1_ALL_TURNS), None)
    own = f"; `{K1_ALL_TURNS}`: one attempt of its {all_turns.turns}" if all_turns is not None else ""
    return (
        f"exact match (EM, %) of the final answer on the test split, greedy, K_eval = K = {mr.eval_attempts} attempts "
        f"in one context ({mr.turns} turns each{own}), "
        f"{_first_questions(plan.max_questions)} ({questions}), {plan.response_length} tokens "
        f"a meta-episode, {plan.max_new_tokens} a turn, {plan.max_information_tokens} a passages block"
    )


def comparison_text(plan: Plan) -> str:
    k = _arm(plan, MR).eval_attempts
    return (
        f"MR-Search's EM at its last attempt (k = {k}) minus the K = 1 baseline's best EM@k over k <= {k} under the "
        f"same evaluation (the margin, points), each question's EM averaged over the {len(plan.seeds)} seeds first"
    )


def pass_rule_text(plan: Plan) -> str:
    return (
        f"met when the 95% interval of a question-level paired bootstrap ({plan.resamples:,} resamples, seed "
        f"{plan.bootstrap_seed}, the baseline's best k chosen again in every resample) has its low end above 0 and "
        "the margin is not below 0; else not met, and the report names the next hypothesis and what it predicts"
    )


def _arm(plan: Plan, name: str) -> Arm:
    for arm in plan.arms:
        if arm.name == name:
            return arm
    raise ValueError(f"the plan has no {name} arm")


def _minutes(seconds: float) -> str:
    return f"{seconds / 60:.0f} min"


def wall_time_text(plan: Plan) -> str:
    wall, timings = plan.wall, plan.timings
    if wall is None or timings is None:
        return f"not planned: {plan.wall_note}"
    per_arm = ", ".join(f"{a.name} {plan.first_steps(a)} x {timings.step_seconds[a.name]:.1f} s" for a in plan.arms)
    text = (
        f"~{_minutes(wall.total)}: per seed {_minutes(wall.training_per_seed)} of training ({per_arm}, plus "
        f"{timings.launch_seconds:.0f} s a launch) and {_minutes(wall.evaluation_per_seed)} of test evaluation "
        f"({timings.eval_seconds:.2f} s a question-attempt; beside the next seed's training), the warm start's "
        f"{_minutes(wall.warm_evaluation)}; step times measured in `{timings.source}`"
    )
    if timings.notes:
        text += f" ({'; '.join(timings.notes)})"
    if wall.fits:
        return text + f". Within the {_minutes(wall.aim)} aim."
    text += f". **Above the {_minutes(wall.aim)} aim.** It would take ~{_minutes(wall.total)} on this machine"
    options = []
    if wall.seeds_that_fit:
        options.append(f"SEEDS={wall.seeds_that_fit} fits the aim at these steps")
    if wall.steps_that_fit:
        options.append(
            f"STEPS={wall.steps_that_fit} (the other arms' steps scaled alike) fits it at {len(plan.seeds)} seeds"
        )
    if not options:
        options.append("no seed count or step count fits it: run the arms on a GPU (ROLLOUT_ENGINE=hf) or longer")
    return text + "; " + "; ".join(options) + " (fewer seeds or steps weaken the test: the plan keeps them)."


WRITTEN_LINE = "Plan written {}, before any training; the result below it is judged by it alone."


def written_of(text: str) -> str | None:
    """The writing time a rendered plan states (``WRITTEN_LINE``), or None where it states none."""
    pattern = re.escape(WRITTEN_LINE).replace(re.escape("{}"), "(.+?)")
    found = re.search(f"^{pattern}$", text, re.MULTILINE)
    return None if found is None else found.group(1)


def render_plan(plan: Plan) -> str:
    """The plan as markdown: the report's header."""
    mr = _arm(plan, MR)
    lines = [
        f"# MR-Search against K = 1 on the embedded world ({plan.world}, policy {plan.policy})",
        "",
        WRITTEN_LINE.format(plan.written),
        "",
        f"- **Metric**: {metric_text(plan)}.",
        f"- **Comparison**: {comparison_text(plan)}.",
        f"- **Pass rule**: {pass_rule_text(plan)}.",
        f"- **Arms** ({_warm_text(plan)}; batch {plan.batch} questions x n = {plan.group}, "
        f"{plan.batch // (plan.mini_batch or plan.batch)} optimizer update(s) a step, lr {plan.lr}, the mr_search "
        "estimator: leave-one-out, no std):",
    ]
    for arm in plan.arms:
        if plan.budget == UPDATES:
            steps = f"{plan.steps} steps"
        else:
            steps = "its steps are the budget" if arm.name == MR else f"first launch {plan.first_steps(arm)} steps"
        best = arm.final == "best" and arm.eval_attempts > 1
        figure = f"best EM@k, k <= {arm.eval_attempts}" if best else f"EM@{arm.eval_attempts}"
        lines.append(f"  - `{arm.name}`: {arm.what}; {steps}; evaluated {arm.shape} (figure: {figure}).")
    if any(a.name == NO_CREDIT for a in plan.arms):
        lines.append(f"- **{NO_CREDIT}**: {GAMMA_ZERO}")
    lines += [
        f"- **Budget**: {_budget_text(plan)}",
        f"- **Seeds**: {len(plan.seeds)} ({', '.join(map(str, plan.seeds))}).",
        f"- **Splits**: training reads `train` only ({_validation_text(plan)}); "
        "`dev`: no choice is made inside this run (this plan fixes every setting); `test`: read once, by the final "
        f"evaluation of each trained checkpoint and of the warm start (K_eval = {mr.eval_attempts}), whose results "
        "nothing reads before the report. " + _splits_text(plan),
        f"- **Secondary** (reported, not the test): MR-Search's margin over every arm besides `{K1}` (over its "
        "last attempt for a K > 1 arm, its best EM@k for a K = 1 arm), each with its own paired interval; everything "
        "per question kind (hops); the reflection gain EM@K - EM@1 of every arm (the earlier harness's test: "
        "MR-Search's gain positive and above K = 1's by twice the seed spread).",
        f"- **Planned wall time**: {wall_time_text(plan)}",
    ]
    if plan.dev_questions:
        lines.append(
            f"- **Dev curves** (monitoring, no choice made on them): the first {plan.dev_questions} dev questions of "
            f"each source, greedy at K = {mr.eval_attempts} for every arm, before the first step and every "
            f"{plan.dev_freq} steps, through the training's engine (verl's validation pass); EM@k against updates "
            "and against model-written tokens."
        )
    if plan.engine:
        control = "on: the reflection turns say whether the last answer was right" if plan.positive_control else "off"
        lines.append(
            f"- **Engine**: {plan.engine}; {plan.parallel} training run(s) at once on the card; outcome feedback "
            f"{control} ({'the positive control' if plan.positive_control else 'the paper setting'})."
        )
    lines.append("")
    return "\n".join(lines)


def _warm_text(plan: Plan) -> str:
    if plan.warmstart_recipe == "world":
        return "one warm start"
    return (
        f"one warm start, the `{plan.warmstart_recipe}` recipe: `python -m mr_search_embedded.warmstart --recipe "
        f"{plan.warmstart_recipe}`"
    )


def _validation_text(plan: Plan) -> str:
    if plan.dev_questions:
        return "verl's validation file is the dev curves' slice of `dev`"
    return "verl's validation file is the train parquet, never evaluated"


def _budget_text(plan: Plan) -> str:
    if plan.budget == UPDATES:
        return (
            f"equal updates (primary): every arm trains {plan.steps} steps of {plan.batch} questions x n = "
            f"{plan.group}, the same questions in the same order per seed, and its step-{plan.steps} checkpoint is "
            "evaluated. Each arm's model-written and sampled tokens are reported beside it (the compute-fair "
            "reading, secondary)."
        )
    return (
        f"every arm matched to the same seed's MR-Search run ({plan.steps} steps) in model-written "
        "tokens (`mr_search/model_tokens`: what the policy wrote; passages, reflection turns and corrective messages "
        f"left out), within {plan.tolerance:.0%}; an arm short of it resumes, and its checkpoint evaluated is the "
        "step closest to it. Each arm's steps, model-written and sampled tokens are reported."
    )


def _splits_text(plan: Plan) -> str:
    parts = [f"{name}: `{path}`" for name, path in plan.splits.items()]
    text = "Parquet files: " + "; ".join(parts) + "."
    if plan.probed is None:
        return text + " Whether test was probed is checked when the run starts (the reads ledger next to it)."
    state = "**probed**" if plan.probed["probed"] else "not probed"
    return text + f" Test {state}: {plan.probed['reason']}."


def write_plan(plan: Plan, work: Path) -> tuple[Path, Path]:
    """plan.json and plan.md in ``work``; refuses to replace a different plan (a continued run keeps its test)."""
    work = Path(work)
    work.mkdir(parents=True, exist_ok=True)
    json_path, md_path = work / PLAN_JSON, work / PLAN_MD
    data = plan.as_dict()
    if json_path.is_file():
        old = json.loads(json_path.read_text(encoding="utf-8"))
        if _fixed(old) != _fixed(data):
            raise ValueError(
                f"{json_path}: this work folder's plan differs from the knobs given in {_difference(old, data)}; a "
                "continued run keeps the test it was started with: give the same knobs or a new WORK_DIR"
            )
        return json_path, md_path  # the first writing stands, with its time
    json_path.write_text(json.dumps(data, indent=1) + "\n", encoding="utf-8")
    md_path.write_text(render_plan(plan), encoding="utf-8")
    return json_path, md_path


def _fixed(data: Mapping[str, Any]) -> dict[str, Any]:
    """What a plan fixes: everything but when it was written, the time estimates and the probe state."""
    return {k: v for k, v in data.items() if k not in ("written", "timings", "wall_time", "probed")}


def _difference(old: Mapping[str, Any], new: Mapping[str, Any]) -> str:
    keys = [k for k in _fixed(new) if _fixed(old).get(k) != _fixed(new).get(k)]
    return ", ".join(keys)


def read_plan(work: Path) -> tuple[dict[str, Any], str]:
    """plan.json and plan.md of a work folder."""
    work = Path(work)
    json_path, md_path = work / PLAN_JSON, work / PLAN_MD
    if not json_path.is_file() or not md_path.is_file():
        raise FileNotFoundError(f"{work}: no {PLAN_JSON} / {PLAN_MD}; compare.sh writes them before training")
    return json.loads(json_path.read_text(encoding="utf-8")), md_path.read_text(encoding="utf-8")


def arms_of(plan: Mapping[str, Any]) -> list[Arm]:
    """The plan's arms back as ``Arm`` objects."""
    fields = Arm.__dataclass_fields__
    return [Arm(**{k: v for k, v in entry.items() if k in fields}) for entry in plan["arms"]]


def seeds_of(plan: Mapping[str, Any]) -> Sequence[int]:
    return list(plan["seeds"])
