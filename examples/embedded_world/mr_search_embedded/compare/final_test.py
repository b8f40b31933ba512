"""The final-answer test on the test split: MR-Search's EM at its last attempt against the K = 1 baseline's best
EM@k (k <= K) under the same greedy evaluation, with a question-level paired bootstrap interval (bootstrap.py).

Per-question EM comes from each evaluation's ``trajectories.jsonl`` (an attempt that did not run keeps the last
one's answer, as ``mr_search.eval.metrics`` scores it); the question kind (hops) from the test parquet's
``extra_info``. The rule: met when the interval's low end is above 0 and the margin is not below 0.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

import numpy as np

from mr_search_embedded.compare.arms import K1, MR, Arm
from mr_search_embedded.compare.bootstrap import RESAMPLES, SEED, bootstrap_margin
from mr_search_embedded.compare.layout import TRAJECTORIES, SeedDirs

UNKNOWN_KIND: Final = "unknown"
RULE: Final = "met when the 95% interval's low end > 0 and the margin >= 0"


def attempt_em(record: Mapping[str, Any], k: int) -> float:
    """EM (0/1) of attempt ``k`` (0-based); an attempt that did not run keeps the last one's answer."""
    attempts = record["attempts"]
    if not attempts:
        return 0.0
    return float(attempts[min(k, len(attempts) - 1)]["em"])


def question_em(trajectories: Path, method: str, attempts: int) -> dict[str, list[float]]:
    """``{question uid: [EM of attempts 1..attempts]}`` of ``method`` in an evaluation's trajectories."""
    path = Path(trajectories)
    if not path.is_file():
        raise FileNotFoundError(f"{path}: no trajectories (python -m mr_search.eval writes {TRAJECTORIES})")
    out: dict[str, list[float]] = {}
    with path.open(encoding="utf-8") as handle:
        for line in handle:
            if not line.strip():
                continue
            record = json.loads(line)
            if record.get("method") != method:
                continue
            uid = str(record["uid"])
            if uid in out:
                raise ValueError(f"{path}: question {uid} evaluated twice for {method}; evaluate again")
            out[uid] = [attempt_em(record, k) for k in range(attempts)]
    if not out:
        raise ValueError(f"{path}: no trajectory of {method!r}; was it evaluated in this folder?")
    return out


def question_kinds(parquet: Path) -> dict[str, str]:
    """``{question uid: hops}`` of a verl parquet (``extra_info.hops``; ``unknown`` where absent). The uid is the
    evaluation's: ``extra_info.id``, else its index."""
    import pandas as pd

    kinds = {}
    for info in pd.read_parquet(parquet, columns=["extra_info"])["extra_info"]:
        info = dict(info or {})
        uid = str(info.get("id", info.get("index", "")))
        kinds[uid] = str(info["hops"]) if info.get("hops") is not None else UNKNOWN_KIND
    return kinds


@dataclass(frozen=True)
class ArmScores:
    """One arm's test EM (%) per seed, question and attempt."""

    arm: Arm
    seeds: tuple[int, ...]
    uids: tuple[str, ...]
    em: np.ndarray  # float [S, Q, K_eval]

    def columns(self) -> np.ndarray:
        """float ``[Q, J]``, seeds averaged: the columns its final figure is taken over (``Arm.final``)."""
        mean = self.em.mean(axis=0)
        return mean[:, -1:] if self.arm.final == "last" else mean

    def first_column(self) -> int:
        """1-based attempt of ``columns()``'s first column."""
        return self.arm.eval_attempts if self.arm.final == "last" else 1


