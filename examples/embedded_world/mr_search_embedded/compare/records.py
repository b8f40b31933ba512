"""The per-question records of a comparison's final evaluation, and its test recomputed from them alone.

``records.jsonl.xz`` (one JSON line per question, arm, seed and attempt, xz-compressed) is written beside the report
and committed with it: ``python -m mr_search_embedded.compare recompute REPORT_DIR`` rebuilds the final-answer test
(the question-level paired bootstrap of final_test.py, same resamples and seed) and the interval over seeds from
that file and the arms in ``comparison.json``, without the run folders. Each line:
``{"question", "split", "hops", "arm", "seed", "attempt", "ran", "answer", "em"}``; an attempt that did not run
(the context filled) keeps the last one's answer and EM, as the evaluation scores it, with ``ran`` false.
"""

from __future__ import annotations

import json
import lzma
import math
import statistics
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any, Final

import numpy as np

from mr_search_embedded.compare.arms import K1, MR, Arm
from mr_search_embedded.compare.final_test import ArmScores, final_answer_test
from mr_search_embedded.compare.layout import TRAJECTORIES, SeedDirs

RECORDS: Final = "records.jsonl.xz"
# Two-sided 95% Student t quantiles by degrees of freedom (seeds - 1); the normal 1.96 beyond 30.
_T95: Final = {
    1: 12.706,
    2: 4.303,
    3: 3.182,
    4: 2.776,
    5: 2.571,
    6: 2.447,
    7: 2.365,
    8: 2.306,
    9: 2.262,
    10: 2.228,
    15: 2.131,
    20: 2.086,
    30: 2.042,
}


def _attempt_rows(
    record: Mapping[str, Any], arm: str, seed: int | None, split: str, hops: str, attempts: int
) -> Iterable[dict[str, Any]]:
    done = record.get("attempts") or []
    for k in range(attempts):
        source = done[min(k, len(done) - 1)] if done else {}
        yield {
            "question": str(record["uid"]),
            "split": split,
            "hops": hops,
            "arm": arm,
            "seed": seed,
            "attempt": k + 1,
            "ran": k < len(done),
            "answer": source.get("answer"),
            "em": float(source.get("em", 0.0)),
        }


def collect(
    dirs: Sequence[SeedDirs], arms: Sequence[Arm], order: Sequence[str], kinds: Mapping[str, str], split: str
) -> list[dict[str, Any]]:
    """The records of every arm on every evaluated seed, questions in ``order`` (the test's: the bootstrap draws
    question indices, so the order is part of the figure)."""
    position = {uid: i for i, uid in enumerate(order)}
    rows: list[dict[str, Any]] = []
    for d in dirs:
        for arm in arms:
            path = d.evaluation(arm.shape) / TRAJECTORIES
            with path.open(encoding="utf-8") as handle:
                found = [json.loads(line) for line in handle if line.strip()]
            mine = sorted((r for r in found if r.get("method") == arm.name), key=lambda r: position[str(r["uid"])])
            for record in mine:
                uid = str(record["uid"])
                rows.extend(
                    _attempt_rows(record, arm.name, d.seed, split, kinds.get(uid, "unknown"), arm.eval_attempts)
                )
    return rows


def write(rows: Sequence[Mapping[str, Any]], path: Path) -> Path:
    with lzma.open(path, "wt", encoding="utf-8") as handle:
        for row in rows:
            handle.write(json.dumps(row, sort_keys=True) + "\n")
    return path


def read(path: Path) -> list[dict[str, Any]]:
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"{path}: no records (make compare writes {RECORDS} beside its report)")
    with lzma.open(path, "rt", encoding="utf-8") as handle:
        return [json.loads(line) for line in handle if line.strip()]


