"""Builds the comparison (a plain dict, saved as comparison.json) from a work folder (see layout.py)."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from mr_search.training_log import StepRecord, cumulative_tokens, read_steps
from mr_search_embedded.compare.aggregate import (
    AVERAGE,
    em_by_attempt,
    em_curve,
    gain_by_attempt,
    load_results,
    sources_of,
)
from mr_search_embedded.compare.budget import read_match
from mr_search_embedded.compare.layout import BASELINE, MR, WARM, seed_dirs, warm_results
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
            "response_tokens": s.response_tokens,
            "cumulative_tokens": total,
            "seconds": s.seconds,
        }
        for s, total in zip(steps, cumulative_tokens(steps), strict=True)
    ]


def evaluation_settings(results: Mapping[str, Any]) -> tuple[Any, Any, bool]:
    """(K_eval, questions, outcome feedback) of an evaluation's results.json: what makes two evaluations
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
            f"the evaluations differ ({listed}); re-run make compare with one K_EVAL, MAX_QUESTIONS "
            "and OUTCOME_FEEDBACK on the same WORK_DIR: it evaluates again what was evaluated otherwise"
        )


def build_comparison(work: Path, rows: Mapping[str, int], gain_attempt: int = 3) -> dict[str, Any]:
    """Everything the report shows: per-seed figures, held-out EM per attempt (mean and spread), training curves.

    ``rows``: rows per training step of each run (``{"mr_search": B*n, "baseline": B*n}``). Seeds without an
    evaluation yet are listed under ``unfinished_seeds`` and left out of the aggregates. ``gain_attempt``: the
    attempt of the reflection-gain test (verdict.py; MR-Search's training K, the paper's 3; at most K_eval).
    """
    work = Path(work)
    missing = {MR, BASELINE} - set(rows)
    if missing:
        raise ValueError(f"rows: missing {sorted(missing)}; give the rows per step of both runs")
    meta_path = work / "meta.json"
    meta = json.loads(meta_path.read_text(encoding="utf-8")) if meta_path.is_file() else {}
    seeds, unfinished, evaluations = [], [], {}
    for dirs in seed_dirs(work):
        if not dirs.finished:
            unfinished.append(dirs.seed)
            continue
        results = load_results(dirs.results)
        evaluations[f"seed {dirs.seed}"] = results
        match = read_match(dirs.budget)
        seeds.append(
            {
                "seed": dirs.seed,
                "budget": match.as_dict(),
                "heldout": {m: {src: em_curve(results, m, src) for src in sources_of(results)} for m in (MR, BASELINE)},
                "training": {
                    MR: _training_curve(read_steps(dirs.mr_run, rows[MR])),
                    # up to the evaluated checkpoint: the comparison is at equal sampled tokens
                    BASELINE: _training_curve(
                        [s for s in read_steps(dirs.baseline_run, rows[BASELINE]) if s.step <= match.baseline_step]
                    ),
                },
            }
        )
    if not seeds:
        raise ValueError(f"{work}: no finished seed (seed_<s>/eval/results.json and seed_<s>/budget.json)")
    warm_path = warm_results(work)
    warm = load_results(warm_path) if warm_path.is_file() else None
    _check_same_settings({**evaluations, **({"warm start": warm} if warm is not None else {})})
    sources = list(seeds[0]["heldout"][MR])
    heldout: dict[str, Any] = {}
    for method in (MR, BASELINE):
        heldout[method] = {src: _curve_stats([s["heldout"][method][src] for s in seeds]) for src in sources}
    if warm is not None:
        heldout[WARM] = {src: _curve_stats([em_curve(warm, WARM, src)]) for src in sources_of(warm)}
    k_eval = len(heldout[MR][AVERAGE]["em"]) if AVERAGE in heldout[MR] else 3
    return {
        "meta": meta,
        "retries": count_retries(work, sorted({min(3, k_eval), k_eval})),
        "rows_per_step": dict(rows),
        "seeds": [s["seed"] for s in seeds],
        "unfinished_seeds": unfinished,
        "sources": sources,
        "heldout": heldout,
        "per_seed": seeds,
        "verdict": gain_verdict(seeds, min(gain_attempt, k_eval)).as_dict() if k_eval > 1 else None,
    }


def headline(comparison: Mapping[str, Any], attempt: int) -> dict[str, float]:
    """Mean held-out EM (average over sources) at ``attempt`` (1-based) of each method present."""
    out = {}
    for method, by_source in comparison["heldout"].items():
        em = by_source[AVERAGE]["em"]
        if attempt <= len(em):
            out[method] = float(em[attempt - 1]["mean"])
    return out