def load_scores(seed_dirs: Sequence[SeedDirs], arm: Arm, uids: Sequence[str] | None = None) -> ArmScores:
    """``arm``'s scores over ``seed_dirs`` (each evaluated), questions in ``uids`` order (default: the first seed's)."""
    if not seed_dirs:
        raise ValueError(f"{arm.name}: no evaluated seed")
    per_seed = []
    for dirs in seed_dirs:
        per_seed.append(question_em(dirs.evaluation(arm.shape) / TRAJECTORIES, arm.name, arm.eval_attempts))
    order = list(uids) if uids is not None else list(per_seed[0])
    for dirs, scores in zip(seed_dirs, per_seed, strict=True):
        if set(scores) != set(order):
            raise ValueError(
                f"seed {dirs.seed}: {arm.name} was evaluated on other questions than the reference "
                f"({len(set(scores) ^ set(order))} differ); evaluate every arm on the same MAX_QUESTIONS"
            )
    em = np.array([[scores[uid] for uid in order] for scores in per_seed], dtype=np.float64) * 100.0
    return ArmScores(arm, tuple(d.seed for d in seed_dirs), tuple(order), em)


def _margin(reference: ArmScores, other: ArmScores, rows: np.ndarray, resamples: int, seed: int) -> dict[str, Any]:
    interval = bootstrap_margin(reference.columns()[rows, 0], other.columns()[rows], resamples, seed)
    figure = float(other.columns()[rows].mean(axis=0)[interval.best_column])
    return {
        "figure": figure,
        "k": other.first_column() + interval.best_column,
        "rule": other.arm.final,
        "margin": interval.margin,
        "ci95": interval.as_list(),
    }


def final_answer_test(
    scores: Mapping[str, ArmScores],
    kinds: Mapping[str, str],
    split: Mapping[str, Any],
    resamples: int = RESAMPLES,
    seed: int = SEED,
) -> dict[str, Any]:
    """comparison.json's ``final_answer_test``.

    Args:
        scores: ``{arm name: ArmScores}`` with ``mr_search`` and ``k1``, all on the same seeds and questions.
        kinds: ``{uid: hops}`` of the test questions (``question_kinds``).
        split: ``{"split", "parquet", "probed", ...}``: what was read, and whether it was seen before.
        resamples, seed: of the bootstrap.
    """
    for name in (MR, K1):
        if name not in scores:
            raise ValueError(f"final_answer_test: no scores of {name}; the test compares {MR} with {K1}")
    mr = scores[MR]
    for name, other in scores.items():
        if other.seeds != mr.seeds or other.uids != mr.uids:
            raise ValueError(f"final_answer_test: {name} has other seeds or questions than {MR}; align them first")
    everyone = np.arange(len(mr.uids))
    head = _margin(mr, scores[K1], everyone, resamples, seed)
    mr_figure = float(mr.columns()[:, 0].mean())
    by_kind: dict[str, Any] = {}
    for kind in sorted({kinds.get(uid, UNKNOWN_KIND) for uid in mr.uids}):
        rows = np.array([i for i, uid in enumerate(mr.uids) if kinds.get(uid, UNKNOWN_KIND) == kind])
        here = _margin(mr, scores[K1], rows, resamples, seed)
        by_kind[kind] = {
            "questions": len(rows),
            MR: float(mr.columns()[rows, 0].mean()),
            "baseline_best": here["figure"],
            "baseline_best_k": here["k"],
            "margin": here["margin"],
            "ci95": here["ci95"],
            "arms": {name: float(s.columns()[rows].mean(axis=0).max()) for name, s in scores.items()},
        }
    return {
        "k": mr.arm.eval_attempts,
        MR: mr_figure,
        "baseline_best": head["figure"],
        "baseline_best_k": head["k"],
        "margin": head["margin"],
        "ci95": head["ci95"],
        "questions": len(mr.uids),
        "seeds": list(mr.seeds),
        "trajectories": {name: int(s.em.shape[0] * s.em.shape[1]) for name, s in scores.items()},
        "split": split.get("split"),
        "parquet": split.get("parquet"),
        "probed": bool(split.get("probed")),
        "probed_why": split.get("reason", ""),
        "met": bool(head["ci95"][0] > 0 and head["margin"] >= 0),
        "rule": RULE,
        "bootstrap": {
            "unit": "test question, seeds averaged per question, paired across arms",
            "resamples": resamples,
            "seed": seed,
            "best_k_rechosen_per_resample": True,
        },
        "other_arms": {name: _margin(mr, s, everyone, resamples, seed) for name, s in scores.items() if name != MR},
        "by_hops": by_kind,
    }