def scores_from(rows: Sequence[Mapping[str, Any]], arms: Sequence[Arm]) -> dict[str, ArmScores]:
    """``{arm: ArmScores}`` from records: EM (%) per seed, question (in file order) and attempt."""
    out = {}
    for arm in arms:
        mine = [r for r in rows if r["arm"] == arm.name]
        seeds = tuple(sorted({int(r["seed"]) for r in mine}))
        uids = tuple(dict.fromkeys(r["question"] for r in mine))
        if not mine:
            raise ValueError(f"records: none of arm {arm.name}")
        em = np.zeros((len(seeds), len(uids), arm.eval_attempts))
        s_at, q_at = {s: i for i, s in enumerate(seeds)}, {u: i for i, u in enumerate(uids)}
        for r in mine:
            em[s_at[int(r["seed"])], q_at[r["question"]], int(r["attempt"]) - 1] = 100.0 * float(r["em"])
        out[arm.name] = ArmScores(arm, seeds, uids, em)
    return out


def seed_interval(scores: Mapping[str, ArmScores]) -> dict[str, Any]:
    """The final-answer margin per seed (MR-Search's last attempt against K = 1's best attempt, each over the
    questions) and a Student t 95% interval over the seeds."""
    mr, k1 = scores[MR], scores[K1]
    margins = []
    for s in range(len(mr.seeds)):
        reference = float(mr.em[s, :, -1].mean())
        baseline = k1.em[s].mean(axis=0)
        best = float(baseline[-1] if k1.arm.final == "last" else baseline.max())
        margins.append(reference - best)
    mean = statistics.fmean(margins)
    if len(margins) < 2:
        return {"per_seed": margins, "mean": mean, "ci95": [math.nan, math.nan], "unit": "seed"}
    df = len(margins) - 1
    quantile = _T95.get(df) or next((v for k, v in sorted(_T95.items()) if k >= df), 1.96)
    half = quantile * statistics.stdev(margins) / math.sqrt(len(margins))
    return {"per_seed": margins, "mean": mean, "ci95": [mean - half, mean + half], "unit": "seed"}


def recompute(report_dir: Path) -> dict[str, Any]:
    """The final-answer test and the seed interval from ``report_dir``'s records and ``comparison.json``'s arms and
    bootstrap settings."""
    report_dir = Path(report_dir)
    comparison = json.loads((report_dir / "comparison.json").read_text(encoding="utf-8"))
    fields = set(Arm.__dataclass_fields__)
    arms = [Arm(**{k: v for k, v in a.items() if k in fields}) for a in comparison["arms"].values()]
    rows = read(report_dir / RECORDS)
    scores = scores_from(rows, arms)
    kinds = {r["question"]: r["hops"] for r in rows}
    stored = comparison["final_answer_test"]
    split = {
        "split": stored.get("split"),
        "parquet": stored.get("parquet"),
        "probed": stored.get("probed"),
        "reason": stored.get("probed_why", ""),
    }
    boot = stored["bootstrap"]
    test = final_answer_test(scores, kinds, split, boot["resamples"], boot["seed"])
    return {"final_answer_test": test, "seed_interval": seed_interval(scores)}


def render(result: Mapping[str, Any]) -> str:
    test, seeds = result["final_answer_test"], result["seed_interval"]
    lo, hi = test["ci95"]
    slo, shi = seeds["ci95"]
    lines = [
        f"final-answer test (test split, {test['questions']} questions, seeds {test['seeds']}):",
        f"  MR-Search EM@{test['k']} {test['mr_search']:.1f} against K = 1's best EM@{test['baseline_best_k']} "
        f"{test['baseline_best']:.1f}: margin {test['margin']:+.1f} points",
        f"  95% interval over questions (paired bootstrap, {test['bootstrap']['resamples']} resamples): "
        f"[{lo:+.1f}, {hi:+.1f}]; met: {test['met']}",
        f"  95% interval over seeds (t, {len(seeds['per_seed'])} seeds): [{slo:+.1f}, {shi:+.1f}]; per seed "
        + ", ".join(f"{m:+.1f}" for m in seeds["per_seed"]),
    ]
    for name, other in test["other_arms"].items():
        olo, ohi = other["ci95"]
        lines.append(f"  against {name}: margin {other['margin']:+.1f}, 95% interval [{olo:+.1f}, {ohi:+.1f}]")
    return "\n".join(lines)
