"""Builds the comparison (a plain dict, saved as comparison.json) from a work folder (see layout.py)."""

from __future__ import annotations

import json
import statistics
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from mr_search.runlog.training_log import StepRecord, cumulative_tokens, read_steps
from mr_search_embedded.compare import gate, records
from mr_search_embedded.compare.aggregate import em_by_attempt, em_curve, gain_by_attempt, load_results, sources_of
from mr_search_embedded.compare.arms import MR, WARM, Arm
from mr_search_embedded.compare.budget import read_match
from mr_search_embedded.compare.final_test import final_answer_test, load_scores, question_kinds
from mr_search_embedded.compare.hypothesis import Hypothesis
from mr_search_embedded.compare.layout import RESULTS, TRAJECTORIES, SeedDirs, seed_dirs, warm_evaluation
from mr_search_embedded.compare.plan import arms_of, read_plan
from mr_search_embedded.compare.retries import count_retries
from mr_search_embedded.compare.verdict import gain_verdict


def _curve_stats(curves: Sequence[Sequence[float]]) -> dict[str, Any]:
    return {
        "em": [s.as_dict() for s in em_by_attempt(curves)],
        "gain": [s.as_dict() for s in gain_by_attempt(curves)],
        "per_seed": [list(c) for c in curves],
    }


def _training_curve(steps: Sequence[StepRecord]) -> list[dict[str, Any]]:
    return [
        {
            "step": s.step,
            "em": list(s.em),
            "model_tokens": s.model_tokens,
            "response_tokens": s.response_tokens,
            "cumulative_model_tokens": model,
            "cumulative_tokens": response,
            "seconds": s.seconds,
        }
        for s, model, response in zip(steps, cumulative_tokens(steps, "model"), cumulative_tokens(steps), strict=True)
    ]


def evaluation_settings(results: Mapping[str, Any]) -> tuple[Any, Any, bool]:
    """(K_eval, questions, outcome feedback) of an evaluation's results.json: what makes two evaluations of one shape
    comparable (evaluations from before the outcome-feedback option had none)."""
    meta = results.get("meta", {})
    return meta.get("K_eval"), meta.get("questions"), bool(meta.get("outcome feedback", False))


def _check_same_settings(evaluations: Mapping[str, Mapping[str, Any]]) -> None:
    settings = {name: evaluation_settings(results) for name, results in evaluations.items()}
    if len(set(settings.values())) > 1:
        listed = "; ".join(
            f"{name}: K_eval={k}, {q} questions, outcome feedback {'on' if fb else 'off'}"
            for name, (k, q, fb) in settings.items()
        )
        raise ValueError(
            f"the evaluations differ ({listed}); re-run make compare on the same WORK_DIR with the knobs of its "
            "plan: it evaluates again what was evaluated otherwise"
        )


