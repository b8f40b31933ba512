"""report.md of a comparison: the plan verbatim, the final-answer test, then what explains it."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from mr_search_embedded.compare.aggregate import AVERAGE, Spread
from mr_search_embedded.compare.arms import K1, MR
from mr_search_embedded.compare.history import history_table
from mr_search_embedded.compare.hypothesis import Hypothesis, hypothesis_paragraph
from mr_search_embedded.compare.plots import EM_VS_ATTEMPT, EM_VS_STEP, labels
from mr_search_embedded.compare.retries import retry_table
from mr_search_embedded.compare.verdict import GainVerdict


def _interval(ci: Sequence[float]) -> str:
    return f"[{ci[0]:+.1f}, {ci[1]:+.1f}]"


def final_test_text(comparison: Mapping[str, Any]) -> str:
    """The test's outcome in words and numbers."""
    t = comparison["final_answer_test"]
    per_arm = t["trajectories"]
    counted = sum(per_arm.values())
    verdict = "**met**" if t["met"] else "**not met**"
    reasons = []
    if t["ci95"][0] <= 0:
        reasons.append("the interval's low end is not above 0")
    if t["margin"] < 0:
        reasons.append("the margin is below 0")
    why = f" ({' and '.join(reasons)})" if reasons else ""
    probed = "**yes**" if t["probed"] else "no"
    return (
        f"The test is {verdict}{why}. MR-Search's EM at attempt {t['k']}: {t[MR]:.1f}; K = 1's best EM@k: "
        f"{t['baseline_best']:.1f} (k = {t['baseline_best_k']}); margin {t['margin']:+.1f} points, 95% interval "
        f"{_interval(t['ci95'])} (question-level paired bootstrap, {t['bootstrap']['resamples']:,} resamples, seed "
        f"{t['bootstrap']['seed']}). {t['questions']} test questions x {len(t['seeds'])} seed(s): "
        f"{per_arm[MR]} greedy meta-episodes per arm, {counted} counted over {len(per_arm)} arms. Split "
        f"`{t['split']}` (`{t['parquet']}`); probed before the run: {probed}; {t['probed_why']}."
    )


def budget_section(comparison: Mapping[str, Any]) -> list[str]:
    """The budget's heading, what it matched and its table (equal updates: the tokens beside, not matched)."""
    tokens = (
        "Model-written tokens of a step: `mr_search/model_tokens` (what the policy wrote, loss mask 1; passages, "
        "reflection turns and corrective messages left out). "
    )
    sampled = (
        "Sampled tokens (verl's `response_length/mean` x rows: everything after the prompt) are shown, not matched."
    )
    if comparison["plan"]["budget"].get("kind") == "updates":
        return [
            "## Equal updates; model-written tokens beside them",
            "",
            tokens + "Every arm trained the plan's steps and its last checkpoint is evaluated (the primary budget); "
            "the ratio is its tokens / MR-Search's at the same step, the compute-fair reading. " + sampled,
            "",
            budget_table(comparison),
        ]
    return [
        "## Equal budgets of model-written tokens",
        "",
        tokens + "The budget is the seed's whole MR-Search run; every other arm's checkpoint evaluated is its step "
        "closest to it (ratio: its tokens / MR-Search's). " + sampled,
        "",
        budget_table(comparison),
        "",
        tolerance_text(comparison),
    ]


def tolerance_text(comparison: Mapping[str, Any]) -> str:
    """Which arms the step granularity left outside the token tolerance (their ratios are in the tables)."""
    tolerance = float(comparison["plan"]["budget"]["tolerance"])
    names = labels(comparison)
    outside = [names[n] for n, b in comparison["budget"].items() if not b["within_tolerance"]]
    if not outside:
        return f"Every arm's evaluated checkpoint is within {tolerance:.0%} of MR-Search's model-written tokens."
    return (
        f"**Outside the {tolerance:.0%} tolerance** on some seed: {', '.join(outside)} (no step of theirs came closer; "
        "a step of theirs is a large share of the budget)."
    )


def arms_table(comparison: Mapping[str, Any]) -> str:
    """Every arm's figure and MR-Search's margin over it, with its budget (means over seeds)."""
    t, names = comparison["final_answer_test"], labels(comparison)
    lines = [
        "| arm | figure | EM | MR-Search minus it | 95% interval | steps | model-written tokens | sampled tokens |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for name in comparison["arms"]:
        b = comparison["budget"][name]
        budget = (
            f"{_mean(b['steps']):.0f} | {_mean(b['model_tokens']):,.0f} (x{_mean(b['ratio']):.2f}) "
            f"| {_mean(b['response_tokens']):,.0f}"
        )
        if name == MR:
            lines.append(f"| {names[name]} | EM@{t['k']} | {t[MR]:.1f} | - | - | {budget} |")
            continue
        o = t["other_arms"][name]
        figure = f"EM@{o['k']}" if o["rule"] == "last" else f"best EM@k: k = {o['k']}"
        head = " (the test)" if name == K1 else ""
        lines.append(
            f"| {names[name]}{head} | {figure} | {o['figure']:.1f} | {o['margin']:+.1f} | {_interval(o['ci95'])} "
            f"| {budget} |"
        )
    return "\n".join(lines)


def kinds_table(comparison: Mapping[str, Any]) -> str:
    t, names = comparison["final_answer_test"], labels(comparison)
    others = [n for n in comparison["arms"] if n not in (MR, K1)]
    head = ["hops", "questions", f"MR-Search EM@{t['k']}", "K = 1 best (k)", "margin", "95% interval"]
    head += [names[n] for n in others]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for kind, row in t["by_hops"].items():
        cells = [
            kind,
            str(row["questions"]),
            f"{row[MR]:.1f}",
            f"{row['baseline_best']:.1f} ({row['baseline_best_k']})",
        ]
        cells += [f"{row['margin']:+.1f}", _interval(row["ci95"])] + [f"{row['arms'][n]:.1f}" for n in others]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def _mean(values: Sequence[float]) -> float:
    return sum(values) / len(values)


def em_table(comparison: Mapping[str, Any], source: str = AVERAGE, key: str = "em") -> str:
    """Rows: the warm start and every arm; columns: attempt 1..K_eval (mean ± std over seeds)."""
    names = labels(comparison)
    present = [m for m in names if m in comparison["heldout"] and source in comparison["heldout"][m]]
    k = max(len(comparison["heldout"][m][source][key]) for m in present)
    lines = ["| model | " + " | ".join(f"@{i}" for i in range(1, k + 1)) + " |", "|---|" + "---|" * k]
    for method in present:
        cells = [Spread.from_dict(e).text() for e in comparison["heldout"][method][source][key]]
        cells += ["-"] * (k - len(cells))
        lines.append(f"| {names[method]} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def budget_table(comparison: Mapping[str, Any]) -> str:
    names = labels(comparison)
    lines = [
        "| seed | arm | steps run | step evaluated | model-written tokens | ratio | sampled tokens |",
        "|---|---|---|---|---|---|---|",
    ]
    for seed in comparison["per_seed"]:
        for name, b in seed["budget"].items():
            lines.append(
                f"| {seed['seed']} | {names[name]} | {b['steps_run']} | {b['step']} | {b['model_tokens']:,.0f} "
                f"| {b['ratio']:.2f} | {b['response_tokens']:,.0f} |"
            )
    return "\n".join(lines)


def training_table(comparison: Mapping[str, Any]) -> str:
    """Per seed and arm: EM (%) of the sampled rollouts at the first and the last step, and the step time."""
    names = labels(comparison)
    lines = [
        "| seed | arm | steps | EM@1 first → last | EM@K first → last | mean s/step |",
        "|---|---|---|---|---|---|",
    ]
    for seed in comparison["per_seed"]:
        for name, curve in seed["training"].items():
            if not curve:
                continue
            first, last = curve[0]["em"], curve[-1]["em"]
            times = [r["seconds"] for r in curve if r["seconds"] is not None]
            mean_s = f"{sum(times) / len(times):.1f}" if times else "-"
            lines.append(
                f"| {seed['seed']} | {names[name]} | {len(curve)} | {100 * first[0]:.1f} → {100 * last[0]:.1f} "
                f"| {100 * first[-1]:.1f} → {100 * last[-1]:.1f} | {mean_s} |"
            )
    return "\n".join(lines)


def _meta_value(value: Any) -> str:
    """One line of the run's meta: a list (each earlier start's machine) joined with semicolons."""
    return "; ".join(map(str, value)) if isinstance(value, list) else str(value)


def render_report(
    comparison: Mapping[str, Any], history: Sequence[Mapping[str, Any]], investigation: str | None = None
) -> str:
    meta, t = comparison.get("meta", {}), comparison["final_answer_test"]
    hypothesis = comparison.get("next_hypothesis")
    parts = [comparison["plan_text"].rstrip(), "", "## The run", ""]
    parts += [f"- {key}: {_meta_value(value)}" for key, value in meta.items()]
    if comparison.get("plan_gate"):
        parts.append(
            f"- plan committed at {comparison['plan_committed_at']} ({comparison['plan_commit'][:12]}); "
            f"first launch at {comparison.get('first_launch_at')}"
        )
    elif comparison.get("plan_gate") is False:
        parts.append("- plan gate off (PLAN_GATE=0): a run that tests nothing")
    if comparison.get("records"):
        parts.append(
            f"- per-question records: `{comparison['records']}` (`python -m mr_search_embedded.compare "
            "recompute <report folder>` recomputes the test from them)"
        )
    parts.append(f"- seeds finished: {', '.join(map(str, comparison['seeds']))}")
    if comparison["unfinished_seeds"]:
        parts.append(f"- seeds NOT finished (left out): {', '.join(map(str, comparison['unfinished_seeds']))}")
    parts += [
        "",
        f"## Result: the final-answer test is {'met' if t['met'] else 'not met'}",
        "",
        final_test_text(comparison),
        "",
        "### Every arm: its figure, MR-Search's margin over it, its budget (means over seeds)",
        "",
        arms_table(comparison),
        "",
        "### By question kind",
        "",
        kinds_table(comparison),
        "",
        "## What comes next",
        "",
        hypothesis_paragraph(t["met"], Hypothesis(**hypothesis) if hypothesis else None),
        "",
        "## Secondary: the reflection gain EM@K - EM@1 (points, macro average over data sources)",
        "",
        "The earlier harness's test: " + GainVerdict.from_dict(comparison["reflection_gain"]).text(),
        "",
        em_table(comparison, key="gain"),
        "",
        "## Test EM at each attempt (average over data sources)",
        "",
        em_table(comparison),
        "",
        f"![EM vs attempt]({EM_VS_ATTEMPT})",
        "",
    ]
    for source in comparison["sources"]:
        if source != AVERAGE:
            parts += [f"### {source}", "", em_table(comparison, source), ""]
    parts += [*budget_section(comparison), ""]
    parts += [
        "## Training EM (sampled rollouts, temperature 1), up to the evaluated step",
        "",
        training_table(comparison),
        "",
        f"![EM vs step]({EM_VS_STEP})",
        "",
    ]
    if comparison.get("retries"):
        parts += [
            "## What the retries did (greedy test evaluation, counted from the trajectories)",
            "",
            retry_table(comparison["retries"], labels(comparison), [s for s in comparison["sources"] if s != AVERAGE]),
            "",
        ]
    if investigation:
        parts += ["## Investigation", "", investigation.strip(), ""]
    parts += ["## History (every report run, appended)", "", history_table(history), ""]
    return "\n".join(parts)