def _launch_overhead(dirs: Sequence[SeedDirs], arms: Sequence[Arm], rows: int) -> float | None:
    """Mean seconds a launch took beyond its logged steps (start-up, checkpoints), from the ``<arm>.times`` files."""
    walls, steps, launches = 0.0, 0.0, 0
    for d in dirs:
        for arm in arms:
            path = d.times(arm.name)
            if not path.is_file():
                continue
            spans = [line.split() for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
            walls += sum(float(end) - float(start) for start, end, *_ in spans)
            launches += len(spans)
            steps += sum(s.seconds or 0.0 for s in read_steps(d.run(arm.name), rows))
    return (walls - steps) / launches if launches else None


def measured_timings(dirs: Sequence[SeedDirs], arms: Sequence[Arm], rows: int) -> dict[str, Any]:
    """What this run measured, for the next plan's wall time (walltime.py reads it back)."""
    step_seconds = {}
    for arm in arms:
        times = [s.seconds for d in dirs for s in read_steps(d.run(arm.name), rows) if s.seconds is not None]
        if times:
            step_seconds[arm.name] = statistics.fmean(times)
    reference_turns = next(a.turns for a in arms if a.name == MR)
    costs = []
    for d in dirs:
        for shape in {a.shape for a in arms}:
            meta = load_results(d.results(shape)).get("meta", {})
            turns = next(a.turns for a in arms if a.shape == shape)
            models = len(str(meta.get("models", "")).split(","))
            units = models * meta.get("questions", 0) * meta.get("K_eval", 0) * turns / reference_turns
            if meta.get("wall time (s)") and units:
                costs.append(float(meta["wall time (s)"]) / units)
    return {
        "step_seconds": step_seconds,
        "launch_seconds": _launch_overhead(dirs, arms, rows),
        "eval_seconds_per_question_attempt": statistics.fmean(costs) if costs else None,
    }


def _budget_summary(per_seed: Sequence[Mapping[str, Any]], arms: Sequence[Arm], tolerance: float) -> dict[str, Any]:
    out = {}
    for arm in arms:
        matches = [s["budget"][arm.name] for s in per_seed]
        out[arm.name] = {
            "steps": [m["step"] for m in matches],
            "model_tokens": [m["model_tokens"] for m in matches],
            "response_tokens": [m["response_tokens"] for m in matches],
            "ratio": [m["ratio"] for m in matches],
            "within_tolerance": all(abs(m["ratio"] - 1.0) <= tolerance for m in matches),
        }
    return out


def _split_state(plan: Mapping[str, Any], work: Path) -> dict[str, Any]:
    """What the final evaluation read, and whether anything else read it first (re-checked now: a probe may have
    read it during the run)."""
    from mr_search_embedded.reads import probed

    splits = plan.get("splits", {})
    test = Path(splits.get("test", ""))
    state: dict[str, Any] = {"split": plan.get("split", "test"), "parquet": str(test)}
    if test.is_file():
        dev = Path(splits["dev"]) if splits.get("dev") and Path(splits["dev"]).is_file() else None
        state.update(probed(test, dev, work).as_dict())
    elif plan.get("probed") is not None:
        state.update(plan["probed"], reason=f"{plan['probed']['reason']} (as the plan found it; {test} is gone)")
    else:
        state.update(probed=True, reason=f"unknown: {test} is not on this machine; counted as probed")
    return state


def build_comparison(work: Path, rows: int, hypothesis: Hypothesis | None = None) -> dict[str, Any]:
    """Everything the report shows: the plan, the final-answer test, per-arm EM per attempt, budgets, curves.

    ``rows``: rows per training step (questions x trajectories), the same for every arm. Planned seeds without every
    arm's match and evaluation are listed under ``unfinished_seeds`` and left out of everything.
    """
    work = Path(work)
    plan, plan_text = read_plan(work)
    arms = arms_of(plan)
    meta_path = work / "meta.json"
    meta = json.loads(meta_path.read_text(encoding="utf-8")) if meta_path.is_file() else {}
    planned = set(plan["seeds"])
    done = [d for d in seed_dirs(work) if d.seed in planned and d.finished((a.name, a.shape) for a in arms)]
    unfinished = sorted(planned - {d.seed for d in done})
    if not done:
        raise ValueError(f"{work}: no finished seed (every arm's budget_<arm>.json and eval_<shape>/{RESULTS})")
    shapes = sorted({a.shape for a in arms})
    per_seed: list[dict[str, Any]] = []
    evaluations: dict[str, dict[str, Any]] = {shape: {} for shape in shapes}
    for d in done:
        results = {shape: load_results(d.results(shape)) for shape in shapes}
        for shape, r in results.items():
            evaluations[shape][f"seed {d.seed}"] = r
        matches = {a.name: read_match(d.budget(a.name)) for a in arms}
        per_seed.append(
            {
                "seed": d.seed,
                "budget": {name: m.as_dict() for name, m in matches.items()},
                "heldout": {
                    a.name: {src: em_curve(results[a.shape], a.name, src) for src in sources_of(results[a.shape])}
                    for a in arms
                },
                "training": {
                    a.name: _training_curve(
                        [s for s in read_steps(d.run(a.name), rows) if s.step <= matches[a.name].step]
                    )
                    for a in arms
                },
            }
        )
    reference = next(a for a in arms if a.name == MR)
    warm_path = warm_evaluation(work, reference.shape) / RESULTS
    warm = load_results(warm_path) if warm_path.is_file() else None
    for shape, same in evaluations.items():
        warm_too = {"warm start": warm} if warm is not None and shape == reference.shape else {}
        _check_same_settings({**same, **warm_too})
    sources = list(per_seed[0]["heldout"][MR])
    heldout: dict[str, Any] = {
        a.name: {src: _curve_stats([s["heldout"][a.name][src] for s in per_seed]) for src in sources} for a in arms
    }
    if warm is not None:
        heldout[WARM] = {src: _curve_stats([em_curve(warm, WARM, src)]) for src in sources_of(warm)}
    scores = {MR: load_scores(done, reference)}
    scores.update({a.name: load_scores(done, a, scores[MR].uids) for a in arms if a.name != MR})
    splits = plan.get("splits", {})
    test = Path(splits.get("test", ""))
    kinds = question_kinds(test) if test.is_file() else {}
    final = final_answer_test(
        scores,
        kinds,
        _split_state(plan, work),
        plan["bootstrap"]["resamples"],
        plan["bootstrap"]["seed"],
    )
    evaluated = [(None, warm_path.parent / TRAJECTORIES, (WARM,))] if warm is not None else []
    evaluated += [
        (d.seed, d.evaluation(s) / TRAJECTORIES, [a.name for a in arms if a.shape == s]) for d in done for s in shapes
    ]
    return {
        "meta": meta,
        "plan": plan,
        "plan_text": plan_text,
        "engine": meta.get("engine", "cpu"),
        "positive_control": bool(meta.get("positive_control", False)),
        **gate.provenance(work),
        "arms": {a.name: {**a.as_dict(), "updates": [s["budget"][a.name]["step"] for s in per_seed]} for a in arms},
        "rows_per_step": rows,
        "seeds": [d.seed for d in done],
        "unfinished_seeds": unfinished,
        "sources": sources,
        "final_answer_test": final,
        "next_hypothesis": hypothesis.as_dict() if hypothesis is not None else None,
        "heldout": heldout,
        "reflection_gain": gain_verdict(per_seed, reference.eval_attempts).as_dict(),
        "budget": _budget_summary(per_seed, arms, float(plan["budget"]["tolerance"])),
        "per_seed": per_seed,
        "retries": count_retries(evaluated, [reference.eval_attempts]),
        "timings": measured_timings(done, arms, rows),
        # the per-question records (records.py), written beside the report by write_report, not kept in the json
        "_records": records.collect(done, arms, scores[MR].uids, kinds, str(plan.get("split", "test"))),
    }
